package storage

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Lease names the rooms one serving process holds, and its bot's
// participant in each, as of its last renewal.
type Lease struct {
	Worker string
	Rooms  []string
	// Bots are the participant SIDs of the process's bot, one per room.
	Bots []string
}

// RenewLease records that worker (one serving process of the agent
// named agent) is alive for ttl more and serves lease.Rooms, and claims
// the leases of the same agent's processes that expired: each expired
// lease is returned to exactly one caller, whichever deletes it first,
// so that exactly one process re-dispatches a dead one's rooms. Both
// happen in one round trip. The database's clock decides expiry, so
// that processes whose clocks disagree still agree on it.
func (p *Postgres) RenewLease(ctx context.Context, agent string, lease Lease, ttl time.Duration) ([]Lease, error) {
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO alicia_worker_leases (worker_id, agent_name, rooms, bots, expires_at)
		VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5))
		ON CONFLICT (worker_id) DO UPDATE SET rooms = excluded.rooms, bots = excluded.bots, expires_at = excluded.expires_at`,
		lease.Worker, agent, nonNil(lease.Rooms), nonNil(lease.Bots), ttl.Seconds())
	var expired []Lease
	b.Queue(`DELETE FROM alicia_worker_leases WHERE agent_name = $1 AND expires_at < now() AND worker_id <> $2
		RETURNING worker_id, rooms, bots`, agent, lease.Worker).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var l Lease
			if err := rows.Scan(&l.Worker, &l.Rooms, &l.Bots); err != nil {
				return err
			}
			expired = append(expired, l)
		}
		return rows.Err()
	})
	if err := p.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	return expired, nil
}

// EndLease removes a worker's lease: it stopped and handed its rooms
// over itself.
func (p *Postgres) EndLease(ctx context.Context, worker string) error {
	_, err := p.pool.Exec(ctx, `DELETE FROM alicia_worker_leases WHERE worker_id = $1`, worker)
	return err
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// ServedElsewhere reports whether a live lease of another of agent's
// processes names room.
func (p *Postgres) ServedElsewhere(ctx context.Context, agent, worker, room string) (bool, error) {
	var held bool
	err := p.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM alicia_worker_leases
		WHERE agent_name = $1 AND worker_id <> $2 AND expires_at > now() AND $3 = ANY(rooms))`, agent, worker, room).Scan(&held)
	return held, err
}
