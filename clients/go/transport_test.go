package ferry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ferry "github.com/ferrymq/ferry/clients/go"
)

// dialProxy is a TCP proxy to addr that counts the connections clients open through it.
func dialProxy(t *testing.T, addr string) (url string, dials *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dials = new(atomic.Int32)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			dials.Add(1)
			out, err := net.Dial("tcp", addr)
			if err != nil {
				in.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, in, out)
			mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); io.Copy(out, in); out.Close() }()
			go func() { defer wg.Done(); io.Copy(in, out); in.Close() }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "http://" + ln.Addr().String(), dials
}

// TestManyGoroutinesReuseTheClientsConnections publishes from 32 goroutines through one Client
// and counts the connections it opens: its own transport keeps enough idle ones per host
// (http.DefaultTransport keeps 2, and dialled again for most publishes).
func TestManyGoroutinesReuseTheClientsConnections(t *testing.T) {
	const goroutines, each = 32, 25
	base := sharedURL(t)
	proxied, dials := dialProxy(t, strings.TrimPrefix(base, "http://"))
	c, err := ferry.New(proxied)
	if err != nil {
		t.Fatal(err)
	}
	ctx, topic := ctxT(t), topicName(t)
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if _, err := c.Publish(ctx, topic, []byte("x"), nil); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d publishes from %d goroutines: %d connections", goroutines*each, goroutines, dials.Load())
	if n := dials.Load(); n > goroutines {
		t.Fatalf("%d connections for %d publishes from %d goroutines, want at most one each",
			n, goroutines*each, goroutines)
	}
}

func TestEveryRequestNamesTheClientInItsUserAgent(t *testing.T) {
	var mu sync.Mutex
	agents := map[string]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		agents[r.URL.Path] = r.Header.Get("User-Agent")
		mu.Unlock()
		http.Error(w, `{"code":"bad_request","detail":"no"}`, http.StatusBadRequest)
	}))
	defer srv.Close()
	c, err := ferry.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	c.Publish(ctx, "orders", []byte("x"), nil)
	for range c.Stream(ctx, "orders", nil) {
		break
	}
	c.Subscribe(ctx, "orders", func(*ferry.Message) {}, nil)
	want := fmt.Sprintf("ferry-go/%s (%s; %s/%s)", ferry.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	mu.Lock()
	defer mu.Unlock()
	for _, path := range []string{"/publish/orders", "/stream/orders", "/ws"} {
		if agents[path] != want {
			t.Errorf("%s: User-Agent %q, want %q", path, agents[path], want)
		}
	}
}

// busyServer answers every request 503 `electing` with retryAfter (none when ""), counting them.
func busyServer(t *testing.T, retryAfter string) (*httptest.Server, *atomic.Int32) {
	hits := new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.Copy(io.Discard, r.Body)
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"status":503,"detail":"No leader is elected yet","code":"electing"}`)
	}))
	t.Cleanup(srv.Close)
	return srv, hits
}

func TestWithRetrySetsTheAttemptsAndTheBackoff(t *testing.T) {
	for _, tc := range []struct {
		retry ferry.Retry
		tries int32
	}{
		{ferry.Retry{Attempts: 1}, 1},
		{ferry.Retry{Attempts: 3, Backoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}, 3},
	} {
		srv, hits := busyServer(t, "")
		c, err := ferry.New(srv.URL, ferry.WithRetry(tc.retry))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = c.Stats(ctxT(t))
		var fe *ferry.Error
		if !errors.As(err, &fe) || fe.Code != "electing" {
			t.Fatalf("%+v: got %v, want the 503", tc.retry, err)
		}
		if hits.Load() != tc.tries {
			t.Fatalf("%+v: %d attempts, want %d", tc.retry, hits.Load(), tc.tries)
		}
		if took := time.Since(start); took > time.Second {
			t.Fatalf("%+v: took %v", tc.retry, took)
		}
	}
	if _, err := ferry.New("", ferry.WithRetry(ferry.Retry{Attempts: -1})); err == nil {
		t.Fatal("WithRetry(Attempts: -1) was accepted")
	}
}

// TestRetryAfterIsWaitedInFull: a broker asking for 6 s gets 6 s (the client used to cap it at
// 5 s), and a call whose context ends sooner gets the broker's answer at once, not a timeout.
func TestRetryAfterIsWaitedInFull(t *testing.T) {
	t.Parallel()
	srv, hits := busyServer(t, "6")
	c, err := ferry.New(srv.URL, ferry.WithRetry(ferry.Retry{Attempts: 2}))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c.Stats(context.Background())
	if took := time.Since(start); hits.Load() != 2 || took < 6*time.Second {
		t.Fatalf("%d attempts after %v, want 2 after the 6 s asked", hits.Load(), took)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start = time.Now()
	_, err = c.Stats(ctx)
	var fe *ferry.Error
	if !errors.As(err, &fe) || fe.Code != "electing" || fe.RetryAfter != 6*time.Second {
		t.Fatalf("got %v, want the 503 with its Retry-After", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("returned after %v: waited for a retry the context could not see", took)
	}
}

// lostAnswer is a proxy to the shared broker that, for the first request lose matches, has the
// broker do the work and then drops the connection instead of answering.
func lostAnswer(t *testing.T, lose func(*http.Request) bool) (*httptest.Server, *atomic.Int32) {
	proxy := proxyTo(t, sharedURL(t))
	lost := new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if lose(r) && lost.CompareAndSwap(0, 1) {
			proxy.ServeHTTP(httptest.NewRecorder(), r)
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, lost
}

func TestAutoIdempotencyKeysMakeALostPublishSafeToRetry(t *testing.T) {
	ctx, topic := ctxT(t), topicName(t)
	isPublish := func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/publish/") }
	srv, lost := lostAnswer(t, isPublish)
	c, err := ferry.New(srv.URL, ferry.WithAutoIdempotencyKeys())
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Publish(ctx, topic, []byte("once"), nil)
	if err != nil || lost.Load() != 1 {
		t.Fatalf("a publish whose answer was lost: %v (answers lost: %d)", err, lost.Load())
	}
	if !res.Deduplicated {
		t.Fatalf("the retry was not answered as a repeat: %+v", res)
	}
	srv, lost = lostAnswer(t, isPublish)
	c, _ = ferry.New(srv.URL, ferry.WithAutoIdempotencyKeys())
	if _, err := c.PublishBatch(ctx, topic, []ferry.BatchMessage{{Payload: []byte("a")}, {Payload: []byte("b")}}); err != nil || lost.Load() != 1 {
		t.Fatalf("a batch whose answer was lost: %v (answers lost: %d)", err, lost.Load())
	}
	msgs, err := client(t).Consume(ctx, topic, &ferry.ConsumeOptions{Limit: 10, AutoAck: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range msgs {
		got = append(got, string(m.Payload))
	}
	if strings.Join(got, ",") != "once,a,b" || msgs[0].ID != res.ID {
		t.Fatalf("the topic holds %q, want each message once", got)
	}
}

func TestDeletesWhoseAnswerWasLostAreDone(t *testing.T) {
	ctx, topic := ctxT(t), topicName(t)
	isDelete := func(r *http.Request) bool { return r.Method == http.MethodDelete }
	srv, lost := lostAnswer(t, isDelete)
	c, err := ferry.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CreateTopic(ctx, topic, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteTopic(ctx, topic); err != nil || lost.Load() != 1 {
		t.Fatalf("DeleteTopic whose answer was lost: %v (answers lost: %d)", err, lost.Load())
	}
	if _, err := client(t).Topic(ctx, topic); err == nil {
		t.Fatal("the topic is still there")
	}

	srv, lost = lostAnswer(t, isDelete)
	c, _ = ferry.New(srv.URL)
	hook, err := c.AddWebhook(ctx, topic, "https://example.com/hook", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteWebhook(ctx, hook.ID); err != nil || lost.Load() != 1 {
		t.Fatalf("DeleteWebhook whose answer was lost: %v (answers lost: %d)", err, lost.Load())
	}
	// A delete of what never was is still an error.
	var fe *ferry.Error
	if err := c.DeleteWebhook(ctx, "no-such-webhook"); !errors.As(err, &fe) || fe.Code != "not_found" {
		t.Fatalf("DeleteWebhook of an unknown id: %v, want not_found", err)
	}
}
