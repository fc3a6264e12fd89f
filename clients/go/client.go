package ferry

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Version is this client's version; its release is tagged clients/go/v<Version> in the Ferry
// repository (docs/go-client.md, "Install"), and it is sent in the User-Agent.
const Version = "0.9.0"

// DefaultURL is the broker a Client reaches when New is given an empty URL.
const DefaultURL = "http://127.0.0.1:7800"

// DefaultTimeout bounds each request attempt unless WithTimeout (or WithHTTPClient's Timeout)
// says otherwise.
const DefaultTimeout = 60 * time.Second

// Client talks to one Ferry broker over HTTP. It is safe for concurrent use.
type Client struct {
	base   *url.URL
	apiKey string
	// timeout bounds each request attempt; 0: none (the caller's context alone).
	timeout    time.Duration
	timeoutSet bool
	hc         *http.Client
	// tlsConfig is WithTLSConfig's, applied to hc's transport in New.
	tlsConfig *tls.Config
	retry     Retry
	// autoKeys: Publish and PublishBatch give each message without an idempotency key one.
	autoKeys  bool
	userAgent string

	// nodes are the cluster's nodes a redirect may carry the API key to (redirect.go).
	nodes clusterNodes

	// hub is the one WebSocket its Subscriptions share, while it has any (subscribe.go).
	hubMu sync.Mutex
	hub   *wsHub

	// The lifecycle: life ends at Close, which waits for running (Process loops) to return.
	lifeMu  sync.Mutex
	closed  atomic.Bool
	life    context.Context
	endLife context.CancelCauseFunc
	running sync.WaitGroup
	// ownTransport: the transport is the Client's (made or cloned in New); Close empties it.
	ownTransport bool

	// reconnectFirst and reconnectMax are the reconnect schedule of Stream, Subscribe and
	// Process (1 s doubling to 32 s); streamIdle is the silence that replaces a stream (45 s).
	// Only this package's tests change them (withSchedule).
	reconnectFirst, reconnectMax, streamIdle time.Duration
}

// Option configures a Client in New.
type Option func(*Client)

// WithAPIKey sends key as `Authorization: Bearer <key>`: to the broker's URL, and on a
// redirect only to the cluster's own nodes (see WithClusterNodes).
func WithAPIKey(key string) Option { return func(c *Client) { c.apiKey = key } }

// WithTimeout bounds each request attempt (default 60 s); a long poll adds its wait to it, and
// a Stream's or Subscribe's connection must answer within it. 0 means no timeout: only the
// call's context ends it. New refuses a negative d.
func WithTimeout(d time.Duration) Option {
	return func(c *Client) { c.timeout, c.timeoutSet = d, true }
}

// WithHTTPClient sends requests through hc instead of a client of its own. Its CheckRedirect is
// not used (the Client follows a follower's 307 itself), and neither is its Timeout as a bound
// on a whole exchange, which would cut long polls, streams and Process short: unless
// WithTimeout is given too, hc.Timeout becomes the per-attempt timeout. A nil hc.Transport
// means the Client's own transport, not http.DefaultTransport.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithTLSConfig uses cfg for https:// and wss:// connections: its RootCAs to trust a private CA,
// its Certificates to present a client certificate to a proxy that asks for one. It applies to
// the Client's own transport, or to a copy of WithHTTPClient's, which must then be an
// *http.Transport (New fails otherwise).
func WithTLSConfig(cfg *tls.Config) Option { return func(c *Client) { c.tlsConfig = cfg } }

// Retry is how a Client tries a call again (WithRetry): after a 429 or 503, which the broker
// answers before acting, and after a lost connection when the call is safe to repeat.
type Retry struct {
	// Attempts is how many times a call is sent at most, the first included: 1 turns retries
	// off; 0 means the default, 4.
	Attempts int
	// Backoff is the wait before the first retry, doubled for each next one up to MaxBackoff,
	// its upper half jittered (0: 200 ms). A Retry-After the broker sends is waited instead.
	Backoff time.Duration
	// MaxBackoff caps the doubling (0: 5 s).
	MaxBackoff time.Duration
}

// The retry defaults: 4 attempts, waiting 200 ms doubling to 5 s.
const (
	defaultAttempts   = 4
	defaultBackoff    = 200 * time.Millisecond
	defaultMaxBackoff = 5 * time.Second
)

// WithRetry sets how calls are retried (default: 4 attempts, 200 ms doubling to 5 s);
// Retry{Attempts: 1} turns retries off. What is retried is in the package documentation.
func WithRetry(r Retry) Option { return func(c *Client) { c.retry = r } }

// WithAutoIdempotencyKeys gives each message that Publish or PublishBatch sends without an
// IdempotencyKey one of its own (a UUIDv7, the same on every attempt), so a publish whose
// answer was lost is sent again safely: the broker stores it once and answers the second
// attempt with the first's ID and Deduplicated set. Broadcasts are left without.
func WithAutoIdempotencyKeys() Option { return func(c *Client) { c.autoKeys = true } }

// WithClusterNodes names the nodes of the broker's cluster (base URLs, as
// "https://node2.internal:7800") that a follower's 307 may send the API key to, besides the
// broker's URL and the nodes its GET /api/cluster/status lists (which needs the admin scope).
func WithClusterNodes(urls ...string) Option {
	return func(c *Client) { c.nodes.named = append(c.nodes.named, urls...) }
}

// New returns a Client for the broker at rawURL ("" means DefaultURL).
func New(rawURL string, opts ...Option) (*Client, error) {
	if rawURL == "" {
		rawURL = DefaultURL
	}
	u, err := url.Parse(strings.TrimRight(rawURL, "/"))
	if err != nil {
		return nil, err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New(`ferry: the broker URL must be absolute http(s), like "http://127.0.0.1:7800"`)
	}
	c := &Client{base: u, timeout: DefaultTimeout,
		userAgent:      fmt.Sprintf("ferry-go/%s (%s; %s/%s)", Version, runtime.Version(), runtime.GOOS, runtime.GOARCH),
		reconnectFirst: time.Second, reconnectMax: 32 * time.Second, streamIdle: 45 * time.Second}
	for _, o := range opts {
		o(c)
	}
	if c.timeout < 0 {
		return nil, fmt.Errorf("ferry: WithTimeout(%v): a timeout cannot be negative; 0 means none", c.timeout)
	}
	if err := c.useRetry(); err != nil {
		return nil, err
	}
	if err := c.nodes.name(u); err != nil {
		return nil, err
	}
	// A copy, so the caller's client keeps its own rules: this one hands 307s back (request
	// follows them itself), and bounds nothing as a whole (each call has its own deadline).
	var hc http.Client
	if c.hc != nil {
		hc = *c.hc
		if hc.Timeout > 0 && !c.timeoutSet {
			c.timeout = hc.Timeout
		}
		hc.Timeout = 0
	}
	hc.CheckRedirect = noRedirect
	if hc.Transport == nil {
		hc.Transport = newTransport()
		c.ownTransport = true
	}
	if c.tlsConfig != nil {
		base, ok := hc.Transport.(*http.Transport)
		if !ok {
			return nil, fmt.Errorf("ferry: WithTLSConfig needs an *http.Transport, and WithHTTPClient's is a %T: "+
				"set its TLS configuration there instead", hc.Transport)
		}
		t := base.Clone()
		t.TLSClientConfig = c.tlsConfig.Clone()
		hc.Transport = t
		c.ownTransport = true
	}
	c.hc = &hc
	if strings.ContainsAny(c.apiKey, "\r\n") {
		return nil, errors.New("ferry: the API key cannot hold a line break")
	}
	c.life, c.endLife = context.WithCancelCause(context.Background())
	return c, nil
}

// withSchedule shortens the reconnect schedule and a stream's silence limit, for this
// package's tests.
func withSchedule(first, idle time.Duration) Option {
	return func(c *Client) { c.reconnectFirst, c.streamIdle = first, idle }
}

// Close ends the Client. Its Subscriptions are closed, its Streams end (yielding ErrClosed),
// and its Process loops stop as when their context ends: Close waits for them to finish (each
// within its ShutdownTimeout). Then the idle connections of the Client's own transport are
// closed, and every later call returns an error matching ErrClosed; calls in flight finish.
// Closing again is a no-op. Do not call Close from a handler of this Client's Process or
// Subscribe: it would wait for that handler.
func (c *Client) Close() error {
	c.lifeMu.Lock()
	if c.closed.Load() {
		c.lifeMu.Unlock()
		return nil
	}
	c.closed.Store(true)
	c.lifeMu.Unlock()
	c.endLife(ErrClosed)
	c.hubMu.Lock()
	h := c.hub
	c.hubMu.Unlock()
	if h != nil {
		for _, s := range h.subscriptions() {
			s.Close()
		}
	}
	c.running.Wait()
	if c.ownTransport {
		c.hc.CloseIdleConnections()
	}
	return nil
}

// begin registers a Process loop with Close, and bounds ctx by the Client's life (a Close
// cancels it with the cause ErrClosed); false when the Client is closed. end unregisters it.
func (c *Client) begin(ctx context.Context) (_ context.Context, end func(), ok bool) {
	c.lifeMu.Lock()
	defer c.lifeMu.Unlock()
	if c.closed.Load() {
		return nil, nil, false
	}
	c.running.Add(1)
	bctx, stop := c.bound(ctx)
	return bctx, func() { stop(); c.running.Done() }, true
}

// bound is ctx, cancelled too (cause ErrClosed) when the Client closes.
func (c *Client) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	bctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(c.life, func() { cancel(ErrClosed) })
	return bctx, func() { stop(); cancel(nil) }
}

// reconnectDelay is the wait before reconnect number attempt (0-based): 1 s doubling to 32 s.
func (c *Client) reconnectDelay(attempt int) time.Duration {
	d := c.reconnectFirst
	for i := 0; i < attempt && d < c.reconnectMax; i++ {
		d *= 2
	}
	return min(d, c.reconnectMax)
}

// newTransport is a Client's own transport: http.DefaultTransport's settings (proxy from the
// environment, dial and TLS timeouts, HTTP/2), with enough idle connections per host that many
// goroutines sharing a Client reuse them rather than dial anew (DefaultTransport keeps 2).
func newTransport() *http.Transport {
	var t *http.Transport
	if d, ok := http.DefaultTransport.(*http.Transport); ok {
		t = d.Clone()
	} else {
		t = &http.Transport{Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true}
	}
	t.MaxIdleConns = 128
	t.MaxIdleConnsPerHost = 64
	t.IdleConnTimeout = 90 * time.Second
	return t
}

// useRetry puts WithRetry's zero fields at their defaults and checks the rest.
func (c *Client) useRetry() error {
	r := &c.retry
	if r.Attempts == 0 {
		r.Attempts = defaultAttempts
	}
	if r.Backoff == 0 {
		r.Backoff = defaultBackoff
	}
	if r.MaxBackoff == 0 {
		r.MaxBackoff = max(defaultMaxBackoff, r.Backoff)
	}
	if r.Attempts < 0 || r.Backoff < 0 || r.MaxBackoff < r.Backoff {
		return fmt.Errorf("ferry: WithRetry(%+v): Attempts must be 1 or more (1: no retries), "+
			"and 0 < Backoff <= MaxBackoff", *r)
	}
	return nil
}

// URL is the broker's base URL, as New was given it.
func (c *Client) URL() string { return c.base.String() }

// endpoint is the absolute URL of path (already escaped) with query q.
func (c *Client) endpoint(path string, q url.Values) string {
	return c.endpointURL(path, q).String()
}

// endpointURL is endpoint as a *url.URL.
func (c *Client) endpointURL(path string, q url.Values) *url.URL {
	u := *c.base
	raw := strings.TrimRight(c.base.EscapedPath(), "/") + path
	if p, err := url.PathUnescape(raw); err == nil {
		u.Path, u.RawPath = p, raw // RawPath keeps the segments' escapes (%2F stays in one segment)
	} else {
		u.Path, u.RawPath = raw, ""
	}
	if len(q) > 0 {
		u.RawQuery = q.Encode()
	}
	return &u
}

// withTimeout is ctx bounded by the client's timeout, when it has one (WithTimeout(0): none).
func (c *Client) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.timeout)
}

// identify puts the client's User-Agent on h.
func (c *Client) identify(h http.Header) { h.Set("User-Agent", c.userAgent) }

// authorize identifies the client on h and puts the API key there, when there is one: for a
// request to the broker's URL itself.
func (c *Client) authorize(h http.Header) {
	c.identify(h)
	if c.apiKey != "" {
		h.Set("Authorization", "Bearer "+c.apiKey)
	}
}
