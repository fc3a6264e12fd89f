package ferry_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ferry "github.com/ferrymq/ferry/clients/go"
)

func TestWithTimeoutZeroMeansNoTimeout(t *testing.T) {
	c, err := ferry.New(sharedURL(t), ferry.WithTimeout(0))
	if err != nil {
		t.Fatal(err)
	}
	ctx, topic := ctxT(t), topicName(t)
	if _, err := c.Publish(ctx, topic, []byte("x"), nil); err != nil {
		t.Fatalf("Publish with WithTimeout(0): %v", err)
	}
	msgs, err := c.Consume(ctx, topic, &ferry.ConsumeOptions{Wait: 200 * time.Millisecond, AutoAck: true})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("Consume with WithTimeout(0): %d messages, %v", len(msgs), err)
	}
	if _, err := ferry.New(sharedURL(t), ferry.WithTimeout(-time.Second)); err == nil {
		t.Fatal("WithTimeout(-1s) was accepted")
	}
}

// timeoutClient is a Client whose injected http.Client has a Timeout of d, dialling through a
// counter.
func timeoutClient(t *testing.T, base string, d time.Duration) (*ferry.Client, *atomic.Int32) {
	t.Helper()
	hc, dials := dialCounter()
	hc.Timeout = d
	c, err := ferry.New(base, ferry.WithHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	return c, dials
}

// An http.Client's Timeout bounds a whole exchange, body included: the Client uses it per
// attempt instead, so long polls, streams and Process outlive it.
func TestHTTPClientTimeoutDoesNotCutALongPoll(t *testing.T) {
	c, _ := timeoutClient(t, sharedURL(t), 300*time.Millisecond)
	start := time.Now()
	msgs, err := c.Consume(ctxT(t), topicName(t), &ferry.ConsumeOptions{Wait: time.Second})
	if err != nil || len(msgs) != 0 {
		t.Fatalf("a 1 s long poll with hc.Timeout 300ms: %d messages, %v", len(msgs), err)
	}
	if took := time.Since(start); took < 900*time.Millisecond {
		t.Fatalf("the long poll ended after %v, before its wait", took)
	}
}

func TestHTTPClientTimeoutDoesNotCutAStream(t *testing.T) {
	base := sharedURL(t)
	c, dials := timeoutClient(t, base, 300*time.Millisecond)
	ctx, topic := ctxT(t), topicName(t)
	go func() {
		time.Sleep(time.Second) // the stream must outlive hc.Timeout before there is anything
		publish(t, base, topic, `"late"`)
	}()
	for m, err := range c.Stream(ctx, topic, nil) {
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Payload) != `"late"` {
			t.Fatalf("got %q", m.Payload)
		}
		break
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("%d connections: the stream was cut and opened again", n)
	}
}

func TestHTTPClientTimeoutDoesNotSlowProcess(t *testing.T) {
	base := sharedURL(t)
	c, _ := timeoutClient(t, base, 300*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	topic := topicName(t)
	published := make(chan time.Time, 1)
	go func() {
		// Long enough that polls cut at hc.Timeout would have Process backing off (1 s, 2 s, …).
		time.Sleep(4 * time.Second)
		published <- time.Now()
		publish(t, base, topic, `"job"`)
	}()
	var handled time.Time
	err := c.Process(ctx, topic, nil, func(context.Context, *ferry.Message) error {
		handled = time.Now()
		cancel()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if lag := handled.Sub(<-published); handled.IsZero() || lag > time.Second {
		t.Fatalf("handled %v after the publish, want a long poll waiting for it", lag)
	}
}

// hangServer accepts requests and never answers them.
func hangServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestTimeoutErrorsSayTheLimitThatRanOut(t *testing.T) {
	srv := hangServer(t)
	for _, tc := range []struct {
		name string
		opt  ferry.Option
		wait time.Duration
		want string
	}{
		{"WithTimeout", ferry.WithTimeout(200 * time.Millisecond), 0,
			"no answer within 200ms, the client's timeout (WithTimeout)"},
		{"a long poll", ferry.WithTimeout(200 * time.Millisecond), 100 * time.Millisecond,
			"no answer within 300ms, the client's timeout (WithTimeout) of 200ms plus the long poll's wait of 100ms"},
		{"hc.Timeout", ferry.WithHTTPClient(&http.Client{Timeout: 200 * time.Millisecond}), 0,
			"no answer within 200ms, the client's timeout (WithTimeout)"},
	} {
		c, err := ferry.New(srv.URL, tc.opt)
		if err != nil {
			t.Fatal(err)
		}
		if tc.wait > 0 {
			_, err = c.Consume(ctxT(t), "orders", &ferry.ConsumeOptions{Wait: tc.wait})
		} else {
			_, err = c.Stats(ctxT(t))
		}
		if !errors.Is(err, ferry.ErrTimeout) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want ErrTimeout saying %q", tc.name, err, tc.want)
		}
	}
}
