// Package ferry is the Go client of Ferry, a message broker over HTTP.
//
// Ferry keeps topics of messages. Producers publish raw bytes to a topic; consumers take
// messages from it, each leased for a visibility timeout until it is acked (done), requeued
// (given back; the third time it goes to the dead-letter queue `{topic}.dlq`), or its lease
// ends. Named consumer groups each receive every message, like Pub/Sub subscriptions.
//
// # Client
//
// New returns a Client for one broker; it is safe for concurrent use. Every call takes a
// context.Context first, durations are time.Duration, payloads are []byte, and options are a
// pointer that may be nil:
//
//	c, err := ferry.New("http://127.0.0.1:7800", ferry.WithAPIKey(key))
//	res, err := c.Publish(ctx, "orders", []byte(`{"id":1}`), nil)
//	msgs, err := c.Consume(ctx, "orders", &ferry.ConsumeOptions{Limit: 10, Wait: 5 * time.Second})
//	for _, m := range msgs {
//		// handle m.Payload …
//		err = c.Ack(ctx, m)
//	}
//	defer c.Close()
//
// An empty queue is an empty slice and a nil error. Ack, Touch and Requeue take the message,
// and settle it in the group that consumed it. Close ends the client: its Subscriptions,
// Streams and Process loops, and every later call fails with ErrClosed.
//
// # Errors
//
// A refusal by the broker (an RFC 9457 problem answer) is an *Error with the HTTP Status, the
// stable Code (CodeInvalidName, CodeMessageNotFound, CodeQueueFull, …), the Detail, the
// broker's RequestID and a RetryAfter; read it with errors.As, or match its code with
// errors.Is(err, ferry.CodeQueueFull). A call that ran past its timeout or its context's
// deadline matches ErrTimeout, one that could not reach the broker, or lost the connection,
// ErrConnection, an answer that cannot be read ErrBadResponse, and a call after Close
// ErrClosed (errors.Is). IsTemporary says which are worth trying again as they are.
//
// # Timeouts and retries
//
// Each attempt is bounded by the client's timeout (WithTimeout, default 60 s; 0 means none)
// plus, for a long poll, its Wait; the context bounds the whole call. An injected http.Client's
// Timeout becomes that per-attempt timeout rather than a limit on long polls, streams and
// Process. 429 and 503 answers are tried again, up to 4 attempts in all (WithRetry), waiting the
// whole Retry-After the broker sends or a jittered backoff from 200 ms. A lost connection is
// retried only for calls that are safe to repeat: reads, acks, touches, deletes, and a Publish or
// PublishBatch that carries idempotency keys (WithAutoIdempotencyKeys gives every message one);
// never a Requeue, Redrive, CreateTopic or Drain. A timeout is never retried.
//
// # Redirects
//
// A cluster follower's 307 to the leader is followed with the body. The API key goes only to
// the broker's host and the cluster's nodes (WithClusterNodes, and those GET
// /api/cluster/status lists), and never from https to plain http: such a redirect fails with a
// 307 *Error of Code `redirect_refused`.
//
// # Identity and tests
//
// Requests carry `User-Agent: ferry-go/<Version> (…)`, through a transport of the client's own
// that keeps enough idle connections for many goroutines. `go test ./...` needs no broker: the
// tests that do start one with deno from the Ferry checkout, or skip (FERRY_TEST_BROKER).
package ferry
