package ferry_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	ferry "github.com/ferrymq/ferry/clients/go"
)

type topicStats struct {
	Depth    int `json:"depth"`
	InFlight int `json:"in_flight"`
}

type brokerStats struct {
	Totals struct {
		Acked    int `json:"acked"`
		Requeued int `json:"requeued"`
	} `json:"totals"`
	Topics map[string]topicStats `json:"topics"`
}

func stats(t *testing.T, base string) brokerStats {
	t.Helper()
	var s brokerStats
	if st := post(t, "GET", base+"/api/stats", "", &s); st != 200 {
		t.Fatalf("stats: %d", st)
	}
	return s
}

// runProcess runs Process on a goroutine; the channel gets its result.
func runProcess(ctx context.Context, c *ferry.Client, topic string, opts *ferry.ProcessOptions,
	h func(context.Context, *ferry.Message) error) <-chan error {
	done := make(chan error, 1)
	go func() { done <- c.Process(ctx, topic, opts, h) }()
	return done
}

func TestProcessAcksAndRequeuesAFailureWithItsReason(t *testing.T) {
	topic := topicName(t)
	publish(t, sharedURL(t), topic, `"ok 1"`)
	publish(t, sharedURL(t), topic, `"fails once"`)
	publish(t, sharedURL(t), topic, `"ok 2"`)
	c := newClient(t, sharedURL(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var seen []*ferry.Message
	all := make(chan struct{})
	done := runProcess(ctx, c, topic, &ferry.ProcessOptions{Prefetch: 5}, func(_ context.Context, m *ferry.Message) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, m)
		if len(seen) == 4 {
			close(all)
		}
		if string(m.Payload) == `"fails once"` && m.RetryCount == 0 {
			return errors.New("boom: not yet")
		}
		return nil
	})
	select {
	case <-all:
	case err := <-done:
		t.Fatalf("Process returned early: %v", err)
	case <-time.After(15 * time.Second):
		t.Fatal("4 deliveries did not come within 15 s")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Process returned %v after its context ended; want nil", err)
	}
	mu.Lock()
	retried := seen[3]
	mu.Unlock()
	if string(retried.Payload) != `"fails once"` || retried.RetryCount != 1 || retried.Reason != "boom: not yet" {
		t.Fatalf("the retry was %q, retry_count %d, reason %q", retried.Payload, retried.RetryCount, retried.Reason)
	}
	s := stats(t, sharedURL(t)).Topics[topic]
	if s.Depth != 0 || s.InFlight != 0 {
		t.Fatalf("after Process: depth %d, in flight %d; want all acked", s.Depth, s.InFlight)
	}
}

func TestProcessOnCancelLosesNothingAndAcksOnce(t *testing.T) {
	b := ownBroker(t)
	topic := topicName(t)
	const total = 50
	for i := range total {
		publish(t, b.URL, topic, fmt.Sprintf("%d", i))
	}
	c := newClient(t, b.URL)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	handled := map[string]int{}
	done := runProcess(ctx, c, topic, &ferry.ProcessOptions{Prefetch: 10}, func(_ context.Context, m *ferry.Message) error {
		time.Sleep(10 * time.Millisecond) // finishes even after ctx ends: it is acked
		mu.Lock()
		defer mu.Unlock()
		handled[m.ID]++
		if len(handled) == 15 {
			cancel() // mid-batch: 5 of the second batch were never started
		}
		return nil
	})
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Process: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Process did not return within 20 s of its context ending")
	}
	mu.Lock()
	defer mu.Unlock()
	for id, n := range handled {
		if n != 1 {
			t.Fatalf("message %s handled %d times", id, n)
		}
	}
	// What was not handled is ready again at once (released, not left to its lease), unretried.
	var rest []ferry.Message
	post(t, "GET", b.URL+"/consume/"+url.PathEscape(topic)+"?limit=100&timeout=1s", "", &rest)
	if len(handled)+len(rest) != total {
		t.Fatalf("handled %d + ready %d != published %d: messages were lost", len(handled), len(rest), total)
	}
	for _, m := range rest {
		if handled[m.ID] > 0 {
			t.Fatalf("message %s was handled and is ready again", m.ID)
		}
		if m.RetryCount != 0 {
			t.Fatalf("message %s came back with retry_count %d; a release counts no attempt", m.ID, m.RetryCount)
		}
	}
	if s := stats(t, b.URL); s.Totals.Acked != len(handled) || s.Totals.Requeued != 0 {
		t.Fatalf("the broker counted %d acks and %d requeues; want %d acks, no requeue",
			s.Totals.Acked, s.Totals.Requeued, len(handled))
	}
}

func TestProcessTouchesTheLeaseOfASlowHandler(t *testing.T) {
	topic := topicName(t)
	publish(t, sharedURL(t), topic, `"slow"`)
	publish(t, sharedURL(t), topic, `"prefetched"`)
	c := newClient(t, sharedURL(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	count := map[string]int{}
	started := make(chan struct{}, 2)
	done := runProcess(ctx, c, topic, &ferry.ProcessOptions{Prefetch: 2, Visibility: time.Second},
		func(_ context.Context, m *ferry.Message) error {
			started <- struct{}{}
			if string(m.Payload) == `"slow"` {
				time.Sleep(3 * time.Second) // three leases
			}
			mu.Lock()
			count[string(m.Payload)]++
			mu.Unlock()
			return nil
		})
	<-started
	// A competing consumer waits out more than a lease: it gets nothing, since both leases
	// (the one in hand and the prefetched one) are kept.
	var stolen ferry.Message
	if st := post(t, "GET", sharedURL(t)+"/consume/"+url.PathEscape(topic)+"?timeout=2500ms", "", &stolen); st != 404 {
		t.Fatalf("a competing consume got %d (%q): a lease lapsed", st, stolen.Payload)
	}
	time.Sleep(1500 * time.Millisecond)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if count[`"slow"`] != 1 || count[`"prefetched"`] != 1 {
		t.Fatalf("deliveries %v; want each once", count)
	}
	if s := stats(t, sharedURL(t)).Topics[topic]; s.Depth != 0 || s.InFlight != 0 {
		t.Fatalf("depth %d, in flight %d; want both acked", s.Depth, s.InFlight)
	}
}

func TestProcessEndsOnARefusal(t *testing.T) {
	c := newClient(t, sharedURL(t))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := c.Process(ctx, "bad..name", nil, func(context.Context, *ferry.Message) error { return nil })
	var fe *ferry.Error
	if !errors.As(err, &fe) || fe.Status != 400 || fe.Code != "invalid_name" {
		t.Fatalf("Process on a bad name: %v; want a 400 invalid_name", err)
	}
}

func TestProcessThatCannotReachTheBrokerSaysSo(t *testing.T) {
	// An address nothing listens on: a port a listener had, closed again.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c := newClient(t, "http://"+addr)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var heard []error
	opts := &ferry.ProcessOptions{OnError: func(err error) {
		mu.Lock()
		defer mu.Unlock()
		heard = append(heard, err)
		cancel() // stop once the failure is told: Process must not return nil
	}}
	done := runProcess(ctx, c, "orders", opts, func(context.Context, *ferry.Message) error {
		t.Error("the handler ran without a broker")
		return nil
	})
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Process did not return within 20 s: no failure told to OnError ended it")
	}
	if !errors.Is(err, ferry.ErrConnection) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Process returned %v; want an error wrapping ErrConnection and context.Canceled", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(heard) != 1 || !errors.Is(heard[0], ferry.ErrConnection) {
		t.Fatalf("OnError heard %v; want one error wrapping ErrConnection", heard)
	}
}

func TestProcessReleasesAMessageItsHandlerGaveUpOnCancel(t *testing.T) {
	topic := topicName(t)
	publish(t, sharedURL(t), topic, `"interrupted"`)
	c := newClient(t, sharedURL(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The handler's own context outlives ctx by the ShutdownTimeout, and then ends.
	done := runProcess(ctx, c, topic, &ferry.ProcessOptions{ShutdownTimeout: 200 * time.Millisecond},
		func(hctx context.Context, m *ferry.Message) error {
			cancel()
			<-hctx.Done()
			return fmt.Errorf("stopped: %w", hctx.Err())
		})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Released, not requeued: ready at once, no attempt counted, no reason.
	var m ferry.Message
	if st := post(t, "GET", sharedURL(t)+"/consume/"+url.PathEscape(topic)+"?timeout=1s", "", &m); st != 200 {
		t.Fatalf("consume after Process: %d; the message is not ready", st)
	}
	if string(m.Payload) != `"interrupted"` || m.RetryCount != 0 || m.Reason != "" {
		t.Fatalf("got %q, retry_count %d, reason %q", m.Payload, m.RetryCount, m.Reason)
	}
}
