package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/alicia-voice/alicia/reasoning"
)

// preferencesChannel announces the identity whose preference changed.
const preferencesChannel = "alicia_preferences"

// listen keeps a connection listening for preference changes until ctx
// ends, reconnecting with backoff when it is lost.
func (p *Postgres) listen(ctx context.Context) {
	defer close(p.listenDone)
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := p.listenOnce(ctx)
		p.listening.Store(false)
		if ctx.Err() != nil {
			return
		}
		p.log.Warn("preference change listener lost; not caching preferences until it is back", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (p *Postgres) listenOnce(ctx context.Context) error {
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection is dedicated to LISTEN from now on: it never goes
	// back to the pool.
	pc := conn.Hijack()
	defer pc.Close(context.Background())
	if _, err := pc.Exec(ctx, "LISTEN "+preferencesChannel+"; LISTEN "+historyChannel); err != nil {
		return err
	}
	// Whatever was cached may have changed while nobody listened.
	p.prefMu.Lock()
	clear(p.prefs)
	p.epoch.Add(1)
	p.prefMu.Unlock()
	p.historyMissed()
	p.listening.Store(true)
	for {
		n, err := pc.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.Channel == historyChannel {
			p.historyAnnounced(n.Payload)
			continue
		}
		p.prefMu.Lock()
		delete(p.prefs, n.Payload)
		p.epoch.Add(1)
		p.prefMu.Unlock()
	}
}

func (p *Postgres) Mode(ctx context.Context, identity string) (reasoning.Mode, error) {
	p.prefMu.RLock()
	m, ok := p.prefs[identity]
	p.prefMu.RUnlock()
	if ok {
		return m, nil
	}
	epoch := p.epoch.Load()
	var mode string
	err := p.pool.QueryRow(ctx, `SELECT reasoning_mode FROM alicia_user_preferences WHERE identity = $1`, identity).Scan(&mode)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		m = reasoning.ModeUnset // the operator's default applies
	case err != nil:
		return reasoning.ModeOff, err
	default:
		m = reasoning.Mode(mode)
	}
	p.prefMu.Lock()
	if cur, ok := p.prefs[identity]; ok {
		m = cur // a SetMode won the race
	} else if p.listening.Load() && p.epoch.Load() == epoch {
		p.prefs[identity] = m
	}
	p.prefMu.Unlock()
	return m, nil
}

// SetMode writes at once rather than through the batched writer: a choice
// is rare, and whoever made it must read it back, from this process or
// another, as soon as the call returns; a queued write would let a cache
// invalidated by an earlier change read the older value meanwhile.
func (p *Postgres) SetMode(ctx context.Context, identity string, m reasoning.Mode) error {
	if !m.Valid() {
		return fmt.Errorf("storage: invalid reasoning mode %q", m)
	}
	epoch := p.epoch.Load()
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO alicia_user_preferences (identity, reasoning_mode, updated_at) VALUES ($1, $2, now())
			ON CONFLICT (identity) DO UPDATE SET reasoning_mode = excluded.reasoning_mode, updated_at = excluded.updated_at`,
			identity, string(m)); err != nil {
			return err
		}
		// Delivered at commit: every process drops its cached copy.
		_, err := tx.Exec(ctx, `SELECT pg_notify('`+preferencesChannel+`', $1)`, identity)
		return err
	})
	if err != nil {
		return fmt.Errorf("storage: saving the preference of %s: %w", identity, err)
	}
	p.prefMu.Lock()
	if p.listening.Load() && p.epoch.Load() == epoch {
		p.prefs[identity] = m
	} else {
		delete(p.prefs, identity) // another change was announced meanwhile
	}
	p.prefMu.Unlock()
	return nil
}
