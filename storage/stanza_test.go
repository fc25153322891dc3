package storage_test

import (
	"context"
	"sync"
	"testing"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/storage"
)

// Stanza blocks never overlap, in either store, whoever reserves them:
// two stores on one database stand for two processes.
func TestStanzaBlocksNeverOverlap(t *testing.T) {
	url := testenv.Database(t)
	for name, stores := range map[string][]storage.Store{
		"memory":   {storage.NewMemory(storage.ReasoningPlain)},
		"postgres": {open(t, url, storage.ReasoningPlain, nil), open(t, url, storage.ReasoningPlain, nil)},
	} {
		t.Run(name, func(t *testing.T) {
			const n, size = 20, 16
			var mu sync.Mutex
			taken := map[int32]bool{}
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					first, err := stores[i%len(stores)].ReserveStanzas(context.Background(), "conv_blocks", size)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					defer mu.Unlock()
					for s := first; s < first+size; s++ {
						if taken[s] || s <= 0 {
							t.Errorf("stanza %d handed out twice (or not positive)", s)
						}
						taken[s] = true
					}
				}()
			}
			wg.Wait()
			if len(taken) != n*size {
				t.Fatalf("%d numbers reserved, want %d", len(taken), n*size)
			}
			// Another conversation counts on its own.
			if first, err := stores[0].ReserveStanzas(context.Background(), "conv_other", size); err != nil || first != 1 {
				t.Fatalf("another conversation starts at %d (%v)", first, err)
			}
		})
	}
}
