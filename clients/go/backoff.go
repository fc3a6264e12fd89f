package ferry

import (
	"context"
	"sync/atomic"
	"time"
)

// The reconnect schedule of streams and sockets (docs/go-client.md): 1 s, 2 s, 4 s, …
// 32 s, then 32 s. Tests of this package shorten the first wait, atomically: goroutines that
// other tests' Subscriptions left behind may be reading it.
var (
	reconnectFirst atomic.Int64 // a time.Duration, 1 s
	reconnectMax   = 32 * time.Second
)

func init() { reconnectFirst.Store(int64(time.Second)) }

// reconnectDelay is the wait before reconnect number attempt (0-based).
func reconnectDelay(attempt int) time.Duration {
	d := time.Duration(reconnectFirst.Load())
	for i := 0; i < attempt && d < reconnectMax; i++ {
		d *= 2
	}
	return min(d, reconnectMax)
}

// sleepCtx waits d; false when ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
