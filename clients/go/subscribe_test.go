package ferry_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	ferry "github.com/ferrymq/ferry/clients/go"
)

// dialCounter is an http.Client that counts the connections it opens.
func dialCounter() (*http.Client, *atomic.Int32) {
	n := new(atomic.Int32)
	d := &net.Dialer{}
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			n.Add(1)
			return d.DialContext(ctx, network, addr)
		},
	}}, n
}

// expect waits for a payload on ch.
func expect(t *testing.T, ch <-chan *ferry.Message, want string) *ferry.Message {
	t.Helper()
	select {
	case m := <-ch:
		if string(m.Payload) != want {
			t.Fatalf("got %q, want %q", m.Payload, want)
		}
		return m
	case <-time.After(10 * time.Second):
		t.Fatalf("no message %q within 10 s", want)
	}
	return nil
}

func expectAny(t *testing.T, ch <-chan *ferry.Message) *ferry.Message {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no message within 10 s")
	}
	return nil
}

func quiet(t *testing.T, ch <-chan *ferry.Message, d time.Duration) {
	t.Helper()
	select {
	case m := <-ch:
		t.Fatalf("got %q, want nothing", m.Payload)
	case <-time.After(d):
	}
}

func TestSubscribeAddUnsubscribeAndOneSocketPerClient(t *testing.T) {
	topic := topicName(t)
	hc, dials := dialCounter()
	c, err := ferry.New(sharedURL(t), ferry.WithHTTPClient(hc), ferry.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := make(chan *ferry.Message, 10)
	sub, err := c.Subscribe(ctx, topic+".*", func(m *ferry.Message) { got <- m }, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	publish(t, sharedURL(t), topic+".a", `"one"`)
	if m := expect(t, got, `"one"`); m.Topic != topic+".a" {
		t.Fatalf("topic %q", m.Topic)
	}
	if err := sub.Add(ctx, topic+"-other"); err != nil {
		t.Fatal(err)
	}
	publish(t, sharedURL(t), topic+"-other", `"two"`)
	expect(t, got, `"two"`)

	// A second Subscription rides the same socket, and holding the same pattern does not
	// unsubscribe it from the first when it leaves.
	got2 := make(chan *ferry.Message, 10)
	sub2, err := c.Subscribe(ctx, topic+".*", func(m *ferry.Message) { got2 <- m }, nil)
	if err != nil {
		t.Fatal(err)
	}
	publish(t, sharedURL(t), topic+".b", `"three"`)
	expect(t, got, `"three"`)
	expect(t, got2, `"three"`)
	if err := sub2.Close(); err != nil {
		t.Fatal(err)
	}
	publish(t, sharedURL(t), topic+".c", `"four"`)
	expect(t, got, `"four"`)
	quiet(t, got2, 300*time.Millisecond)
	if n := dials.Load(); n != 1 {
		t.Fatalf("%d connections for two subscriptions; want one socket", n)
	}

	if err := sub.Unsubscribe(ctx, topic+".*"); err != nil {
		t.Fatal(err)
	}
	publish(t, sharedURL(t), topic+".a", `"unheard"`)
	publish(t, sharedURL(t), topic+"-other", `"five"`)
	expect(t, got, `"five"`)
	quiet(t, got, 300*time.Millisecond)
}

func TestSubscribeResubscribesAfterABrokerRestart(t *testing.T) {
	b := ownBroker(t)
	topic := topicName(t)
	c := newClient(t, b.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	got := make(chan *ferry.Message, 100)
	sub, err := c.Subscribe(ctx, topic, func(m *ferry.Message) { got <- m }, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := sub.Add(ctx, topic+"-2"); err != nil {
		t.Fatal(err)
	}
	publish(t, b.URL, topic, `"before"`)
	expect(t, got, `"before"`)
	b.restart(t)
	// Messages stored before the socket subscribes again are not heard: publish until one is.
	for i := 0; ; i++ {
		publish(t, b.URL, topic+"-2", fmt.Sprintf(`"after %d"`, i))
		select {
		case m := <-got:
			if m.Topic != topic+"-2" {
				t.Fatalf("got %q from %q", m.Payload, m.Topic)
			}
			publish(t, b.URL, topic, `"both patterns back"`)
			for {
				m := expectAny(t, got)
				if m.Topic == topic {
					if string(m.Payload) != `"both patterns back"` {
						t.Fatalf("got %q", m.Payload)
					}
					return
				}
			}
		case <-time.After(200 * time.Millisecond):
		}
		if ctx.Err() != nil {
			t.Fatal("not resubscribed within 60 s")
		}
	}
}

func TestSubscribeDropsAndCountsWhatASlowHandlerCannotTake(t *testing.T) {
	topic := topicName(t)
	c := newClient(t, sharedURL(t))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	release := make(chan struct{})
	var handled atomic.Int32
	sub, err := c.Subscribe(ctx, topic, func(m *ferry.Message) {
		<-release
		handled.Add(1)
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	const extra = 20
	total := ferry.DefaultPending + 1 + extra // one in the handler, a full queue, the rest dropped
	for i := range total {
		publish(t, sharedURL(t), topic, fmt.Sprintf("%d", i))
	}
	deadline := time.Now().Add(10 * time.Second)
	for sub.Dropped() < extra && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if d := sub.Dropped(); d != extra {
		t.Fatalf("Dropped() = %d, want %d", d, extra)
	}
	close(release)
	for int(handled.Load()) < total-extra && time.Now().Before(deadline.Add(10*time.Second)) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := handled.Load(); int(n) != total-extra {
		t.Fatalf("handled %d, want %d", n, total-extra)
	}
}

// TestSubscribeAnswersTheBrokersPings runs an in-process WebSocket server that speaks /ws as the
// broker does and pings the client, as the broker does after 25 s of silence: a socket that
// answers keeps its one connection and goes on delivering.
func TestSubscribeAnswersTheBrokersPings(t *testing.T) {
	pinged := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer conn.CloseNow()
		ctx := r.Context()
		_, data, err := conn.Read(ctx)
		var sub struct{ Type, Topic string }
		if err != nil || json.Unmarshal(data, &sub) != nil || sub.Type != "subscribe" {
			pinged <- fmt.Errorf("first frame %q, %v; want a subscribe", data, err)
			return
		}
		conn.Write(ctx, websocket.MessageText, []byte(`{"type":"subscribed","topic":"`+sub.Topic+`"}`))
		// A Ping's Pong is read by a concurrent reader; it also takes the client's last frames.
		read := make(chan struct{})
		go func() {
			defer close(read)
			for {
				if _, _, err := conn.Read(ctx); err != nil {
					return
				}
			}
		}()
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		err = conn.Ping(pctx)
		pinged <- err
		if err == nil {
			conn.Write(ctx, websocket.MessageText, []byte(`{"type":"message","subscription":"`+sub.Topic+
				`","message":{"id":"m1","topic":"`+sub.Topic+`","payload":"InN0aWxsIGhlcmUi"}}`))
		}
		<-read
	}))
	defer srv.Close()
	hc, dials := dialCounter()
	c, err := ferry.New(srv.URL, ferry.WithHTTPClient(hc), ferry.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *ferry.Message, 10)
	sub, err := c.Subscribe(context.Background(), "orders", func(m *ferry.Message) { got <- m }, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := <-pinged; err != nil {
		t.Fatalf("the client did not answer the ping: %v", err)
	}
	expect(t, got, `"still here"`)
	if n := dials.Load(); n != 1 {
		t.Fatalf("%d connections: the socket was closed and reopened", n)
	}
}

func TestSubscribeEndsWithTheContextWhenTheBrokerIsAway(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	c := newClient(t, "http://"+addr)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	sub, err := c.Subscribe(ctx, "orders", func(*ferry.Message) {}, nil)
	if err == nil || sub != nil || ctx.Err() == nil {
		t.Fatalf("Subscribe with no broker gave %v, %v", sub, err)
	}
	// A deadline is ErrTimeout, and the socket's failure to connect is ErrConnection.
	if !errors.Is(err, ferry.ErrTimeout) || !errors.Is(err, ferry.ErrConnection) {
		t.Fatalf("Subscribe with no broker: %v; want ErrTimeout and ErrConnection", err)
	}
}

func TestStreamSubscribeAndProcessSendTheAPIKey(t *testing.T) {
	b := ownBroker(t, "BROKER_API_KEYS=k1")
	topic := topicName(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	anon := newClient(t, b.URL)
	var fe *ferry.Error
	if _, err := anon.Subscribe(ctx, topic, func(*ferry.Message) {}, nil); !errors.As(err, &fe) || fe.Status != 401 {
		t.Fatalf("Subscribe without a key: %v; want a 401", err)
	}
	for _, err := range anon.Stream(ctx, topic, nil) {
		if !errors.As(err, &fe) || fe.Status != 401 {
			t.Fatalf("Stream without a key: %v; want a 401", err)
		}
	}
	if err := anon.Process(ctx, topic, nil, func(context.Context, *ferry.Message) error { return nil }); !errors.As(err, &fe) || fe.Status != 401 {
		t.Fatalf("Process without a key: %v; want a 401", err)
	}

	c, err := ferry.New(b.URL, ferry.WithAPIKey("k1"))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *ferry.Message, 1)
	sub, err := c.Subscribe(ctx, topic, func(m *ferry.Message) { got <- m }, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	req, _ := http.NewRequest("POST", b.URL+"/publish/"+topic, strings.NewReader(`"keyed"`))
	req.Header.Set("Authorization", "Bearer k1")
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 201 {
		t.Fatalf("publish with the key: %v %v", res, err)
	}
	res.Body.Close()
	expect(t, got, `"keyed"`)
	for m, err := range c.Stream(ctx, topic, &ferry.StreamOptions{LastEventID: "0"}) {
		if err != nil || string(m.Payload) != `"keyed"` {
			t.Fatalf("Stream with the key: %v, %v", m, err)
		}
		break
	}
}
