package room

import (
	"context"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// retry runs op until it succeeds or ctx ends, waiting longer after each
// failure (exponential with jitter, from 100 ms up to 5 s). It is the one
// retry policy of the room: the worker's connection, joining a room and
// reserving stanza numbers.
func retry[T any](ctx context.Context, log *slog.Logger, what string, op func() (T, error)) (T, error) {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval = 100*time.Millisecond, 5*time.Second
	return backoff.Retry(ctx, op, backoff.WithBackOff(b), backoff.WithMaxElapsedTime(0),
		backoff.WithNotify(func(err error, wait time.Duration) {
			log.Warn(what+" failed; trying again", "err", err, "in", wait)
		}))
}
