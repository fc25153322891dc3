package storage_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/storage"
)

// A lapsed lease goes to exactly one of the processes that renew at the
// same moment, with the rooms of its last renewal; a live one, one ended
// cleanly, and another agent's go to nobody.
func TestLapsedLeaseIsClaimedOnce(t *testing.T) {
	p, err := storage.OpenPostgres(context.Background(), storage.Config{DatabaseURL: testenv.Database(t)})
	if err != nil {
		t.Fatal(err)
	}
	testenv.CleanupWithin(t, time.Minute, func(ctx context.Context) { _ = p.Close(ctx) })
	ctx := context.Background()
	renew := func(agent, worker string, ttl time.Duration, rooms ...string) []storage.Lease {
		t.Helper()
		var bots []string
		for _, r := range rooms {
			bots = append(bots, "PA_"+r)
		}
		got, err := p.RenewLease(ctx, agent, storage.Lease{Worker: worker, Rooms: rooms, Bots: bots}, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	// Every renewal claims what lapsed before it, so the lapsed leases are
	// made in an order where none is claimed before the survivors come.
	renew("alicia", "live", time.Minute, "r9")
	renew("alicia", "stopped", -time.Second, "r3")
	if err := p.EndLease(ctx, "stopped"); err != nil {
		t.Fatal(err)
	}
	renew("other-agent", "elsewhere", -time.Second, "r4")
	renew("alicia", "dead", time.Minute, "r0")
	// Its last renewal names other rooms, and is already over: the
	// process died right after it.
	renew("alicia", "dead", -time.Second, "r1", "r2")

	const survivors = 8
	claims := make([][]storage.Lease, survivors)
	var wg sync.WaitGroup
	for i := range survivors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := p.RenewLease(ctx, "alicia", storage.Lease{Worker: "survivor" + string(rune('a'+i))}, time.Minute)
			if err != nil {
				t.Error(err)
			}
			claims[i] = got
		}()
	}
	wg.Wait()
	var all []storage.Lease
	for _, c := range claims {
		all = append(all, c...)
	}
	if len(all) != 1 || all[0].Worker != "dead" || !slices.Equal(all[0].Rooms, []string{"r1", "r2"}) || !slices.Equal(all[0].Bots, []string{"PA_r1", "PA_r2"}) {
		t.Fatalf("claimed %+v, want the dead process's lease once, with rooms r1 and r2", all)
	}
	// Claimed means gone: the next renewal finds nothing to take.
	if got := renew("alicia", "live", time.Minute, "r9"); len(got) != 0 {
		t.Fatalf("claimed again: %+v", got)
	}
}
