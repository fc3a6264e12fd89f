package ferry

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Error is a refusal by the broker: its RFC 9457 problem body, read apart. Use errors.As, or
// errors.Is with a Code: errors.Is(err, ferry.CodeQueueFull).
type Error struct {
	// Status is the HTTP status (400, 404, 429, …); for an error frame of the WebSocket, the
	// status the broker gives that code over HTTP.
	Status int
	// Code is the broker's stable code (CodeInvalidName, CodeQueueFull, …); "" when the answer
	// was not the broker's problem body (a proxy's 502 page, say).
	Code Code
	// Detail says what failed, with the value.
	Detail string
	// RequestID is the broker's X-Request-Id, for its log.
	RequestID string
	// RetryAfter is the Retry-After the broker sent with a 429 or 503 (0: none).
	RetryAfter time.Duration
}

// Error is "ferry: <status> <code>: <detail>".
func (e *Error) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("ferry: %d: %s", e.Status, e.Detail)
	}
	return fmt.Sprintf("ferry: %d %s: %s", e.Status, e.Code, e.Detail)
}

// Is matches a Code: errors.Is(err, ferry.CodeMessageNotFound) holds for an *Error of that code.
func (e *Error) Is(target error) bool {
	c, ok := target.(Code)
	return ok && c != "" && c == e.Code
}

// Temporary says whether the same call may succeed later without any change: the broker was
// busy or briefly unable (408, 429, 502, 503, 504), not a failing disk (CodeStorageFailed).
func (e *Error) Temporary() bool {
	switch e.Status {
	case http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusBadGateway,
		http.StatusGatewayTimeout:
		return true
	case http.StatusServiceUnavailable:
		return e.Code != CodeStorageFailed
	}
	return false
}

// IsTemporary says whether err is worth trying again later as it is: a timeout, a lost
// connection, or an *Error whose Temporary says so. A cancelled context, a refusal (a bad
// name, a missing key) and ErrClosed are not.
func IsTemporary(err error) bool {
	if errors.Is(err, ErrTimeout) || errors.Is(err, ErrConnection) {
		return true
	}
	var fe *Error
	return errors.As(err, &fe) && fe.Temporary()
}

var (
	// ErrTimeout matches (errors.Is) a call that ran past its timeout or its context's deadline.
	ErrTimeout = errors.New("ferry: timed out")
	// ErrConnection matches (errors.Is) a call that could not reach the broker or lost it.
	ErrConnection = errors.New("ferry: cannot reach the broker")
	// ErrBadResponse matches (errors.Is) a 2xx answer the client cannot read (not the JSON the
	// call expects); the decoding error is wrapped too.
	ErrBadResponse = errors.New("ferry: unreadable answer")
	// ErrClosed matches (errors.Is) a call made after Client.Close or Subscription.Close.
	ErrClosed = errors.New("ferry: closed")
)

// Code is one of the broker's problem codes (docs/api/README.md lists them). A Code is an
// error only so that errors.Is can match an *Error by it.
type Code string

// Error is the code itself, as the broker writes it.
func (c Code) Error() string { return string(c) }

// The broker's problem codes, one per code of its catalog (docs/api/README.md), and the
// client's own CodeRedirectRefused.
const (
	CodeBadRequest        Code = "bad_request"
	CodeInvalidName       Code = "invalid_name"
	CodeInvalidDuration   Code = "invalid_duration"
	CodeInvalidParameter  Code = "invalid_parameter"
	CodeEmptyBody         Code = "empty_body"
	CodeUnauthorized      Code = "unauthorized"
	CodeForbidden         Code = "forbidden"
	CodeTopicLimitReached Code = "topic_limit_reached"
	CodeSubscriptionsFull Code = "subscriptions_full"
	CodeNotFound          Code = "not_found"
	CodeQueueEmpty        Code = "queue_empty"
	CodeMessageNotFound   Code = "message_not_found"
	CodeMethodNotAllowed  Code = "method_not_allowed"
	CodeAlreadyExists     Code = "already_exists"
	CodePayloadTooLarge   Code = "payload_too_large"
	CodeQueueFull         Code = "queue_full"
	CodeMemoryFull        Code = "memory_full"
	CodeRateLimited       Code = "rate_limited"
	CodeTooManySockets    Code = "too_many_sockets"
	CodeDraining          Code = "draining"
	CodeElecting          Code = "electing"
	CodeUnavailable       Code = "unavailable"
	CodeStorageFailed     Code = "storage_failed"
	CodeDiskFull          Code = "disk_full"
	CodeInternal          Code = "internal"

	// CodeRedirectRefused is the client's own: a 307 it did not follow, so as not to send the
	// API key where it does not belong (docs/go-client.md, "Redirects").
	CodeRedirectRefused Code = "redirect_refused"
)

// codeStatus is the HTTP status the broker answers each code with (docs/api/README.md).
var codeStatus = map[Code]int{
	CodeBadRequest: 400, CodeInvalidName: 400, CodeInvalidDuration: 400, CodeInvalidParameter: 400,
	CodeEmptyBody: 400, CodeUnauthorized: 401, CodeForbidden: 403, CodeTopicLimitReached: 403,
	CodeSubscriptionsFull: 403, CodeNotFound: 404, CodeQueueEmpty: 404, CodeMessageNotFound: 404,
	CodeMethodNotAllowed: 405, CodeAlreadyExists: 409, CodePayloadTooLarge: 413, CodeQueueFull: 429,
	CodeMemoryFull: 429, CodeRateLimited: 429, CodeTooManySockets: 429, CodeInternal: 500,
	CodeDraining: 503, CodeElecting: 503, CodeUnavailable: 503, CodeStorageFailed: 503,
	CodeDiskFull: 507,
}
