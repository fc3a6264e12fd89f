package ferry

import (
	"crypto/tls"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Version is this client's version; its release is tagged clients/go/v<Version> in the Ferry
// repository (docs/go-client.md, "Install"), and it is sent in the User-Agent.
const Version = "0.9.0"

// DefaultURL is the broker a Client reaches when New is given an empty URL.
const DefaultURL = "http://127.0.0.1:7800"

// DefaultTimeout bounds each request attempt unless WithTimeout says otherwise.
const DefaultTimeout = 60 * time.Second

// Client talks to one Ferry broker over HTTP. It is safe for concurrent use.
type Client struct {
	base    *url.URL
	apiKey  string
	timeout time.Duration
	hc      *http.Client
	// tlsConfig is WithTLSConfig's, applied to hc's transport in New.
	tlsConfig *tls.Config

	// hub is the one WebSocket its Subscriptions share, while it has any (subscribe.go).
	hubMu sync.Mutex
	hub   *wsHub
}

// Option configures a Client in New.
type Option func(*Client)

// WithAPIKey sends key as `Authorization: Bearer <key>` on every request.
func WithAPIKey(key string) Option { return func(c *Client) { c.apiKey = key } }

// WithTimeout bounds each request attempt (default 60 s); long polls add their wait to it.
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// WithHTTPClient sends requests through hc instead of a client of its own. Its CheckRedirect is
// not used: the Client follows a follower's 307 itself, with the API key.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithTLSConfig uses cfg for https:// and wss:// connections: its RootCAs to trust a private CA,
// its Certificates to present a client certificate to a proxy that asks for one. It applies to
// the Client's own HTTP client, or to a copy of WithHTTPClient's whose transport is an
// *http.Transport (another transport is left as it is).
func WithTLSConfig(cfg *tls.Config) Option { return func(c *Client) { c.tlsConfig = cfg } }

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
	c := &Client{base: u, timeout: DefaultTimeout}
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		c.hc = &http.Client{}
	}
	// A copy, so the caller's client keeps its own redirect rule: this one hands 307s back, and
	// request follows them itself with the key and the body.
	hc := *c.hc
	hc.CheckRedirect = noRedirect
	if c.tlsConfig != nil {
		base, ok := hc.Transport.(*http.Transport)
		if hc.Transport == nil {
			base, ok = http.DefaultTransport.(*http.Transport)
		}
		if ok {
			t := base.Clone()
			t.TLSClientConfig = c.tlsConfig.Clone()
			hc.Transport = t
		}
	}
	c.hc = &hc
	if strings.ContainsAny(c.apiKey, "\r\n") {
		return nil, errors.New("ferry: the API key cannot hold a line break")
	}
	return c, nil
}

// URL is the broker's base URL, as New was given it.
func (c *Client) URL() string { return c.base.String() }

// endpoint is the absolute URL of path (already escaped) with query q.
func (c *Client) endpoint(path string, q url.Values) string {
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
	return u.String()
}

// authorize puts the API key on h, when there is one.
func (c *Client) authorize(h http.Header) {
	if c.apiKey != "" {
		h.Set("Authorization", "Bearer "+c.apiKey)
	}
}
