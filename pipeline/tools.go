package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/expr-lang/expr"
)

// Tool is a function the model may call that runs on the server.
type Tool struct {
	Name        string
	Description string
	// Parameters is a JSON Schema object.
	Parameters map[string]any
	Run        func(ctx context.Context, args map[string]any) (any, error)
}

// Builtins are the server's own tools: the current time and a
// calculator.
func Builtins() []Tool {
	return []Tool{
		{
			Name:        "current_time",
			Description: "The current date and time. Give a IANA time zone such as Europe/Paris for local time; UTC otherwise.",
			Parameters: map[string]any{"type": "object", "properties": map[string]any{
				"timezone": map[string]any{"type": "string", "description": "IANA time zone, e.g. Europe/Paris"}}},
			Run: func(_ context.Context, args map[string]any) (any, error) {
				loc := time.UTC
				if tz, _ := args["timezone"].(string); tz != "" {
					l, err := time.LoadLocation(tz)
					if err != nil {
						return nil, fmt.Errorf("unknown time zone %q", tz)
					}
					loc = l
				}
				now := time.Now().In(loc)
				return map[string]any{"time": now.Format(time.RFC3339), "weekday": now.Weekday().String(), "timezone": loc.String()}, nil
			},
		},
		{
			Name:        "calculator",
			Description: "Evaluates an arithmetic expression: + - * / % ** and parentheses, e.g. (3 + 4) * 2.5.",
			Parameters: map[string]any{"type": "object", "required": []any{"expression"}, "properties": map[string]any{
				"expression": map[string]any{"type": "string"}}},
			Run: func(_ context.Context, args map[string]any) (any, error) {
				e, _ := args["expression"].(string)
				if e == "" || len(e) > 256 {
					return nil, errors.New("give an expression of at most 256 characters")
				}
				// Numbers and operators only: no variables, no functions.
				prog, err := expr.Compile(e, expr.Env(map[string]any{}), expr.DisableAllBuiltins())
				if err != nil {
					return nil, fmt.Errorf("not an arithmetic expression: %v", err)
				}
				out, err := expr.Run(prog, map[string]any{})
				if err != nil {
					return nil, err
				}
				switch v := out.(type) {
				case int:
					return map[string]any{"result": v}, nil
				case float64:
					if math.IsInf(v, 0) || math.IsNaN(v) {
						return nil, errors.New("the result is not a number")
					}
					return map[string]any{"result": v}, nil
				}
				return nil, fmt.Errorf("the expression gives %T, not a number", out)
			},
		},
	}
}

func schema(m map[string]any) []byte {
	if m == nil {
		return nil
	}
	b, _ := json.Marshal(m)
	return b
}
