package storage_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/reasoning"
	"github.com/alicia-voice/alicia/storage"
)

// One benchmark turn: 349 reasoning tokens that make 4 steps (the shape
// of reasoning/'s benchmark), 20 conversations at once.
const (
	tokensPerTurn = 349
	stepsPerTurn  = 4
	concurrent    = 20
)

// BenchmarkStepWrites compares Alicia's batched writer with the reference
// implementation's way of storing reasoning: per token, one INSERT of a
// step row and one UPDATE of the conversation's last stanza, on the turn's
// own goroutine. Each op is one turn of one conversation.
func BenchmarkStepWrites(b *testing.B) {
	b.Run("alicia-batched", func(b *testing.B) {
		url := testenv.Database(b)
		p, err := storage.OpenPostgres(context.Background(), storage.Config{DatabaseURL: url})
		if err != nil {
			b.Fatal(err)
		}
		for c := range concurrent {
			conv := fmt.Sprintf("c%d", c)
			p.SaveConversation(storage.Conversation{ID: conv, Owner: "u"})
		}
		var n int64
		var mu sync.Mutex
		start := time.Now()
		var wg sync.WaitGroup
		for c := range concurrent {
			wg.Add(1)
			go func() {
				defer wg.Done()
				conv := fmt.Sprintf("c%d", c)
				for t := c; t < b.N; t += concurrent {
					for s := range stepsPerTurn {
						p.SaveStep(reasoning.Step{ID: fmt.Sprintf("%s-%d-%d", conv, t, s), ConversationID: conv, PreviousID: "u",
							MessageID: fmt.Sprintf("%s-%d", conv, t), Index: int32(s + 1), Content: "a step of about eighty characters of reasoning text, typical of Qwen3",
							StartedAt: time.Now(), EndedAt: time.Now()})
					}
					mu.Lock()
					n += stepsPerTurn
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			b.Fatal(err)
		}
		elapsed := time.Since(start)
		p50, p95 := p.QueueLatency()
		b.ReportMetric(float64(n)/elapsed.Seconds(), "steps/s")
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "turns/s")
		b.ReportMetric(float64(p50.Microseconds())/1000, "p50-queue-ms")
		b.ReportMetric(float64(p95.Microseconds())/1000, "p95-queue-ms")
		b.ReportMetric(stepsPerTurn, "row-writes/turn")
	})
	// Paced: 20 conversations, each completing a step every 25 ms (a fast
	// model's pace), for the queue latency a turn's steps see in service.
	b.Run("alicia-paced", func(b *testing.B) {
		url := testenv.Database(b)
		p, err := storage.OpenPostgres(context.Background(), storage.Config{DatabaseURL: url})
		if err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		for c := range concurrent {
			conv := fmt.Sprintf("c%d", c)
			p.SaveConversation(storage.Conversation{ID: conv, Owner: "u"})
			wg.Add(1)
			go func() {
				defer wg.Done()
				for t := c; t < b.N; t += concurrent {
					for s := range stepsPerTurn {
						time.Sleep(25 * time.Millisecond)
						p.SaveStep(reasoning.Step{ID: fmt.Sprintf("%s-%d-%d", conv, t, s), ConversationID: conv, PreviousID: "u",
							MessageID: fmt.Sprintf("%s-%d", conv, t), Index: int32(s + 1), Content: "a step of reasoning", StartedAt: time.Now(), EndedAt: time.Now()})
					}
				}
			}()
		}
		wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			b.Fatal(err)
		}
		p50, p95 := p.QueueLatency()
		b.ReportMetric(float64(p50.Microseconds())/1000, "p50-queue-ms")
		b.ReportMetric(float64(p95.Microseconds())/1000, "p95-queue-ms")
	})
	b.Run("reference-per-token", func(b *testing.B) {
		url := testenv.Database(b)
		ctx := context.Background()
		pool, err := pgxpool.New(ctx, url)
		if err != nil {
			b.Fatal(err)
		}
		defer pool.Close()
		if _, err := pool.Exec(ctx, `
			CREATE TABLE ref_conversations (id TEXT PRIMARY KEY, last_server_stanza_id INTEGER NOT NULL DEFAULT -1);
			CREATE TABLE ref_reasoning_steps (id TEXT PRIMARY KEY DEFAULT md5(random()::text), message_id TEXT NOT NULL,
				content TEXT NOT NULL, sequence_number INTEGER NOT NULL, created_at TIMESTAMP NOT NULL DEFAULT NOW(),
				updated_at TIMESTAMP NOT NULL DEFAULT NOW(), deleted_at TIMESTAMP);
			CREATE INDEX ON ref_reasoning_steps (message_id, sequence_number) WHERE deleted_at IS NULL;`); err != nil {
			b.Fatal(err)
		}
		for c := range concurrent {
			if _, err := pool.Exec(ctx, `INSERT INTO ref_conversations (id) VALUES ($1)`, fmt.Sprintf("c%d", c)); err != nil {
				b.Fatal(err)
			}
		}
		var mu sync.Mutex
		var lat []time.Duration
		start := time.Now()
		var wg sync.WaitGroup
		for c := range concurrent {
			wg.Add(1)
			go func() {
				defer wg.Done()
				conv := fmt.Sprintf("c%d", c)
				var mine []time.Duration
				for t := c; t < b.N; t += concurrent {
					for tok := range tokensPerTurn {
						t0 := time.Now()
						if _, err := pool.Exec(ctx, `INSERT INTO ref_reasoning_steps (message_id, content, sequence_number) VALUES ($1, $2, $3)`,
							fmt.Sprintf("%s-%d", conv, t), " token", tok); err != nil {
							b.Error(err)
							return
						}
						if _, err := pool.Exec(ctx, `UPDATE ref_conversations SET last_server_stanza_id = last_server_stanza_id - 1 WHERE id = $1`, conv); err != nil {
							b.Error(err)
							return
						}
						mine = append(mine, time.Since(t0))
					}
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		slices.Sort(lat)
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "turns/s")
		if len(lat) > 0 {
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-token-ms")
			b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, "p95-token-ms")
		}
		b.ReportMetric(2*tokensPerTurn, "row-writes/turn")
	})
}
