package ferry

import "time"

// Priority orders delivery: high before normal before low, FIFO within one.
type Priority string

// The three priorities.
const (
	PriorityHigh   Priority = "high"
	PriorityNormal Priority = "normal"
	PriorityLow    Priority = "low"
)

// Policy is what a full topic does with one more publish.
type Policy string

// The two policies: refuse the publish (429), or drop the oldest message.
const (
	PolicyReject     Policy = "reject"
	PolicyDropOldest Policy = "drop-oldest"
)

// Message is a message as the broker delivers it (consume, peek, streams, subscriptions).
type Message struct {
	// ID is the message's id, a UUIDv7 the broker gave it.
	ID string `json:"id"`
	// Topic is the topic it was consumed from or heard on.
	Topic string `json:"topic"`
	// Payload is the message's bytes (Base64 on the wire).
	Payload []byte `json:"payload"`
	// Timestamp is when the broker stored it.
	Timestamp time.Time `json:"timestamp"`
	// RetryCount is how many attempts failed before this delivery (requeues, ended leases).
	RetryCount int `json:"retry_count"`
	// Headers are the headers stored with it, by lower-case name (`x-mq-trace`).
	Headers map[string]string `json:"headers,omitempty"`
	// Priority is high, normal or low.
	Priority Priority `json:"priority,omitempty"`
	// Group is the consumer group it was delivered to; for a dead letter consumed from the
	// default group of `{topic}.dlq`, the group it failed in.
	Group string `json:"group,omitempty"`
	// Reason is why it was last requeued or dead-lettered.
	Reason string `json:"reason,omitempty"`
	// RedriveCount is how many times a redrive moved it back from its dead-letter queue.
	RedriveCount int `json:"redrive_count,omitempty"`
	// ExpiresAt is when a TTL ends it; zero when it has none.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// EventID is the stream event's id (Stream only): resume after it with LastEventID.
	EventID string `json:"-"`

	// leased: Consume or Process took it as leaseGroup (which Ack, Touch and Requeue use).
	leased     bool
	leaseGroup string
}

// group is the consumer group m's settle calls name: the one that consumed it, when this client
// did, else m.Group.
func (m *Message) group() string {
	if m.leased {
		return m.leaseGroup
	}
	return m.Group
}

// lease marks msgs as consumed by group.
func lease(msgs []*Message, group string) {
	for _, m := range msgs {
		if m != nil {
			m.leased, m.leaseGroup = true, group
		}
	}
}
