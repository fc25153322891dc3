package storage

import "context"

// Ping checks that the database answers, for readiness probes. The write
// queue's saturation is reported separately by Saturated.
func (p *Postgres) Ping(ctx context.Context) error { return p.pool.Ping(ctx) }
