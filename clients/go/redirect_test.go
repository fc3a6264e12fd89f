package ferry_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	ferry "github.com/ferrymq/ferry/clients/go"
)

// keyLog is an httptest server that notes the Authorization of every request it gets and
// answers what a broker answers a publish.
type keyLog struct {
	*httptest.Server
	mu   sync.Mutex
	auth []string
}

func newKeyLog(t *testing.T, tls bool) *keyLog {
	k := &keyLog{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k.mu.Lock()
		k.auth = append(k.auth, r.Header.Get("Authorization"))
		k.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"id":"m1","topic":"orders","priority":"normal"}`)
	})
	if tls {
		k.Server = httptest.NewTLSServer(h)
	} else {
		k.Server = httptest.NewServer(h)
	}
	t.Cleanup(k.Close)
	return k
}

func (k *keyLog) got() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.auth...)
}

// redirector is a front that answers /api/cluster/status with status (404 when "") and
// everything else with a 307 to target + the same path.
func redirector(t *testing.T, tls bool, target func() string, status string) *httptest.Server {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/cluster/status" {
			if status == "" {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, status)
			return
		}
		http.Redirect(w, r, target()+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	})
	var srv *httptest.Server
	if tls {
		srv = httptest.NewTLSServer(h)
	} else {
		srv = httptest.NewServer(h)
	}
	t.Cleanup(srv.Close)
	return srv
}

// refusedRedirect checks that err is the 307 *Error of a redirect not followed.
func refusedRedirect(t *testing.T, err error) {
	t.Helper()
	var fe *ferry.Error
	if !errors.As(err, &fe) || fe.Status != http.StatusTemporaryRedirect || fe.Code != "redirect_refused" {
		t.Fatalf("got %v, want a 307 redirect_refused *ferry.Error", err)
	}
}

func TestRedirectFromHTTPSToPlainHTTPIsNotFollowed(t *testing.T) {
	plain := newKeyLog(t, false)
	// The front lists the plain server as the leader: even a node of the cluster gets nothing
	// over plain HTTP once the client started on HTTPS.
	front := redirector(t, true, func() string { return plain.URL },
		fmt.Sprintf(`{"leader":%q,"peers":[]}`, plain.URL))
	for _, key := range []string{"secret-key", ""} {
		c, err := ferry.New(front.URL, ferry.WithAPIKey(key), ferry.WithHTTPClient(front.Client()))
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Publish(ctxT(t), "orders", []byte("card 4242"), nil)
		refusedRedirect(t, err)
	}
	if got := plain.got(); len(got) != 0 {
		t.Fatalf("the plain-HTTP server got %d requests (Authorization %q), want none", len(got), got)
	}
}

func TestRedirectCarriesTheKeyOnlyToTheClustersNodes(t *testing.T) {
	stranger := newKeyLog(t, false)
	front := redirector(t, false, func() string { return stranger.URL }, "") // no node list
	c, err := ferry.New(front.URL, ferry.WithAPIKey("secret-key"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Publish(ctxT(t), "orders", []byte("x"), nil)
	refusedRedirect(t, err)
	if got := stranger.got(); len(got) != 0 {
		t.Fatalf("a host that is not a node got %d requests (Authorization %q), want none", len(got), got)
	}

	// Without a key there is nothing to leak: followed, as net/http follows it.
	anon, err := ferry.New(front.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := anon.Publish(ctxT(t), "orders", []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	if got := stranger.got(); len(got) != 1 || got[0] != "" {
		t.Fatalf("without a key: Authorization %q, want one request without", got)
	}
}

func TestRedirectCarriesTheKeyToTheNodesTheBrokerLists(t *testing.T) {
	leader := newKeyLog(t, false)
	// A follower answers /api/cluster/status itself, naming its leader and peers.
	status := fmt.Sprintf(`{"mode":"cluster","role":"follower","leader":%q,"peers":[{"id":"n1","address":%q}]}`,
		leader.URL, leader.URL)
	follower := redirector(t, false, func() string { return leader.URL }, status)
	c, err := ferry.New(follower.URL, ferry.WithAPIKey("secret-key"))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := c.Publish(ctxT(t), "orders", []byte("x"), nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := leader.got(); len(got) != 2 || got[0] != "Bearer secret-key" || got[1] != got[0] {
		t.Fatalf("the leader got Authorization %q, want the key twice", got)
	}
}

func TestRedirectCarriesTheKeyToWithClusterNodes(t *testing.T) {
	leader := newKeyLog(t, false)
	follower := redirector(t, false, func() string { return leader.URL }, "") // a key without admin: no list
	c, err := ferry.New(follower.URL, ferry.WithAPIKey("secret-key"), ferry.WithClusterNodes(leader.URL))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctxT(t), "orders", []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	if got := leader.got(); len(got) != 1 || got[0] != "Bearer secret-key" {
		t.Fatalf("the leader got Authorization %q, want the key", got)
	}
	if _, err := ferry.New(follower.URL, ferry.WithClusterNodes("node2:7800")); err == nil {
		t.Fatal(`WithClusterNodes("node2:7800") (no scheme) was accepted`)
	}
}
