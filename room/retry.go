package room

import (
	"context"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// policy is the room's one retry policy: exponential waits with jitter
// (so that many bots do not hammer a recovering server in step), from
// 250 ms up to 15 s. The worker's connection, joining a room and
// reserving stanza numbers all use it, and all stop waiting when their
// context ends.
func policy() *backoff.ExponentialBackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval = 250*time.Millisecond, 15*time.Second
	return b
}

// retry runs op until it succeeds, tries attempts were made (0: no
// bound) or ctx ends, waiting by the policy between attempts.
func retry[T any](ctx context.Context, log *slog.Logger, what string, tries uint, op func() (T, error)) (T, error) {
	return backoff.Retry(ctx, op, backoff.WithBackOff(policy()), backoff.WithMaxElapsedTime(0), backoff.WithMaxTries(tries),
		backoff.WithNotify(func(err error, wait time.Duration) {
			log.Warn(what+" failed; trying again", "err", err, "in", wait)
		}))
}
