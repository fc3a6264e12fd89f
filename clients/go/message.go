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
	ID         string            `json:"id"`
	Topic      string            `json:"topic"`
	Payload    []byte            `json:"payload"` // base64 on the wire
	Timestamp  time.Time         `json:"timestamp"`
	RetryCount int               `json:"retry_count"`
	Headers    map[string]string `json:"headers,omitempty"`
	Priority   string            `json:"priority,omitempty"`
	Group      string            `json:"group,omitempty"`
	Reason     string            `json:"reason,omitempty"`
	// RedriveCount is how many times a redrive moved it back from its dead-letter queue.
	RedriveCount int `json:"redrive_count,omitempty"`
	// ExpiresAt is when a TTL ends it; zero when it has none.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// EventID is the stream event's id (Stream only): resume after it with LastEventID.
	EventID string `json:"-"`
}
