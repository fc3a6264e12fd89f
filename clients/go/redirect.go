package ferry

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// A cluster follower answers a write with a 307 to its leader, and the Client follows it with
// the body and, only where it belongs, the API key (docs/go-client.md, "Redirects"):
//
//   - never from https to plain http, key or not;
//   - the key goes to the broker's own host, to the nodes WithClusterNodes names, and to the
//     nodes the broker's GET /api/cluster/status lists (asked on the first redirect elsewhere);
//   - a redirect anywhere else, with a key to carry, is refused with a 307 *Error naming it.

// clusterNodes are the hosts a redirect may carry the API key to.
type clusterNodes struct {
	// named are WithClusterNodes' URLs, read by name in New.
	named []string
	mu    sync.Mutex
	hosts map[string]bool
	// asked is when GET /api/cluster/status was last sent.
	asked time.Time
}

// askEvery bounds how often a redirect to an unknown host asks the broker for its nodes again.
const askEvery = 5 * time.Second

// name starts the set with the broker's URL and WithClusterNodes' URLs.
func (n *clusterNodes) name(base *url.URL) error {
	n.hosts = map[string]bool{hostKey(base): true}
	for _, raw := range n.named {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf(`ferry: WithClusterNodes(%q): a node is an absolute http(s) URL, like "https://node2.internal:7800"`, raw)
		}
		n.hosts[hostKey(u)] = true
	}
	return nil
}

func (n *clusterNodes) has(u *url.URL) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.hosts[hostKey(u)]
}

func (n *clusterNodes) add(raw string) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.hosts[hostKey(u)] = true
}

// hostKey is u's host and port (the scheme's default when none), lower case.
func hostKey(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// follow decides one redirect hop of action from from to to: an error refuses it; withKey says
// whether the API key goes along.
func (c *Client) follow(ctx context.Context, action string, from, to *url.URL) (withKey bool, err error) {
	refuse := func(why string) error {
		return &Error{Status: http.StatusTemporaryRedirect, Code: CodeRedirectRefused,
			Detail: fmt.Sprintf("%s: %s redirected to %s, %s", action, from.Host, to.Redacted(), why)}
	}
	switch {
	case to.Scheme != "http" && to.Scheme != "https":
		return false, refuse("which is not http(s): not followed")
	case from.Scheme == "https" && to.Scheme == "http":
		return false, refuse("from HTTPS to plain HTTP: not followed")
	case c.apiKey == "":
		return false, nil // no key to leak: followed, as net/http follows it
	case c.nodes.has(to) || (c.askNodes(ctx) && c.nodes.has(to)):
		return true, nil
	}
	return false, refuse("which is not one of the cluster's nodes: not followed, so the API key does not go " +
		"there (name the node with ferry.WithClusterNodes, or use a key with the admin scope, which lets " +
		"the client read the nodes from GET /api/cluster/status)")
}

// askNodes adds the leader and peers that the broker's GET /api/cluster/status lists to the
// nodes; false when it did not ask (asked within askEvery) or got no list (a key without the
// admin scope gets 403).
func (c *Client) askNodes(ctx context.Context) bool {
	n := &c.nodes
	n.mu.Lock()
	if !n.asked.IsZero() && time.Since(n.asked) < askEvery {
		n.mu.Unlock()
		return false
	}
	n.asked = time.Now()
	n.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.endpoint("/api/cluster/status", nil), nil)
	if err != nil {
		return false
	}
	req.Header.Set("Accept", "application/json")
	c.authorize(req.Header)
	res, err := c.hc.Do(req)
	if err != nil {
		return false
	}
	defer res.Body.Close()
	var s struct {
		Leader string `json:"leader"`
		Peers  []struct {
			Address string `json:"address"`
		} `json:"peers"`
	}
	if res.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&s) != nil {
		io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10)) //nolint:errcheck // only to reuse the connection
		return false
	}
	n.add(s.Leader)
	for _, p := range s.Peers {
		n.add(p.Address)
	}
	return true
}
