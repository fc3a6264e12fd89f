package ferry

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"time"
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
	FilterVal string
	// Visibility is this delivery's lease (0: the topic's).
	Visibility time.Duration
}

// AckOptions name the consumer group of an ack; nil means the default group.
type AckOptions struct {
	Group string
}

// RequeueOptions are the optional settings of Requeue.
type RequeueOptions struct {
	// Reason is kept on the message and shown in the dead-letter queue.
	Reason string
	// Delay hides the message this long before it is available again.
	Delay time.Duration
	// Group is the consumer group (empty: the message's Group).
	Group string
}

// RequeueResult is the broker's answer to a requeue.
type RequeueResult struct {
	ID         string `json:"id"`
	Topic      string `json:"topic"`
	RetryCount int    `json:"retry_count"`
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
	var raw json.RawMessage
	_, err := c.request(ctx, &call{method: "GET", path: "/consume/" + seg(topic), query: q,
		idempotent: true, wait: opts.Wait, empty: "queue_empty"}, &raw)
	if err != nil {
		return nil, err
	}
	return decodeMessages(raw)
}

// decodeMessages reads one Message object or an array of them; nothing is an empty slice.
func decodeMessages(raw json.RawMessage) ([]*Message, error) {
	for _, b := range raw {
		switch b {
		case ' ', '\t', '\r', '\n':
			continue
		case '[':
			var ms []*Message
			if err := json.Unmarshal(raw, &ms); err != nil {
				return nil, &Error{Code: "bad_response", Detail: "cannot read the messages: " + err.Error()}
			}
			return ms, nil
		default:
			var m Message
			if err := json.Unmarshal(raw, &m); err != nil {
				return nil, &Error{Code: "bad_response", Detail: "cannot read the message: " + err.Error()}
			}
			return []*Message{&m}, nil
		}
	}
	return []*Message{}, nil
}

func groupQuery(opts *AckOptions) url.Values {
	q := url.Values{}
	if opts != nil && opts.Group != "" {
		q.Set("group", opts.Group)
	}
	return q
}

// Ack acknowledges one delivered message (POST /ack/{topic}/{id}); a message not held is 404
// `message_not_found`. Retried after a lost connection.
func (c *Client) Ack(ctx context.Context, topic, id string, opts *AckOptions) error {
	_, err := c.request(ctx, &call{method: "POST", path: "/ack/" + seg(topic) + "/" + seg(id),
		query: groupQuery(opts), idempotent: true, doneOnRetry: "message_not_found"}, nil)
	return err
}

// AckMany acknowledges many messages (POST /ack/{topic}, 10,000 ids per request) and returns
// how many were acked; unknown ids are not an error.
func (c *Client) AckMany(ctx context.Context, topic string, ids []string, opts *AckOptions) (int, error) {
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

// Requeue gives a delivered message back (POST /requeue): available again after Delay with its
// RetryCount up by one, or moved to `{topic}.dlq` on the third time (Status "dead_lettered").
// Not retried after a lost connection, since it may have been done.
func (c *Client) Requeue(ctx context.Context, msg *Message, opts *RequeueOptions) (*RequeueResult, error) {
	if opts == nil {
		opts = &RequeueOptions{}
	}
	body := map[string]any{"id": msg.ID, "topic": msg.Topic}
	group := opts.Group
	if group == "" {
		group = msg.Group
	}
	if group != "" {
		body["group"] = group
	}
	if opts.Reason != "" {
		body["reason"] = opts.Reason
	}
	if opts.Delay > 0 {
		body["delay"] = durationText(opts.Delay)
	}
	var res RequeueResult
	if _, err := c.request(ctx, &call{method: "POST", path: "/requeue", json: body}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Touch extends the lease of a delivered message to by from now (POST /touch/{topic}/{id};
// 0: the topic's visibility).
func (c *Client) Touch(ctx context.Context, topic, id string, by time.Duration) error {
	q := url.Values{}
	if by > 0 {
		q.Set("by", durationText(by))
	}
	_, err := c.request(ctx, &call{method: "POST", path: "/touch/" + seg(topic) + "/" + seg(id),
		query: q, idempotent: true}, nil)
	return err
}
