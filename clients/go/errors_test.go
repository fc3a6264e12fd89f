package ferry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ferry "github.com/ferrymq/ferry/clients/go"
)

func TestErrorIsProblem(t *testing.T) {
	c, ctx := client(t), ctxT(t)
	_, err := c.Publish(ctx, "bad name!", []byte("x"), nil)
	var fe *ferry.Error
	if !errors.As(err, &fe) {
		t.Fatalf("not an *Error: %v", err)
	}
	if fe.Status != 400 || fe.Code != "invalid_name" || !strings.Contains(fe.Detail, "bad name!") || fe.RequestID == "" {
		t.Fatalf("error %+v", fe)
	}
	if errors.Is(err, ferry.ErrTimeout) || errors.Is(err, ferry.ErrConnection) {
		t.Fatal("a refusal matches ErrTimeout or ErrConnection")
	}
	// An empty body.
	if _, err := c.Publish(ctx, topicName(t), nil, nil); !errors.As(err, &fe) || fe.Code != "empty_body" {
		t.Fatalf("empty body: %v", err)
	}
	// A bad duration.
	_, err = c.Consume(ctx, topicName(t), &ferry.ConsumeOptions{Wait: time.Minute})
	if !errors.As(err, &fe) || fe.Status != 400 {
		t.Fatalf("wait 1m: %v", err)
	}
	// Unknown topic.
	if _, err := c.Topic(ctx, topicName(t)); !errors.As(err, &fe) || fe.Status != 404 || fe.Code != "not_found" {
		t.Fatalf("unknown topic: %v", err)
	}
}

func TestUnauthorizedAndForbidden(t *testing.T) {
	b := ownBroker(t, "BROKER_DATA_DIR=:memory:", "BROKER_API_KEYS=admin1,pub1:publish")
	ctx := ctxT(t)
	var fe *ferry.Error
	none, _ := ferry.New(b.URL)
	if _, err := none.Publish(ctx, "t", []byte("x"), nil); !errors.As(err, &fe) || fe.Status != 401 || fe.Code != "unauthorized" {
		t.Fatalf("no key: %v", err)
	}
	pub, _ := ferry.New(b.URL, ferry.WithAPIKey("pub1"))
	if _, err := pub.Publish(ctx, "t", []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := pub.Consume(ctx, "t", nil); !errors.As(err, &fe) || fe.Status != 403 || fe.Code != "forbidden" {
		t.Fatalf("publish-only key consuming: %v", err)
	}
	admin, _ := ferry.New(b.URL, ferry.WithAPIKey("admin1"))
	if ms, err := admin.Consume(ctx, "t", nil); err != nil || len(ms) != 1 {
		t.Fatalf("admin consume: %v %v", ms, err)
	}
}

func TestTimeoutOnLongPoll(t *testing.T) {
	c := client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Consume(ctx, topicName(t), &ferry.ConsumeOptions{Wait: 5 * time.Second})
	if !errors.Is(err, ferry.ErrTimeout) {
		t.Fatalf("want ErrTimeout, got %v", err)
	}
	if time.Since(start) > 3*time.Second {
		t.Fatal("the deadline was not kept")
	}
}

func TestTimeoutIsNotRetried(t *testing.T) {
	var hits atomic.Int32
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	defer slow.Close()
	c, _ := ferry.New(slow.URL, ferry.WithTimeout(100*time.Millisecond))
	_, err := c.Stats(ctxT(t))
	if !errors.Is(err, ferry.ErrTimeout) {
		t.Fatalf("want ErrTimeout, got %v", err)
	}
	if n := hits.Load(); n != 1 {
		t.Fatalf("%d attempts, want 1", n)
	}
}

func TestConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c, _ := ferry.New("http://" + addr)
	_, err = c.Publish(ctxT(t), "t", []byte("x"), nil)
	if !errors.Is(err, ferry.ErrConnection) {
		t.Fatalf("want ErrConnection, got %v", err)
	}
	var fe *ferry.Error
	if errors.As(err, &fe) || errors.Is(err, ferry.ErrTimeout) {
		t.Fatalf("a connection error is also something else: %v", err)
	}
}

// proxyTo is a reverse proxy to the shared broker.
func proxyTo(t testing.TB, rawURL string) *httputil.ReverseProxy {
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return httputil.NewSingleHostReverseProxy(u)
}

func TestRetries503WithRetryAfter(t *testing.T) {
	var hits atomic.Int32
	proxy := proxyTo(t, sharedURL(t))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/problem+json")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(503)
			io.WriteString(w, `{"type":"about:blank","title":"Service Unavailable","status":503,"detail":"electing","code":"electing","request_id":"r1"}`)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer srv.Close()
	c, _ := ferry.New(srv.URL)
	ctx, topic := ctxT(t), topicName(t)
	start := time.Now()
	res, err := c.Publish(ctx, topic, []byte("after a 503"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 900*time.Millisecond {
		t.Fatalf("Retry-After not honoured: retried after %v", took)
	}
	if hits.Load() != 2 {
		t.Fatalf("%d attempts, want 2", hits.Load())
	}
	ms, err := client(t).Consume(ctx, topic, nil)
	if err != nil || len(ms) != 1 || ms[0].ID != res.ID || string(ms[0].Payload) != "after a 503" {
		t.Fatalf("the retried publish: %v %v", ms, err)
	}
}

func TestRetries429AreBounded(t *testing.T) {
	b := ownBroker(t, "BROKER_DATA_DIR=:memory:", "BROKER_MAX_QUEUE=1")
	c, _ := ferry.New(b.URL)
	ctx, topic := ctxT(t), topicName(t)
	if _, err := c.Publish(ctx, topic, []byte("1"), nil); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := c.Publish(ctx, topic, []byte("2"), nil)
	var fe *ferry.Error
	if !errors.As(err, &fe) || fe.Status != 429 || fe.Code != "queue_full" || fe.RetryAfter < time.Second {
		t.Fatalf("full queue: %v (%+v)", err, fe)
	}
	// Three retries, each after Retry-After (at least 1 s).
	if took := time.Since(start); took < 2900*time.Millisecond {
		t.Fatalf("gave up after %v: Retry-After not honoured", took)
	}
}

// dropServer accepts requests and closes their connection without an answer.
func dropServer(t testing.TB, hits *atomic.Int32) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestLostConnectionRetriedOnlyWhenSafe(t *testing.T) {
	ctx := ctxT(t)
	cases := []struct {
		name  string
		call  func(c *ferry.Client) error
		tries int32
	}{
		{"consume", func(c *ferry.Client) error { _, err := c.Consume(ctx, "t", nil); return err }, 4},
		{"publish without key", func(c *ferry.Client) error { _, err := c.Publish(ctx, "t", []byte("x"), nil); return err }, 1},
		{"publish with key", func(c *ferry.Client) error {
			_, err := c.Publish(ctx, "t", []byte("x"), &ferry.PublishOptions{IdempotencyKey: "k"})
			return err
		}, 4},
		{"requeue", func(c *ferry.Client) error {
			_, err := c.Requeue(ctx, &ferry.Message{ID: "i", Topic: "t"}, nil)
			return err
		}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var hits atomic.Int32
			c, _ := ferry.New(dropServer(t, &hits).URL)
			if err := tc.call(c); !errors.Is(err, ferry.ErrConnection) {
				t.Fatalf("want ErrConnection, got %v", err)
			}
			if n := hits.Load(); n != tc.tries {
				t.Fatalf("%d attempts, want %d", n, tc.tries)
			}
		})
	}
}

func TestRedirectFollowedWithKeyAndBody(t *testing.T) {
	b := ownBroker(t, "BROKER_DATA_DIR=:memory:", "BROKER_API_KEYS=sekrit")
	var redirected atomic.Int32
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer sekrit" {
			t.Errorf("the follower got no key: %q", r.Header.Get("Authorization"))
		}
		if r.URL.Path == "/api/cluster/status" { // a follower answers it itself, naming its leader
			fmt.Fprintf(w, `{"mode":"cluster","role":"follower","leader":%q,"peers":[]}`, b.URL)
			return
		}
		redirected.Add(1)
		http.Redirect(w, r, b.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	defer front.Close()
	c, _ := ferry.New(front.URL, ferry.WithAPIKey("sekrit"))
	ctx, topic := ctxT(t), topicName(t)
	res, err := c.Publish(ctx, topic, []byte("via the leader"), &ferry.PublishOptions{Priority: ferry.PriorityLow})
	if err != nil {
		t.Fatal(err)
	}
	if redirected.Load() != 1 {
		t.Fatalf("%d redirects", redirected.Load())
	}
	leader, _ := ferry.New(b.URL, ferry.WithAPIKey("sekrit"))
	ms, err := leader.Consume(ctx, topic, nil)
	if err != nil || len(ms) != 1 || ms[0].ID != res.ID || string(ms[0].Payload) != "via the leader" || ms[0].Priority != "low" {
		t.Fatalf("on the leader: %+v %v", ms, err)
	}
	// A JSON body is sent again too.
	if err := c.CreateGroup(ctx, topic, "g"); err != nil {
		t.Fatal(err)
	}
}

func TestProxy503RetriedOnlyWhenSafe(t *testing.T) {
	var hits atomic.Int32
	proxy := proxyTo(t, sharedURL(t))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1)%2 == 1 { // every other request: a proxy's plain 503
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(503)
			io.WriteString(w, "upstream unavailable")
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer srv.Close()
	c, _ := ferry.New(srv.URL)
	ctx := ctxT(t)
	if _, err := c.Stats(ctx); err != nil {
		t.Fatalf("a read after a proxy's 503: %v", err)
	}
	if hits.Load() != 2 {
		t.Fatalf("%d attempts, want 2", hits.Load())
	}
	_, err := c.Publish(ctx, topicName(t), []byte("x"), nil)
	var fe *ferry.Error
	if !errors.As(err, &fe) || fe.Status != 503 || fe.Code != "" {
		t.Fatalf("a publish without key after a proxy's 503: %v", err)
	}
	if hits.Load() != 3 {
		t.Fatalf("the publish was sent again (%d attempts)", hits.Load())
	}
}
