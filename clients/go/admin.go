package ferry

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// TopicOptions are the optional settings of CreateTopic; a nil *TopicOptions means none.
type TopicOptions struct {
	// Policy is what a full topic does with one more publish (default PolicyReject).
	Policy Policy
	// Retention is a default TTL for the topic's messages; 0 sends no `retain` field.
	Retention time.Duration
	// Visibility is the lease of a delivered message (0: the broker's BROKER_VISIBILITY).
	Visibility time.Duration
	// MaxMessages is how many messages the topic holds at most (0: the broker's default).
	MaxMessages int
}

// Topic is a topic's settings.
type Topic struct {
	// Name is the topic's name.
	Name string `json:"name"`
	// Policy is what it does when full.
	Policy Policy `json:"policy"`
	// Retain is the default TTL as the broker writes it ("1h"), empty when none.
	Retain string `json:"retain"`
	// Visibility is its lease as the broker writes it ("30s").
	Visibility string `json:"visibility"`
	// MaxMessages is how many messages it holds at most.
	MaxMessages int `json:"max_messages"`
	// MaxBytes is how many payload bytes it holds at most.
	MaxBytes int64 `json:"max_bytes"`
	// CreatedAt is when it was created.
	CreatedAt time.Time `json:"created_at"`
}

// Group is a named consumer group of a topic.
type Group struct {
	// Topic is the group's topic.
	Topic string `json:"topic"`
	// Name is the group's name.
	Name string `json:"group"`
	// CreatedAt is when it was created.
	CreatedAt time.Time `json:"created_at"`
}

// TopicSummary is one topic's figures, as TopicSummaries lists them.
type TopicSummary struct {
	// Name is the topic's name.
	Name string `json:"name"`
	// Depth is how many messages are ready to consume.
	Depth int `json:"depth"`
	// InFlight is how many are leased to consumers.
	InFlight int `json:"in_flight"`
	// Delayed is how many wait for their Delay to pass.
	Delayed int `json:"delayed"`
	// Held is how many messages the topic holds in all.
	Held int `json:"held"`
	// HeldBytes is their payloads' size.
	HeldBytes int64 `json:"held_bytes"`
	// DLQDepth is how many messages its dead-letter queue holds.
	DLQDepth int `json:"dlq_depth"`
	// Groups are its named consumer groups.
	Groups []string `json:"groups"`
	// Policy is what it does when full.
	Policy Policy `json:"policy"`
	// Retain is its default TTL as the broker writes it ("1h"), empty when none.
	Retain string `json:"retain"`
	// OldestAgeSeconds is the age of its oldest ready message.
	OldestAgeSeconds float64 `json:"oldest_age_seconds"`
}

// Webhook is a registered webhook. The secret is never returned; Signed says there is one.
type Webhook struct {
	// ID names it (DeleteWebhook).
	ID string `json:"id"`
	// Topic is the topic whose messages it receives.
	Topic string `json:"topic"`
	// URL is where the broker POSTs them.
	URL string `json:"url"`
	// Signed says it has a secret: each POST is signed (VerifyWebhook).
	Signed bool `json:"signed"`
	// State is "active" or "paused" (Webhooks only).
	State string `json:"state,omitempty"`
	// Pending is how many messages wait for delivery (Webhooks only).
	Pending int `json:"pending,omitempty"`
	// CreatedAt is when it was registered.
	CreatedAt time.Time `json:"created_at"`
	// LastAttempt is the latest delivery attempt (Webhooks only; nil before the first).
	LastAttempt *WebhookAttempt `json:"last_attempt,omitempty"`
}

// WebhookAttempt is one delivery attempt of a webhook.
type WebhookAttempt struct {
	// At is when it was made.
	At time.Time `json:"at"`
	// Status is the receiver's HTTP status (0: no answer).
	Status int `json:"status"`
	// LatencyMS is how long the receiver took, in milliseconds.
	LatencyMS float64 `json:"latency_ms"`
	// Outcome is what the broker made of it ("delivered", "retry", …).
	Outcome string `json:"outcome"`
	// Error says why it failed, when it did.
	Error string `json:"error"`
}

// Totals are the broker's event counts since it started.
type Totals struct {
	// Published is how many messages were stored.
	Published int64 `json:"published"`
	// Delivered is how many deliveries were made.
	Delivered int64 `json:"delivered"`
	// Acked is how many deliveries were acked.
	Acked int64 `json:"acked"`
	// Requeued is how many attempts failed (requeues and ended leases).
	Requeued int64 `json:"requeued"`
	// DeadLettered is how many messages went to a dead-letter queue.
	DeadLettered int64 `json:"dead_lettered"`
	// Expired is how many messages their TTL ended.
	Expired int64 `json:"expired"`
}

// GroupStats are one topic's (or group's) figures in Stats.
type GroupStats struct {
	// Depth is how many messages are ready.
	Depth int `json:"depth"`
	// InFlight is how many are leased.
	InFlight int `json:"in_flight"`
	// Delayed is how many wait for their Delay.
	Delayed int `json:"delayed"`
	// OldestAgeSeconds is the age of the oldest ready message.
	OldestAgeSeconds float64 `json:"oldest_age_seconds"`
}

// TopicStats are a topic's figures in Stats, with those of its groups.
type TopicStats struct {
	GroupStats
	// HeldBytes is the size of the payloads it holds.
	HeldBytes int64 `json:"held_bytes"`
	// Groups are its named groups' figures.
	Groups map[string]GroupStats `json:"groups"`
}

// Stats are the broker's totals and per-topic figures.
type Stats struct {
	// UptimeSeconds is how long the broker has run.
	UptimeSeconds float64 `json:"uptime_seconds"`
	// Totals are its event counts since it started.
	Totals Totals `json:"totals"`
	// Topics are each topic's figures, by name.
	Topics map[string]TopicStats `json:"topics"`
}

// Health is the broker's /healthz answer.
type Health struct {
	// Status is "ok", or "draining", "electing" or "error" (then the broker answered 503).
	Status string `json:"status"`
	// Version is the broker's version.
	Version string `json:"version"`
	// UptimeSeconds is how long it has run.
	UptimeSeconds float64 `json:"uptime_seconds"`
	// ClusterRole ("leader", "follower", "candidate") and ClusterTerm are set in cluster mode.
	ClusterRole string `json:"cluster_role,omitempty"`
	// ClusterTerm is the election term it is in.
	ClusterTerm int64 `json:"cluster_term,omitempty"`
}

// ClusterPeer is one node as ClusterStatus sees it.
type ClusterPeer struct {
	// ID is the node's id.
	ID string `json:"id"`
	// Address is its base URL.
	Address string `json:"address"`
	// Role is "leader", "follower" or "candidate".
	Role string `json:"role"`
	// Healthy says it was heard from lately.
	Healthy bool `json:"healthy"`
	// LastSeen is when it was last heard from.
	LastSeen time.Time `json:"last_seen"`
	// LagRecords is how many log records it has yet to acknowledge.
	LagRecords int64 `json:"lag_records"`
}

// ClusterStatus is a node's view of its cluster.
type ClusterStatus struct {
	// Mode is "standalone" or "cluster".
	Mode string `json:"mode"`
	// NodeID is this node's id.
	NodeID string `json:"node_id"`
	// Role is this node's role: "leader", "follower" or "candidate".
	Role string `json:"role"`
	// Term is the election term.
	Term int64 `json:"term"`
	// Leader is the leader's address.
	Leader string `json:"leader"`
	// Peers are the cluster's other nodes.
	Peers []ClusterPeer `json:"peers"`
}

// CreateTopic creates a topic ahead of its first publish (POST /api/topics); 409
// `already_exists` if it exists. A Retention of 0 sends no `retain` field.
func (c *Client) CreateTopic(ctx context.Context, name string, opts *TopicOptions) error {
	if opts == nil {
		opts = &TopicOptions{}
	}
	body := map[string]any{"name": name}
	if opts.Policy != "" {
		body["policy"] = opts.Policy
	}
	if opts.Retention > 0 {
		body["retain"] = durationText(opts.Retention)
	}
	if opts.Visibility > 0 {
		body["visibility"] = durationText(opts.Visibility)
	}
	if opts.MaxMessages > 0 {
		body["max_messages"] = opts.MaxMessages
	}
	_, err := c.request(ctx, &call{method: "POST", path: "/api/topics", json: body}, nil)
	return err
}

// Topic returns one topic's settings (GET /api/topics/{name}); 404 `not_found` if unknown.
func (c *Client) Topic(ctx context.Context, name string) (*Topic, error) {
	var t Topic
	if _, err := c.request(ctx, &call{method: "GET", path: "/api/topics/" + seg(name), idempotent: true}, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// Topics returns every topic's settings (GET /api/topics).
func (c *Client) Topics(ctx context.Context) ([]*Topic, error) {
	var ts []*Topic
	if _, err := c.request(ctx, &call{method: "GET", path: "/api/topics", idempotent: true}, &ts); err != nil {
		return nil, err
	}
	return ts, nil
}

// CreateGroup creates a named consumer group of topic (POST /api/groups); it receives every
// message published after. 409 `already_exists` if it exists.
func (c *Client) CreateGroup(ctx context.Context, topic, group string) error {
	_, err := c.request(ctx, &call{method: "POST", path: "/api/groups",
		json: map[string]string{"topic": topic, "group": group}}, nil)
	return err
}

// Groups returns the named groups of topic (GET /api/groups).
func (c *Client) Groups(ctx context.Context, topic string) ([]*Group, error) {
	var gs []*Group
	_, err := c.request(ctx, &call{method: "GET", path: "/api/groups",
		query: url.Values{"topic": {topic}}, idempotent: true}, &gs)
	if err != nil {
		return nil, err
	}
	return gs, nil
}

// TopicSummaries returns every topic with its depth, in-flight, delayed and DLQ counts (GET
// /api/queues).
func (c *Client) TopicSummaries(ctx context.Context) ([]*TopicSummary, error) {
	var qs []*TopicSummary
	if _, err := c.request(ctx, &call{method: "GET", path: "/api/queues", idempotent: true}, &qs); err != nil {
		return nil, err
	}
	return qs, nil
}

// Peek returns up to 10 ready messages of topic without taking any (GET /api/queues/peek).
func (c *Client) Peek(ctx context.Context, topic string) ([]*Message, error) {
	var ms []*Message
	_, err := c.request(ctx, &call{method: "GET", path: "/api/queues/peek",
		query: url.Values{"queue": {topic}}, idempotent: true}, &ms)
	if err != nil {
		return nil, err
	}
	if ms == nil {
		ms = []*Message{}
	}
	return ms, nil
}

// Redrive moves every message of `{topic}.dlq` back to topic with RetryCount 0
// (POST /api/queues/redrive) and returns how many moved. Not retried after a lost connection.
func (c *Client) Redrive(ctx context.Context, topic string) (int, error) {
	var res struct {
		Moved int `json:"moved"`
	}
	_, err := c.request(ctx, &call{method: "POST", path: "/api/queues/redrive",
		query: url.Values{"queue": {topic}}}, &res)
	return res.Moved, err
}

// Purge removes every message of topic (DELETE /api/queues/purge) and returns how many.
func (c *Client) Purge(ctx context.Context, topic string) (int, error) {
	var res struct {
		Purged int `json:"purged"`
	}
	_, err := c.request(ctx, &call{method: "DELETE", path: "/api/queues/purge",
		query: url.Values{"queue": {topic}}, idempotent: true}, &res)
	return res.Purged, err
}

// DeleteTopic deletes topic, its messages and its WAL file (DELETE /api/queues/delete). A
// retry after a lost answer that finds no topic counts as done.
func (c *Client) DeleteTopic(ctx context.Context, topic string) error {
	_, err := c.request(ctx, &call{method: "DELETE", path: "/api/queues/delete",
		query: url.Values{"queue": {topic}}, idempotent: true, doneOnRetry: "not_found"}, nil)
	return err
}

// AddWebhook registers a webhook (POST /webhook/{topic}): Ferry POSTs each message of topic to
// url, signed when secret is not empty (verify with VerifyWebhook). Needs the admin scope.
func (c *Client) AddWebhook(ctx context.Context, topic, url, secret string) (*Webhook, error) {
	body := map[string]string{"url": url}
	if secret != "" {
		body["secret"] = secret
	}
	var w Webhook
	if _, err := c.request(ctx, &call{method: "POST", path: "/webhook/" + seg(topic), json: body}, &w); err != nil {
		return nil, err
	}
	return &w, nil
}

// Webhooks lists the webhooks of topic ("" for every topic) with their state and last attempt
// (GET /api/webhooks).
func (c *Client) Webhooks(ctx context.Context, topic string) ([]*Webhook, error) {
	q := url.Values{}
	if topic != "" {
		q.Set("topic", topic)
	}
	var ws []*Webhook
	_, err := c.request(ctx, &call{method: "GET", path: "/api/webhooks", query: q, idempotent: true}, &ws)
	if err != nil {
		return nil, err
	}
	return ws, nil
}

// DeleteWebhook removes a webhook (DELETE /api/webhooks/{id}). A retry after a lost answer that
// finds no webhook counts as done.
func (c *Client) DeleteWebhook(ctx context.Context, id string) error {
	_, err := c.request(ctx, &call{method: "DELETE", path: "/api/webhooks/" + seg(id), idempotent: true,
		doneOnRetry: "not_found"}, nil)
	return err
}

// Stats returns the broker's totals and per-topic figures (GET /api/stats).
func (c *Client) Stats(ctx context.Context) (*Stats, error) {
	var s Stats
	if _, err := c.request(ctx, &call{method: "GET", path: "/api/stats", idempotent: true}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Health returns the broker's health (GET /healthz). A draining or electing broker answers 503
// with a body, which Health returns (Status says which) instead of an error; not retried.
func (c *Client) Health(ctx context.Context) (*Health, error) {
	var h Health
	_, err := c.request(ctx, &call{method: "GET", path: "/healthz", idempotent: true,
		answers: []int{http.StatusServiceUnavailable}, noRetry: true}, &h)
	if err != nil {
		return nil, err
	}
	return &h, nil
}

// ClusterStatus returns this node's role, term, leader and peers (GET /api/cluster/status).
func (c *Client) ClusterStatus(ctx context.Context) (*ClusterStatus, error) {
	var s ClusterStatus
	if _, err := c.request(ctx, &call{method: "GET", path: "/api/cluster/status", idempotent: true}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Drain puts the broker into draining (POST /api/drain): waiting consumers are answered and
// every later request gets 503 `draining` until the process restarts. Not retried.
func (c *Client) Drain(ctx context.Context) error {
	_, err := c.request(ctx, &call{method: "POST", path: "/api/drain", noRetry: true}, nil)
	return err
}
