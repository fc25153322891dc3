package pipeline

import (
	"context"
	"testing"
)

func TestBuiltins(t *testing.T) {
	tools := map[string]Tool{}
	for _, tl := range Builtins() {
		tools[tl.Name] = tl
	}
	ctx := context.Background()
	for expr, want := range map[string]any{"(3 + 4) * 2.5": 17.5, "2 ** 10": 1024.0, "7 % 3": 1, "10 / 4": 2.5} {
		got, err := tools["calculator"].Run(ctx, map[string]any{"expression": expr})
		if err != nil || got.(map[string]any)["result"] != want {
			t.Errorf("%s = %v (%v), want %v", expr, got, err, want)
		}
	}
	for _, bad := range []string{"", "len('abc')", "x + 1", "1 / 0"} {
		if got, err := tools["calculator"].Run(ctx, map[string]any{"expression": bad}); err == nil {
			t.Errorf("%q gave %v", bad, got)
		}
	}
	got, err := tools["current_time"].Run(ctx, map[string]any{"timezone": "Europe/Paris"})
	if err != nil || got.(map[string]any)["timezone"] != "Europe/Paris" {
		t.Fatalf("%v %v", got, err)
	}
	if _, err := tools["current_time"].Run(ctx, map[string]any{"timezone": "Mars/Olympus"}); err == nil {
		t.Fatal("an unknown time zone was accepted")
	}
}
