package ferry

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"
)

// maxBatchAck is the most ids one batch ack carries; AckMany splits longer lists.
const maxBatchAck = 10_000

// ConsumeOptions are the optional settings of Consume; a nil *ConsumeOptions means none.
type ConsumeOptions struct {
	// Limit is how many messages to take at most, 1–1000 (0: the broker's default, 1).
	Limit int
	// Wait long-polls: wait up to this long (at most 30 s) for a message.
	Wait time.Duration
	// Group is the consumer group (empty: the default group).
	Group string
	// AutoAck acks each message as it is delivered.
	AutoAck bool
	// Peek reads without taking or acking anything.
	Peek bool
	// FilterKey takes only JSON object payloads with this key (dotted paths reach nested keys);
	// with FilterVal, the key's value as text must equal it.
	FilterKey string
	// FilterVal is the value FilterKey must have (needs FilterKey).
	FilterVal string
	// Visibility is this delivery's lease (0: the topic's).
	Visibility time.Duration
}

// AckOptions name the consumer group of AckIDs; nil means the default group.
type AckOptions struct {
	// Group is the consumer group that consumed the messages (empty: the default group).
	Group string
}

// RequeueOptions are the optional settings of Requeue.
type RequeueOptions struct {
	// Reason is kept on the message and shown in the dead-letter queue.
	Reason string
	// Delay hides the message this long before it is available again.
	Delay time.Duration
	// DeadLetter moves the message to `{topic}.dlq` now, whatever its RetryCount: for a
	// message no retry can mend.
	DeadLetter bool
}

// RequeueResult is the broker's answer to a requeue.
type RequeueResult struct {
	// ID is the message's id.
	ID string `json:"id"`
	// Topic is the topic it was requeued in.
	Topic string `json:"topic"`
	// RetryCount is its failed attempts, this one included.
	RetryCount int `json:"retry_count"`
	// Status is "requeued", or "dead_lettered" when it went to the dead-letter queue.
	Status string `json:"status"`
	// Queue is where the message is now: the topic or `{topic}.dlq`.
	Queue string `json:"queue"`
}

// Consume takes up to Limit messages of topic (GET /consume/{topic}). Each stays leased until
// acked, requeued, or its visibility ends. An empty queue is an empty slice and a nil error.
// It is retried after a lost connection: what the lost answer held comes back when its lease ends.
func (c *Client) Consume(ctx context.Context, topic string, opts *ConsumeOptions) ([]*Message, error) {
	if opts == nil {
		opts = &ConsumeOptions{}
	}
	q := url.Values{}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Wait > 0 {
		q.Set("timeout", durationText(opts.Wait))
	}
	if opts.Group != "" {
		q.Set("group", opts.Group)
	}
	if opts.AutoAck {
		q.Set("auto_ack", "true")
	}
	if opts.Peek {
		q.Set("peek", "true")
	}
	if opts.FilterKey != "" {
		q.Set("filter_key", opts.FilterKey)
	}
	if opts.FilterVal != "" {
		q.Set("filter_val", opts.FilterVal)
	}
	if opts.Visibility > 0 {
		q.Set("visibility", durationText(opts.Visibility))
	}
	// One decode straight into the answer's shape: Limit > 1 answers an array, else one object.
	var msgs []*Message
	var one Message
	var out any = &msgs
	if opts.Limit <= 1 {
		out = &one
	}
	status, err := c.request(ctx, &call{method: "GET", path: "/consume/" + seg(topic), query: q,
		idempotent: true, wait: opts.Wait, empty: CodeQueueEmpty}, out)
	if err != nil {
		return nil, err
	}
	switch {
	case status == http.StatusNotFound: // queue_empty
		return []*Message{}, nil
	case opts.Limit <= 1:
		msgs = []*Message{&one}
	case msgs == nil:
		msgs = []*Message{}
	}
	if !opts.Peek {
		lease(msgs, opts.Group)
	}
	return msgs, nil
}

func groupQuery(opts *AckOptions) url.Values {
	q := url.Values{}
	if opts != nil && opts.Group != "" {
		q.Set("group", opts.Group)
	}
	return q
}

// errNoMessage is the error of a settle call given a nil *Message.
func errNoMessage(action string) error {
	return fmt.Errorf("ferry: %s needs a message, got nil", action)
}

// Ack acknowledges a delivered message (POST /ack/{topic}/{id}), in the group that consumed it;
// a message not held is an *Error with CodeMessageNotFound. Retried after a lost connection.
func (c *Client) Ack(ctx context.Context, m *Message) error {
	if m == nil {
		return errNoMessage("Ack")
	}
	q := url.Values{}
	if g := m.group(); g != "" {
		q.Set("group", g)
	}
	_, err := c.request(ctx, &call{method: "POST", path: "/ack/" + seg(m.Topic) + "/" + seg(m.ID),
		query: q, idempotent: true, doneOnRetry: CodeMessageNotFound}, nil)
	return err
}

// settleKey is a topic and a group: what one batch request settles.
type settleKey struct{ topic, group string }

// byTopicAndGroup groups the ids of msgs by topic and consuming group, in first-seen order.
func byTopicAndGroup(action string, msgs []*Message) ([]settleKey, map[settleKey][]string, error) {
	var keys []settleKey
	ids := map[settleKey][]string{}
	for _, m := range msgs {
		if m == nil {
			return nil, nil, errNoMessage(action)
		}
		k := settleKey{m.Topic, m.group()}
		if _, ok := ids[k]; !ok {
			keys = append(keys, k)
		}
		ids[k] = append(ids[k], m.ID)
	}
	return keys, ids, nil
}

// AckMany acknowledges delivered messages (POST /ack/{topic}: one request per topic and group,
// 10,000 ids each) and returns how many were acked; messages no longer held are not an error.
func (c *Client) AckMany(ctx context.Context, msgs []*Message) (int, error) {
	keys, ids, err := byTopicAndGroup("AckMany", msgs)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, k := range keys {
		n, err := c.AckIDs(ctx, k.topic, ids[k], &AckOptions{Group: k.group})
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// AckIDs acknowledges messages of topic by id (POST /ack/{topic}, 10,000 ids per request), for
// a consumer that kept only the ids, and returns how many were acked; unknown ids are not an
// error.
func (c *Client) AckIDs(ctx context.Context, topic string, ids []string, opts *AckOptions) (int, error) {
	total := 0
	for i := 0; i < len(ids); i += maxBatchAck {
		chunk := ids[i:min(i+maxBatchAck, len(ids))]
		var res struct {
			Acked int `json:"acked"`
		}
		_, err := c.request(ctx, &call{method: "POST", path: "/ack/" + seg(topic),
			query: groupQuery(opts), json: map[string]any{"ids": chunk}, idempotent: true}, &res)
		if err != nil {
			return total, err
		}
		total += res.Acked
	}
	return total, nil
}

// Requeue gives a delivered message back (POST /requeue), in the group that consumed it:
// available again after Delay with its RetryCount up by one, or moved to `{topic}.dlq` on the
// third time or with DeadLetter (Status "dead_lettered"). Not retried after a lost connection,
// since it may have been done.
func (c *Client) Requeue(ctx context.Context, m *Message, opts *RequeueOptions) (*RequeueResult, error) {
	if m == nil {
		return nil, errNoMessage("Requeue")
	}
	if opts == nil {
		opts = &RequeueOptions{}
	}
	body := map[string]any{"id": m.ID, "topic": m.Topic}
	if g := m.group(); g != "" {
		body["group"] = g
	}
	if opts.Reason != "" {
		body["reason"] = truncateReason(opts.Reason)
	}
	if opts.Delay > 0 {
		body["delay"] = durationText(opts.Delay)
	}
	if opts.DeadLetter {
		body["dead_letter"] = true
	}
	var res RequeueResult
	if _, err := c.request(ctx, &call{method: "POST", path: "/requeue", json: body}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// truncateReason keeps the first 1,024 bytes of a reason, as the broker keeps (on a rune
// boundary).
func truncateReason(r string) string {
	if len(r) <= 1024 {
		return r
	}
	r = r[:1024]
	for !utf8.ValidString(r) {
		r = r[:len(r)-1]
	}
	return r
}

// Touch extends the lease of a delivered message to by from now (POST /touch/{topic}/{id};
// 0: the topic's visibility), in the group that consumed it.
func (c *Client) Touch(ctx context.Context, m *Message, by time.Duration) error {
	if m == nil {
		return errNoMessage("Touch")
	}
	q := url.Values{}
	if by > 0 {
		q.Set("by", durationText(by))
	}
	if g := m.group(); g != "" {
		q.Set("group", g)
	}
	_, err := c.request(ctx, &call{method: "POST", path: "/touch/" + seg(m.Topic) + "/" + seg(m.ID),
		query: q, idempotent: true}, nil)
	return err
}

// TouchMany extends the leases of delivered messages to by from now (0: the topic's
// visibility) with one POST /touch/{topic} per topic and group (10,000 ids each), and returns
// how many were touched; messages no longer in flight are not an error.
func (c *Client) TouchMany(ctx context.Context, msgs []*Message, by time.Duration) (int, error) {
	keys, ids, err := byTopicAndGroup("TouchMany", msgs)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, k := range keys {
		for i := 0; i < len(ids[k]); i += maxBatchAck {
			res, err := c.touchBatch(ctx, k.topic, k.group, ids[k][i:min(i+maxBatchAck, len(ids[k]))], by)
			if err != nil {
				return total, err
			}
			total += res.Touched
		}
	}
	return total, nil
}

// touched is the answer of POST /touch/{topic}.
type touched struct {
	Touched   int       `json:"touched"`
	NotFound  []string  `json:"not_found"`
	VisibleAt time.Time `json:"visible_at"`
	// LeaseMS is the lease given, from now: the topic's when the touch named none.
	LeaseMS int64 `json:"lease_ms"`
}

// touchBatch extends the leases of ids in one request.
func (c *Client) touchBatch(ctx context.Context, topic, group string, ids []string, by time.Duration) (*touched, error) {
	q := url.Values{}
	if by > 0 {
		q.Set("by", durationText(by))
	}
	if group != "" {
		q.Set("group", group)
	}
	var res touched
	_, err := c.request(ctx, &call{method: "POST", path: "/touch/" + seg(topic), query: q,
		json: map[string]any{"ids": ids}, idempotent: true}, &res)
	if err != nil {
		return nil, err
	}
	return &res, nil
}
