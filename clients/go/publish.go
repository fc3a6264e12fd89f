package ferry

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"
)

// PublishOptions are the optional settings of Publish; a nil *PublishOptions means none.
type PublishOptions struct {
	// TTL drops the message if it is not consumed within this time (0: never).
	TTL time.Duration
	// Delay hides the message until this time has passed.
	Delay time.Duration
	// Priority is high, normal (the default) or low.
	Priority Priority
	// IdempotencyKey: a repeat within 5 minutes stores nothing and answers the original ID with
	// Deduplicated set. With a key, a publish whose connection was lost is sent again.
	IdempotencyKey string
	// Headers are stored with the message; a name without the `X-MQ-` prefix gets it.
	Headers map[string]string
	// Broadcast hands the message to the consumers waiting at this instant and to live
	// streams, never storing it.
	Broadcast bool
	// ContentType is the payload's Content-Type, kept for webhooks (default
	// application/octet-stream).
	ContentType string
}

// PublishResult is the broker's answer to a publish.
type PublishResult struct {
	// ID is the message's id (UUIDv7); for a repeated idempotency key, the original's.
	ID string `json:"id"`
	// Topic is the topic it was stored in.
	Topic string `json:"topic"`
	// Timestamp is when the broker stored it.
	Timestamp time.Time `json:"timestamp"`
	// Priority is the priority it was stored with.
	Priority Priority `json:"priority"`
	// Deduplicated is true when the idempotency key was seen within its window: nothing stored.
	Deduplicated bool `json:"deduplicated"`
	// VisibleAt is when a delayed message becomes available (zero without Delay).
	VisibleAt time.Time `json:"visible_at,omitzero"`
	// ExpiresAt is when its TTL ends (zero without TTL).
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// Broadcast is true for a broadcast, which has no ID; DeliveredTo says how many got it.
	Broadcast bool `json:"broadcast,omitempty"`
	// DeliveredTo is how many waiting consumers and streams a broadcast reached.
	DeliveredTo int `json:"delivered_to,omitempty"`
}

// mqHeader is name with the X-MQ- prefix the broker stores.
func mqHeader(name string) string {
	if len(name) >= 5 && strings.EqualFold(name[:5], "x-mq-") {
		return name
	}
	return "X-MQ-" + name
}

// Publish stores body as one message of topic (POST /publish/{topic}; the topic is created on
// its first publish). A 2xx means it is durable. It is retried after a lost connection only
// when it carries an IdempotencyKey (its own, or WithAutoIdempotencyKeys').
func (c *Client) Publish(ctx context.Context, topic string, body []byte, opts *PublishOptions) (*PublishResult, error) {
	if opts == nil {
		opts = &PublishOptions{}
	}
	q := url.Values{}
	if opts.TTL > 0 {
		q.Set("ttl", durationText(opts.TTL))
	}
	if opts.Delay > 0 {
		q.Set("delay", durationText(opts.Delay))
	}
	if opts.Priority != "" {
		q.Set("priority", string(opts.Priority))
	}
	if opts.Broadcast {
		q.Set("broadcast", "true")
	}
	h := http.Header{}
	for k, v := range opts.Headers {
		h.Set(mqHeader(k), v)
	}
	key := opts.IdempotencyKey
	if key == "" && c.autoKeys && !opts.Broadcast {
		key = newIdempotencyKey() // the same on every attempt: a lost answer is safe to retry
	}
	if key != "" {
		h.Set("Idempotency-Key", key)
	}
	ct := opts.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	if body == nil {
		body = []byte{}
	}
	var res PublishResult
	_, err := c.request(ctx, &call{method: "POST", path: "/publish/" + seg(topic), query: q,
		body: body, contentType: ct, header: h, idempotent: key != ""}, &res)
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// BatchMessage is one message of PublishBatch; its fields mean what PublishOptions' do.
type BatchMessage struct {
	// Payload is the message's bytes.
	Payload []byte
	// TTL drops the message if it is not consumed within this time (0: never).
	TTL time.Duration
	// Delay hides the message until this time has passed.
	Delay time.Duration
	// Priority is high, normal (the default) or low.
	Priority Priority
	// IdempotencyKey: a repeat within 5 minutes stores nothing and answers the original ID.
	IdempotencyKey string
	// Headers are stored with the message; a name without the `X-MQ-` prefix gets it.
	Headers map[string]string
	// ContentType is the payload's Content-Type, kept for webhooks.
	ContentType string
}

// maxBatchPublish is the most messages one batch request carries; PublishBatch splits more.
const maxBatchPublish = 1000

// PublishBatch stores messages with POST /publish/{topic}/batch, 1,000 per request, each request
// all or nothing, and returns one result per message in order. With more than 1,000, a request
// that fails ends the call: the results of the requests before it are returned with the error.
// A request is retried after a lost connection only when every message in it carries an
// IdempotencyKey (its own, or WithAutoIdempotencyKeys'). A UTF-8 payload is sent as text.
func (c *Client) PublishBatch(ctx context.Context, topic string, msgs []BatchMessage) ([]*PublishResult, error) {
	var out []*PublishResult
	for i := 0; i < len(msgs); i += maxBatchPublish {
		res, err := c.publishBatch(ctx, topic, msgs[i:min(i+maxBatchPublish, len(msgs))])
		out = append(out, res...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// publishBatch stores up to 1,000 messages in one request.
func (c *Client) publishBatch(ctx context.Context, topic string, msgs []BatchMessage) ([]*PublishResult, error) {
	type item struct {
		Payload        *[]byte           `json:"payload,omitempty"`
		PayloadText    *string           `json:"payload_text,omitempty"`
		TTL            string            `json:"ttl,omitempty"`
		Delay          string            `json:"delay,omitempty"`
		Priority       Priority          `json:"priority,omitempty"`
		IdempotencyKey string            `json:"idempotency_key,omitempty"`
		Headers        map[string]string `json:"headers,omitempty"`
		ContentType    string            `json:"content_type,omitempty"`
	}
	items := make([]item, len(msgs))
	keyed := true
	for i, m := range msgs {
		it := item{Priority: m.Priority, IdempotencyKey: m.IdempotencyKey, ContentType: m.ContentType}
		if len(m.Payload) > 0 && utf8.Valid(m.Payload) {
			text := string(m.Payload) // a third smaller than Base64, and no encoding
			it.PayloadText = &text
		} else {
			payload := m.Payload
			if payload == nil {
				payload = []byte{}
			}
			it.Payload = &payload
		}
		if m.TTL > 0 {
			it.TTL = durationText(m.TTL)
		}
		if m.Delay > 0 {
			it.Delay = durationText(m.Delay)
		}
		if len(m.Headers) > 0 {
			it.Headers = map[string]string{}
			for k, v := range m.Headers {
				it.Headers[mqHeader(k)] = v
			}
		}
		if it.IdempotencyKey == "" && c.autoKeys {
			it.IdempotencyKey = newIdempotencyKey()
		}
		if it.IdempotencyKey == "" {
			keyed = false
		}
		items[i] = it
	}
	var res struct {
		Messages []*PublishResult `json:"messages"`
	}
	_, err := c.request(ctx, &call{method: "POST", path: "/publish/" + seg(topic) + "/batch",
		json: items, idempotent: keyed}, &res)
	if err != nil {
		return nil, err
	}
	return res.Messages, nil
}
