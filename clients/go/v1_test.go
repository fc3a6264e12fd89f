package ferry_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ferry "github.com/ferrymq/ferry/clients/go"
)

func TestErrorIsMatchesByCodeAndTemporaryByStatus(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", &ferry.Error{Status: 429, Code: ferry.CodeQueueFull})
	if !errors.Is(err, ferry.CodeQueueFull) || errors.Is(err, ferry.CodeMemoryFull) {
		t.Fatalf("errors.Is by code: %v", err)
	}
	if !ferry.IsTemporary(err) {
		t.Fatal("a 429 is temporary")
	}
	if ferry.IsTemporary(&ferry.Error{Status: 400, Code: ferry.CodeInvalidName}) ||
		ferry.IsTemporary(&ferry.Error{Status: 503, Code: ferry.CodeStorageFailed}) ||
		ferry.IsTemporary(context.Canceled) {
		t.Fatal("a refusal, a failed disk and a cancel are not temporary")
	}
	if !ferry.IsTemporary(fmt.Errorf("%w: x", ferry.ErrConnection)) {
		t.Fatal("a lost connection is temporary")
	}
}

func TestAnAnswerThatCannotBeReadIsErrBadResponse(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"id": 7`)
	}))
	defer srv.Close()
	c := newClient(t, srv.URL)
	defer c.Close()
	_, err := c.Publish(context.Background(), "t", []byte("x"), nil)
	var fe *ferry.Error
	var se *json.SyntaxError
	if !errors.Is(err, ferry.ErrBadResponse) || errors.As(err, &fe) || !errors.As(err, &se) {
		t.Fatalf("an unreadable 200: %v; want ErrBadResponse wrapping the JSON error", err)
	}
}

func TestSubscribeRefusalSaysItsStatus(t *testing.T) {
	c, ctx := client(t), ctxT(t)
	defer c.Close()
	_, err := c.Subscribe(ctx, "bad name!", func(*ferry.Message) {}, nil)
	var fe *ferry.Error
	if !errors.As(err, &fe) || fe.Status != 400 || !errors.Is(err, ferry.CodeInvalidName) ||
		strings.Contains(err.Error(), " 0 ") {
		t.Fatalf("a refused pattern: %v", err)
	}
}

func TestNilMessagesAndHandlersAreErrorsNotPanics(t *testing.T) {
	c := newClient(t, "http://127.0.0.1:9")
	defer c.Close()
	ctx := context.Background()
	if err := c.Ack(ctx, nil); err == nil {
		t.Fatal("Ack(nil)")
	}
	if err := c.Touch(ctx, nil, time.Second); err == nil {
		t.Fatal("Touch(nil)")
	}
	if _, err := c.Requeue(ctx, nil, nil); err == nil {
		t.Fatal("Requeue(nil)")
	}
	if _, err := c.AckMany(ctx, []*ferry.Message{nil}); err == nil {
		t.Fatal("AckMany([nil])")
	}
	if _, err := c.TouchMany(ctx, []*ferry.Message{nil}, 0); err == nil {
		t.Fatal("TouchMany([nil])")
	}
	if err := c.Process(ctx, "t", nil, nil); err == nil {
		t.Fatal("Process(nil handler)")
	}
}

func TestPublishBatchSplitsPast1000AndSendsTextAsText(t *testing.T) {
	var mu sync.Mutex
	var sizes []int
	var first map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var items []map[string]any
		json.NewDecoder(r.Body).Decode(&items)
		mu.Lock()
		sizes = append(sizes, len(items))
		if first == nil {
			first = items[0]
		}
		mu.Unlock()
		out := make([]map[string]string, len(items))
		for i := range items {
			out[i] = map[string]string{"id": fmt.Sprint(i), "topic": "t", "priority": "normal"}
		}
		w.WriteHeader(201)
		json.NewEncoder(w).Encode(map[string]any{"messages": out})
	}))
	defer srv.Close()
	c := newClient(t, srv.URL)
	defer c.Close()
	msgs := make([]ferry.BatchMessage, 2500)
	for i := range msgs {
		msgs[i].Payload = []byte("héllo")
	}
	msgs[1].Payload = []byte{0, 255}
	res, err := c.PublishBatch(context.Background(), "t", msgs)
	if err != nil || len(res) != 2500 {
		t.Fatalf("PublishBatch(2,500): %d results, %v", len(res), err)
	}
	if fmt.Sprint(sizes) != "[1000 1000 500]" {
		t.Fatalf("requests of %v, want [1000 1000 500]", sizes)
	}
	if first["payload_text"] != "héllo" || first["payload"] != nil {
		t.Fatalf("a UTF-8 payload went as %v", first)
	}
	if res[0].Priority != ferry.PriorityNormal {
		t.Fatalf("Priority %q", res[0].Priority)
	}
}

// fakeLeases is a broker that hands out n messages once, then none, and checks the leases:
// each message's lease runs from its consume (visibility, or 300 ms when none is asked) and from
// each touch; an ack after a lease ended, or a touch of one message alone, is counted as lost.
type fakeLeases struct {
	mu         sync.Mutex
	n          int
	given      bool
	until      map[string]time.Time
	lost       []string
	batches    int
	single     int
	visibility []string
	acked      int
	released   int
	hangAfter  bool // every request after the first consume hangs until the client gives up
	hung       atomic.Int32
	defaultTTL time.Duration
}

func (f *fakeLeases) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	first := !f.given
	f.mu.Unlock()
	if f.hangAfter && !first {
		io.Copy(io.Discard, r.Body) // then the server notices the client giving up
		f.hung.Add(1)
		<-r.Context().Done()
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	switch {
	case strings.HasPrefix(r.URL.Path, "/consume/"):
		f.visibility = append(f.visibility, r.URL.Query().Get("visibility"))
		if f.given {
			f.mu.Unlock()
			select { // a long poll that finds nothing
			case <-r.Context().Done():
			case <-time.After(50 * time.Millisecond):
			}
			f.mu.Lock()
			w.WriteHeader(404)
			io.WriteString(w, `{"code":"queue_empty","detail":"none"}`)
			return
		}
		f.given = true
		lease := f.defaultTTL
		if v := r.URL.Query().Get("visibility"); v != "" {
			lease, _ = time.ParseDuration(v)
		}
		var out []map[string]any
		for i := range f.n {
			id := fmt.Sprintf("m%d", i)
			f.until[id] = now.Add(lease)
			out = append(out, map[string]any{"id": id, "topic": "t", "payload": "eA=="})
		}
		json.NewEncoder(w).Encode(out)
	case r.URL.Path == "/touch/t":
		f.batches++
		var body struct{ IDs []string }
		json.NewDecoder(r.Body).Decode(&body)
		lease := f.defaultTTL
		if by := r.URL.Query().Get("by"); by != "" {
			lease, _ = time.ParseDuration(by)
		}
		for _, id := range body.IDs {
			if now.After(f.until[id]) {
				f.lost = append(f.lost, id+" touched late")
			}
			f.until[id] = now.Add(lease)
		}
		json.NewEncoder(w).Encode(map[string]any{"touched": len(body.IDs), "not_found": []string{},
			"visible_at": now.Add(lease), "lease_ms": lease.Milliseconds()})
	case strings.HasPrefix(r.URL.Path, "/touch/"):
		f.single++
		io.WriteString(w, `{}`)
	case r.URL.Path == "/ack/t":
		var body struct{ IDs []string }
		json.NewDecoder(r.Body).Decode(&body)
		for _, id := range body.IDs {
			if now.After(f.until[id]) {
				f.lost = append(f.lost, id+" acked after its lease")
			}
		}
		f.acked += len(body.IDs)
		fmt.Fprintf(w, `{"acked":%d,"not_found":[]}`, len(body.IDs))
	case r.URL.Path == "/api/queues/release":
		f.released++
		io.WriteString(w, `{}`)
	default:
		w.WriteHeader(404)
		io.WriteString(w, `{"code":"not_found","detail":"`+r.URL.Path+`"}`)
	}
}

// TestProcessKeepsLeasesWithBatchTouches: 6 messages held for 6 × 120 ms with a 300 ms lease,
// so most must be touched, in batches, each before its lease ends; with Visibility 0 the
// consume asks for no lease and Process learns the topic's from the touch's answer.
func TestProcessKeepsLeasesWithBatchTouches(t *testing.T) {
	for _, visibility := range []time.Duration{300 * time.Millisecond, 0} {
		f := &fakeLeases{n: 6, until: map[string]time.Time{}, defaultTTL: 300 * time.Millisecond}
		srv := httptest.NewServer(f)
		c := newClient(t, srv.URL)
		ctx, cancel := context.WithCancel(context.Background())
		handled := 0
		err := c.Process(ctx, "t", &ferry.ProcessOptions{Prefetch: 6, Visibility: visibility},
			func(_ context.Context, m *ferry.Message) error {
				time.Sleep(120 * time.Millisecond)
				if handled++; handled == 6 {
					cancel()
				}
				return nil
			})
		c.Close()
		srv.Close()
		f.mu.Lock()
		defer f.mu.Unlock()
		if err != nil || f.acked != 6 || len(f.lost) > 0 || f.single > 0 || f.batches == 0 {
			t.Fatalf("Visibility %v: %v; acked %d, lost %v, %d single touches, %d batches",
				visibility, err, f.acked, f.lost, f.single, f.batches)
		}
		if want := map[time.Duration]string{0: "", 300 * time.Millisecond: "300ms"}[visibility]; f.visibility[0] != want {
			t.Fatalf("Visibility %v asked the consume for %q", visibility, f.visibility[0])
		}
	}
}

// TestProcessShutdownIsBoundedAndReportsWhatFailed: against a broker that hangs after the first
// consume, a Process whose ctx ends in its first handler returns within its ShutdownTimeout
// (not Prefetch × the client's timeout), says its settles failed, and its handler's context
// outlived ctx.
func TestProcessShutdownIsBoundedAndReportsWhatFailed(t *testing.T) {
	f := &fakeLeases{n: 10, until: map[string]time.Time{}, defaultTTL: time.Minute, hangAfter: true}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c, err := ferry.New(srv.URL, ferry.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var handlerCtxErr error
	var stoppedAt time.Time
	err = c.Process(ctx, "t", &ferry.ProcessOptions{Prefetch: 10, ShutdownTimeout: 500 * time.Millisecond},
		func(hctx context.Context, m *ferry.Message) error {
			cancel()
			stoppedAt = time.Now()
			handlerCtxErr = hctx.Err()
			return nil
		})
	took := time.Since(stoppedAt)
	if took > 2*time.Second {
		t.Fatalf("Process returned %v after its ctx ended; ShutdownTimeout is 500ms", took)
	}
	if handlerCtxErr != nil {
		t.Fatalf("the handler's context ended with ctx: %v", handlerCtxErr)
	}
	if err == nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("a shutdown whose releases and ack hung returned %v", err)
	}
	if n := f.hung.Load(); n < 5 {
		t.Fatalf("%d settles were sent within the ShutdownTimeout; want the releases sent together", n)
	}
}

func TestClientCloseEndsItsWorkAndLaterCallsAreErrClosed(t *testing.T) {
	c, topic := client(t), topicName(t)
	ctx := ctxT(t)
	if _, err := c.Publish(ctx, topic, []byte("one"), nil); err != nil {
		t.Fatal(err)
	}
	handling := make(chan struct{})
	release := make(chan struct{})
	var handlerDone atomic.Bool
	sub, err := c.Subscribe(ctx, topic, func(*ferry.Message) {
		close(handling)
		<-release
		handlerDone.Store(true)
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	processed := make(chan error, 1)
	go func() {
		processed <- c.Process(ctx, topic, nil, func(context.Context, *ferry.Message) error { return nil })
	}()
	streamed := make(chan error, 1)
	go func() {
		for _, err := range c.Stream(ctx, topic, nil) {
			if err != nil {
				streamed <- err
				return
			}
		}
		streamed <- nil
	}()
	if _, err := c.Publish(ctx, topic, []byte("two"), nil); err != nil {
		t.Fatal(err)
	}
	<-handling
	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while the Subscription's handler was running")
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	<-closed
	if !handlerDone.Load() {
		t.Fatal("Close returned before the handler did")
	}
	if err := <-processed; !errors.Is(err, ferry.ErrClosed) {
		t.Fatalf("Process after Close: %v", err)
	}
	if err := <-streamed; !errors.Is(err, ferry.ErrClosed) {
		t.Fatalf("Stream after Close: %v", err)
	}
	if err := sub.Add(ctx, topic+"-more"); !errors.Is(err, ferry.ErrClosed) {
		t.Fatalf("Add after Close: %v", err)
	}
	if _, err := c.Publish(ctx, topic, []byte("x"), nil); !errors.Is(err, ferry.ErrClosed) {
		t.Fatalf("Publish after Close: %v", err)
	}
	if _, err := c.Subscribe(ctx, topic, func(*ferry.Message) {}, nil); !errors.Is(err, ferry.ErrClosed) {
		t.Fatalf("Subscribe after Close: %v", err)
	}
}

func TestProcessHandlerAsksForADelayOrADeadLetter(t *testing.T) {
	c, ctx, topic := client(t), ctxT(t), topicName(t)
	defer c.Close()
	for _, p := range []string{"later", "poison", "ok"} {
		if _, err := c.Publish(ctx, topic, []byte(p), nil); err != nil {
			t.Fatal(err)
		}
	}
	run, stop := context.WithCancel(ctx)
	handled := 0
	err := c.Process(run, topic, &ferry.ProcessOptions{Prefetch: 3}, func(_ context.Context, m *ferry.Message) error {
		if handled++; handled == 3 {
			stop()
		}
		switch string(m.Payload) {
		case "later":
			return ferry.RequeueAfter(time.Hour, errors.New("not yet"))
		case "poison":
			return ferry.DeadLetter(errors.New("cannot parse"))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	dead, err := c.Consume(ctx, topic+".dlq", &ferry.ConsumeOptions{AutoAck: true})
	if err != nil || len(dead) != 1 || string(dead[0].Payload) != "poison" || dead[0].Reason != "cannot parse" {
		t.Fatalf("the dead letter: %v, %v", dead, err)
	}
	ready, err := c.Consume(ctx, topic, nil)
	if err != nil || len(ready) != 0 {
		t.Fatalf("the delayed requeue is ready already: %v, %v", ready, err)
	}
}

func TestTouchManyAndAckManyTakeMessages(t *testing.T) {
	c, ctx, topic := client(t), ctxT(t), topicName(t)
	defer c.Close()
	if err := c.CreateGroup(ctx, topic, "audit"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"a", "b"} {
		if _, err := c.Publish(ctx, topic, []byte(p), nil); err != nil {
			t.Fatal(err)
		}
	}
	msgs, err := c.Consume(ctx, topic, &ferry.ConsumeOptions{Group: "audit", Limit: 2, Visibility: time.Second})
	if err != nil || len(msgs) != 2 {
		t.Fatalf("consume: %v, %v", msgs, err)
	}
	if n, err := c.TouchMany(ctx, msgs, time.Minute); err != nil || n != 2 {
		t.Fatalf("TouchMany: %d, %v", n, err)
	}
	if n, err := c.AckMany(ctx, msgs); err != nil || n != 2 {
		t.Fatalf("AckMany: %d, %v", n, err)
	}
}
