package ferry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	ferry "github.com/ferrymq/ferry/clients/go"
)

// freePort is a free TCP port on loopback (listen on 0, read it, close), so a node's advertise
// URL is known before the node starts.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startEtcd starts a real etcd (Debian's, as tests/_support/etcd.ts does) on free loopback ports
// with a temp data dir, waits until it is healthy and returns its client endpoint (host:port).
// It is killed and its dir removed when the test ends.
func startEtcd(t testing.TB) string {
	t.Helper()
	needBroker(t)
	bin, err := exec.LookPath("etcd")
	if err != nil {
		t.Fatalf("etcd is not installed (%v): run `bash tools/setup_test_deps.sh` first", err)
	}
	dir := t.TempDir()
	client := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	peer := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cmd := exec.Command(bin,
		"--name=test",
		"--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls=http://"+client,
		"--advertise-client-urls=http://"+client,
		"--listen-peer-urls=http://"+peer,
		"--initial-advertise-peer-urls=http://"+peer,
		"--initial-cluster=test=http://"+peer,
		"--log-level=error",
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("cannot start etcd: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	// Registered after t.TempDir, so it runs before the dir is removed.
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	hc := &http.Client{Timeout: 500 * time.Millisecond}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			t.Fatalf("etcd exited at start-up:\n%s", out.String())
		default:
		}
		if res, err := hc.Get("http://" + client + "/health"); err == nil {
			var h struct{ Health string }
			json.NewDecoder(res.Body).Decode(&h)
			res.Body.Close()
			if res.StatusCode == http.StatusOK && h.Health == "true" {
				return client
			}
		}
		time.Sleep(50 * time.Millisecond) // polling a process's start-up: no event to wait on
	}
	t.Fatal("etcd did not become healthy within 10 s")
	return ""
}

// startCluster starts three broker nodes of one cluster on etcd, each on a port picked ahead
// (its advertise URL names it) with its own data dir and extra environment. All are stopped
// when the test ends.
func startCluster(t testing.TB, etcd, name string, extra ...string) []*testBroker {
	t.Helper()
	nodes := make([]*testBroker, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range nodes {
		port := freePort(t)
		env := append([]string{
			"BROKER_CLUSTER_ETCD=" + etcd,
			"BROKER_CLUSTER_NAME=" + name,
			"BROKER_CLUSTER_SIZE=3",
			"BROKER_ELECTION_TTL=2s",
			fmt.Sprintf("BROKER_ADVERTISE_URL=http://127.0.0.1:%d", port),
		}, extra...)
		dir := t.TempDir()
		wg.Add(1)
		go func() {
			defer wg.Done()
			nodes[i], errs[i] = startBrokerOn(dir, port, env)
		}()
	}
	wg.Wait()
	// Stopped together, after etcd's cleanup is registered (cleanups run last first), so the
	// nodes go before etcd does.
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, n := range nodes {
			if n != nil {
				wg.Add(1)
				go func() { defer wg.Done(); n.stop() }()
			}
		}
		wg.Wait()
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return nodes
}

// clusterLeader polls every node's /api/cluster/status (bounded) until all three agree on one
// leader of one term, each follower sees both peers, and that leader is one of nodes; it
// returns the leader and the followers.
func clusterLeader(t testing.TB, nodes []*testBroker, key string) (*testBroker, []*testBroker) {
	t.Helper()
	clients := make([]*ferry.Client, len(nodes))
	for i, n := range nodes {
		c, err := ferry.New(n.URL, ferry.WithAPIKey(key), ferry.WithTimeout(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		clients[i] = c
	}
	var last []string
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		last = last[:0]
		leaders := map[string]bool{}
		terms := map[int64]bool{}
		agreed := true
		for _, c := range clients {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			s, err := c.ClusterStatus(ctx)
			cancel()
			if err != nil {
				last = append(last, err.Error())
				agreed = false
				continue
			}
			last = append(last, fmt.Sprintf("%+v", *s))
			leaders[s.Leader], terms[s.Term] = true, true
			if s.Mode != "cluster" || s.Leader == "" || len(s.Peers) < 2 ||
				(s.Role != "leader" && s.Role != "follower") {
				agreed = false
			}
		}
		if agreed && len(leaders) == 1 && len(terms) == 1 {
			var leader *testBroker
			var followers []*testBroker
			for _, n := range nodes {
				if leaders[n.URL] {
					leader = n
				} else {
					followers = append(followers, n)
				}
			}
			if leader != nil {
				return leader, followers
			}
		}
		time.Sleep(50 * time.Millisecond) // polling a remote state: no event to wait on
	}
	t.Fatalf("no agreed leader within 15 s; last status of each node:\n%v", last)
	return nil, nil
}

// hop is one HTTP exchange the client made.
type hop struct {
	method, url string
	auth        string // the Authorization header sent
	body        string
	status      int
	location    string
}

// recorder is an http.RoundTripper that notes every exchange (redirects included, since the
// client follows them itself through the same transport).
type recorder struct {
	mu   sync.Mutex
	hops []hop
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	h := hop{method: req.Method, url: req.URL.String(), auth: req.Header.Get("Authorization")}
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		h.body = string(b)
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	res, err := http.DefaultTransport.RoundTrip(req)
	if err == nil {
		h.status, h.location = res.StatusCode, res.Header.Get("Location")
	}
	r.mu.Lock()
	r.hops = append(r.hops, h)
	r.mu.Unlock()
	return res, err
}

// take returns the exchanges noted since the last take.
func (r *recorder) take() []hop {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.hops
	r.hops = nil
	return h
}

// TestClusterFollowerRedirects runs a real three-node cluster on a real etcd and points a client
// at a follower: every write is answered 307 to the leader, and the client follows it with its
// API key and body, so the writes land on the leader.
func TestClusterFollowerRedirects(t *testing.T) {
	const key = "cluster-admin-key"
	etcd := startEtcd(t)
	nodes := startCluster(t, etcd, "go-redirect", "BROKER_API_KEYS="+key)
	leader, followers := clusterLeader(t, nodes, key)
	follower := followers[0]
	t.Logf("leader %s, follower %s", leader.URL, follower.URL)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rec := &recorder{}
	fc, err := ferry.New(follower.URL, ferry.WithAPIKey(key), ferry.WithHTTPClient(&http.Client{Transport: rec}))
	if err != nil {
		t.Fatal(err)
	}
	lc, err := ferry.New(leader.URL, ferry.WithAPIKey(key))
	if err != nil {
		t.Fatal(err)
	}

	// Keys are on: without one, the leader refuses (so a hop that reached it carried the key).
	anon, err := ferry.New(leader.URL)
	if err != nil {
		t.Fatal(err)
	}
	var fe *ferry.Error
	if _, err := anon.TopicSummaries(ctx); !errors.As(err, &fe) || fe.Status != http.StatusUnauthorized {
		t.Fatalf("the leader without a key: got %v, want a 401", err)
	}

	// redirected checks that a call went to the follower, was answered 307 to the same path on
	// the leader, and was sent again there with the key (and the same body), answered 2xx.
	asked := 0
	redirected := func(what string, wantBody bool) {
		t.Helper()
		// The first redirect elsewhere makes the client ask the follower for the cluster's nodes,
		// the hosts the key may follow a redirect to.
		hops := slices.DeleteFunc(rec.take(), func(h hop) bool {
			if h.url != follower.URL+"/api/cluster/status" {
				return false
			}
			asked++
			return true
		})
		if len(hops) != 2 {
			t.Fatalf("%s: %d exchanges, want 2 (follower's 307, then the leader): %+v", what, len(hops), hops)
		}
		first, second := hops[0], hops[1]
		if first.status != http.StatusTemporaryRedirect {
			t.Fatalf("%s: the follower answered %d, want 307: %+v", what, first.status, first)
		}
		path, ok := strings.CutPrefix(first.url, follower.URL+"/")
		if !ok {
			t.Fatalf("%s: first sent to %q, not the follower %s", what, first.url, follower.URL)
		}
		if want := leader.URL + "/" + path; first.location != want || second.url != want {
			t.Fatalf("%s: Location %q, then sent to %q; want both %q", what, first.location, second.url, want)
		}
		if second.method != first.method {
			t.Fatalf("%s: the leader got %s, want %s", what, second.method, first.method)
		}
		if first.auth != "Bearer "+key || second.auth != first.auth {
			t.Fatalf("%s: Authorization %q to the follower, %q to the leader; want the key on both",
				what, first.auth, second.auth)
		}
		if second.body != first.body || (wantBody && second.body == "") {
			t.Fatalf("%s: bodies %q then %q, want the same, not empty", what, first.body, second.body)
		}
		if second.status < 200 || second.status > 299 {
			t.Fatalf("%s: the leader answered %d", what, second.status)
		}
	}

	topic := topicName(t)
	if err := fc.CreateTopic(ctx, topic, &ferry.TopicOptions{Policy: ferry.PolicyDropOldest}); err != nil {
		t.Fatalf("CreateTopic through the follower: %v", err)
	}
	redirected("CreateTopic", true)
	if tp, err := lc.Topic(ctx, topic); err != nil || tp.Policy != ferry.PolicyDropOldest {
		t.Fatalf("the topic on the leader: %+v, %v", tp, err)
	}

	payload := []byte(`{"order":42}`)
	res, err := fc.Publish(ctx, topic, payload, &ferry.PublishOptions{Headers: map[string]string{"X-MQ-Trace": "t1"}})
	if err != nil {
		t.Fatalf("Publish through the follower: %v", err)
	}
	redirected("Publish", true)
	if res.ID == "" {
		t.Fatal("Publish through the follower: no id")
	}

	// The message is on the leader: a client pointed at it sees it, payload and header intact.
	peeked, err := lc.Peek(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if len(peeked) != 1 || peeked[0].ID != res.ID || !bytes.Equal(peeked[0].Payload, payload) ||
		peeked[0].Headers["x-mq-trace"] != "t1" {
		t.Fatalf("the leader holds %s, want the one message %s", dump(peeked), res.ID)
	}

	msgs, err := fc.Consume(ctx, topic, &ferry.ConsumeOptions{Limit: 5, Visibility: 30 * time.Second})
	if err != nil {
		t.Fatalf("Consume through the follower: %v", err)
	}
	redirected("Consume", false)
	if len(msgs) != 1 || msgs[0].ID != res.ID || !bytes.Equal(msgs[0].Payload, payload) {
		t.Fatalf("Consume through the follower: %s, want %s", dump(msgs), res.ID)
	}
	if q := queue(t, ctx, lc, topic); q.Depth != 0 || q.InFlight != 1 {
		t.Fatalf("after Consume the leader's queue is %+v, want the message in flight", q)
	}

	if err := fc.Ack(ctx, msgs[0]); err != nil {
		t.Fatalf("Ack through the follower: %v", err)
	}
	redirected("Ack", false)
	if asked != 1 {
		t.Fatalf("the client asked the follower for the cluster's nodes %d times, want once", asked)
	}
	if q := queue(t, ctx, lc, topic); q.Depth != 0 || q.InFlight != 0 {
		t.Fatalf("after Ack the leader's queue is %+v, want it empty", q)
	}

	// Process through the follower: its polls and batch acks follow the 307s too.
	if _, err := lc.Publish(ctx, topic, []byte("for Process"), nil); err != nil {
		t.Fatal(err)
	}
	pctx, stop := context.WithCancel(ctx)
	handled := make(chan string, 1)
	go func() {
		<-handled
		stop()
	}()
	err = fc.Process(pctx, topic, &ferry.ProcessOptions{Prefetch: 10},
		func(_ context.Context, m *ferry.Message) error {
			handled <- string(m.Payload)
			return nil
		})
	if err != nil {
		t.Fatalf("Process through the follower: %v", err)
	}
	rec.take()
	if q := queue(t, ctx, lc, topic); q.Depth != 0 || q.InFlight != 0 {
		t.Fatalf("after Process the leader's queue is %+v, want it empty (acked)", q)
	}

	// A follower answers its own reads: ClusterStatus is not redirected.
	s, err := fc.ClusterStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if hops := rec.take(); len(hops) != 1 || hops[0].status != http.StatusOK || s.Role != "follower" ||
		s.Leader != leader.URL {
		t.Fatalf("the follower's own status: %+v over %+v", s, hops)
	}
}

// queue is topic's entry in a broker's /api/queues.
func queue(t testing.TB, ctx context.Context, c *ferry.Client, topic string) *ferry.TopicSummary {
	t.Helper()
	qs, err := c.TopicSummaries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if q.Name == topic {
			return q
		}
	}
	t.Fatalf("no queue %q on %v", topic, dump(qs))
	return nil
}

func dump(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
