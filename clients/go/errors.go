package ferry

import (
	"errors"
	"fmt"
)

// Error is a refusal by the broker: its RFC 9457 problem body, read apart. Use errors.As.
type Error struct {
	// Status is the HTTP status (400, 404, 429, …).
	Status int
	// Code is the broker's stable snake_case code (`invalid_name`, `queue_empty`, …).
	Code string
	// Detail says what failed, with the value.
	Detail string
	// RequestID is the broker's X-Request-Id, for its log.
	RequestID string
	// RetryAfter is the Retry-After the broker sent with a 429 or 503, in seconds (0: none).
	RetryAfter int
}

// Error is "ferry: <status> <code>: <detail>".
func (e *Error) Error() string {
	return fmt.Sprintf("ferry: %d %s: %s", e.Status, e.Code, e.Detail)
}

var (
	// ErrTimeout matches (errors.Is) a call that ran past its timeout or its context's deadline.
	ErrTimeout = errors.New("ferry: timed out")
	// ErrConnection matches (errors.Is) a call that could not reach the broker or lost it.
	ErrConnection = errors.New("ferry: cannot reach the broker")
)
