package ferry

import (
	"context"
	"testing"
	"time"
)

func TestReconnectDelayDoublesFromOneToThirtyTwoSeconds(t *testing.T) {
	c, err := New("")
	if err != nil {
		t.Fatal(err)
	}
	reconnectDelay := c.reconnectDelay
	want := []time.Duration{1, 2, 4, 8, 16, 32, 32, 32}
	for i, w := range want {
		if got := reconnectDelay(i); got != w*time.Second {
			t.Errorf("reconnectDelay(%d) = %v, want %v", i, got, w*time.Second)
		}
	}
	if got := reconnectDelay(1000); got != 32*time.Second {
		t.Errorf("reconnectDelay(1000) = %v", got)
	}
}

func TestSleepCtxEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if sleepCtx(ctx, time.Minute) {
		t.Fatal("sleepCtx reported a full sleep on an ended context")
	}
	if time.Since(start) > time.Second {
		t.Fatal("sleepCtx did not return at once")
	}
	if !sleepCtx(context.Background(), time.Millisecond) {
		t.Fatal("sleepCtx(1ms) reported an ended context")
	}
}
