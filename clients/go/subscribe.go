package ferry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// DefaultPending is how many messages a Subscription holds for its handler unless
// SubscribeOptions.Pending says otherwise.
const DefaultPending = 1024

// SubscribeOptions tune Subscribe; a nil *SubscribeOptions means the defaults.
type SubscribeOptions struct {
	// Pending is how many messages the Subscription holds for its handler (0: DefaultPending).
	// The socket's reader never waits for a handler: when one falls this far behind, further
	// messages for its Subscription are dropped and counted (Subscription.Dropped), as a NATS
	// client does with a slow consumer, until it catches up. Other Subscriptions are not held
	// up. A reader that must not miss anything reads with Stream, which resumes.
	Pending int
	// OnSlowConsumer, when set, is called when the Subscription starts dropping messages (the
	// first drop after the handler had kept up), with the number dropped so far. It runs on
	// the socket's reader: keep it quick, and do not call the Subscription's methods from it.
	OnSlowConsumer func(dropped uint64)
}

// Subscription is a set of patterns heard over the Client's WebSocket (GET /ws), each message
// handed to one handler. It spies: messages are not consumed or leased. Its methods are safe
// for concurrent use.
type Subscription struct {
	hub     *wsHub
	handler func(*Message)
	onSlow  func(uint64)
	queue   chan *Message
	stop    chan struct{}
	// done is closed when the handler's goroutine has returned.
	done    chan struct{}
	dropped atomic.Uint64

	mu       sync.Mutex
	patterns map[string]bool
	closed   bool
	slow     bool // dropping, since the last message queued
}

// Subscribe spies on the topics pattern matches (`orders`, `orders.*`: a trailing `*` matches
// any suffix, `*` alone every topic) over the Client's one WebSocket, which every Subscription
// of the Client shares: it opens with the first and closes with the last. It returns once the
// broker confirmed the pattern, or with the broker's refusal (an *Error: the HTTP status of a
// refused upgrade, 401 or 403, or an error frame's Code with the status HTTP gives it), or
// when ctx ends: an error matching ErrTimeout for a deadline (and ErrConnection too when the
// socket could not connect, wrapping the last failure), else ctx's error.
//
// handler runs on a goroutine of the Subscription, one message at a time in the order received;
// see SubscribeOptions.Pending for what happens when it falls behind. The socket answers the broker's
// Pings (its reader always runs), and after a lost connection (a restart, a network cut) it
// reconnects, waiting 1 s doubling to 32 s, and subscribes every pattern again; messages stored
// while it was away are not heard (WebSocket has no resume: use Stream for that). A message
// matching two patterns of one Subscription is handed to it twice, once per pattern.
func (c *Client) Subscribe(ctx context.Context, pattern string, handler func(*Message),
	opts *SubscribeOptions) (*Subscription, error) {
	if handler == nil {
		return nil, errors.New("ferry: Subscribe needs a handler, got nil")
	}
	if opts == nil {
		opts = &SubscribeOptions{}
	}
	pending := opts.Pending
	if pending <= 0 {
		pending = DefaultPending
	}
	s := &Subscription{handler: handler, onSlow: opts.OnSlowConsumer,
		queue: make(chan *Message, pending), stop: make(chan struct{}), done: make(chan struct{}),
		patterns: map[string]bool{}}
	hub, err := joinHub(c, s)
	if err != nil {
		return nil, err
	}
	s.hub = hub
	go s.handle()
	if err := s.Add(ctx, pattern); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Add subscribes s to one more pattern; it returns as Subscribe does. Adding a pattern s has
// already is a no-op.
func (s *Subscription) Add(ctx context.Context, pattern string) error {
	if pattern == "" {
		return errors.New("ferry: a subscription needs a pattern")
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("%w: cannot subscribe to %q: the subscription is closed", ErrClosed, pattern)
	}
	if s.patterns[pattern] {
		s.mu.Unlock()
		return nil
	}
	s.patterns[pattern] = true
	s.mu.Unlock()
	if err := s.hub.subscribe(ctx, pattern); err != nil {
		s.mu.Lock()
		delete(s.patterns, pattern)
		s.mu.Unlock()
		s.hub.unsubscribe(ctx, pattern)
		return err
	}
	return nil
}

// Unsubscribe stops hearing pattern (messages for it still queued are dropped); the socket
// unsubscribes it unless another Subscription of the Client holds it too. ctx bounds the send.
func (s *Subscription) Unsubscribe(ctx context.Context, pattern string) error {
	s.mu.Lock()
	had := s.patterns[pattern]
	delete(s.patterns, pattern)
	s.mu.Unlock()
	if !had {
		return nil
	}
	return s.hub.unsubscribe(ctx, pattern)
}

// Close ends the subscription: every pattern is unsubscribed, queued messages are dropped, and
// Close returns once a handler running now has returned (so do not call it from the handler).
// The socket closes with the Client's last Subscription, and Close waits for its reader too.
// Closing again is a no-op; Add after Close returns an error matching ErrClosed.
func (s *Subscription) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.done
		return nil
	}
	s.closed = true
	patterns := make([]string, 0, len(s.patterns))
	for p := range s.patterns {
		patterns = append(patterns, p)
	}
	s.patterns = map[string]bool{}
	s.mu.Unlock()
	close(s.stop)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, p := range patterns {
		s.hub.unsubscribe(ctx, p)
	}
	s.hub.leave(s)
	<-s.done
	return nil
}

// Dropped is how many messages were dropped because the handler fell Pending behind.
func (s *Subscription) Dropped() uint64 { return s.dropped.Load() }

// offer queues m for the handler when s holds pattern; it never waits.
func (s *Subscription) offer(pattern string, m *Message) {
	s.mu.Lock()
	if s.closed || !s.patterns[pattern] {
		s.mu.Unlock()
		return
	}
	var tell func(uint64)
	var n uint64
	select {
	case s.queue <- m:
		s.slow = false
	default:
		n = s.dropped.Add(1)
		if !s.slow {
			s.slow, tell = true, s.onSlow
		}
	}
	s.mu.Unlock()
	if tell != nil {
		tell(n)
	}
}

func (s *Subscription) handle() {
	defer close(s.done)
	for {
		select {
		case <-s.stop:
			return
		case m := <-s.queue:
			select {
			case <-s.stop:
				return
			default:
			}
			s.handler(m)
		}
	}
}

// wsHub is a Client's one WebSocket and what is subscribed on it.
type wsHub struct {
	c      *Client
	cancel context.CancelFunc
	// done is closed when run has returned.
	done chan struct{}
	// lastErr is why the socket last failed to connect (nil once connected).
	lastErr error

	mu      sync.Mutex
	conn    *websocket.Conn // nil while (re)connecting
	subs    map[*Subscription]bool
	refs    map[string]int          // pattern → Subscriptions holding it
	waiters map[string][]chan error // pattern → Add calls waiting for `subscribed`
	pending []string                // subscribe frames sent on conn, unconfirmed, oldest first
}

// joinHub adds s to c's hub, starting the hub (and its socket) if c has none; ErrClosed once
// c is closed.
func joinHub(c *Client, s *Subscription) (*wsHub, error) {
	c.hubMu.Lock()
	defer c.hubMu.Unlock()
	if c.closed.Load() {
		return nil, fmt.Errorf("%w: cannot subscribe: the client is closed", ErrClosed)
	}
	h := c.hub
	if h == nil {
		ctx, cancel := context.WithCancel(context.Background())
		h = &wsHub{c: c, cancel: cancel, done: make(chan struct{}), subs: map[*Subscription]bool{},
			refs: map[string]int{}, waiters: map[string][]chan error{}}
		c.hub = h
		go func() {
			defer close(h.done)
			h.run(ctx)
		}()
	}
	h.mu.Lock()
	h.subs[s] = true
	h.mu.Unlock()
	return h, nil
}

// subscriptions are the hub's Subscriptions now.
func (h *wsHub) subscriptions() []*Subscription {
	h.mu.Lock()
	defer h.mu.Unlock()
	subs := make([]*Subscription, 0, len(h.subs))
	for s := range h.subs {
		subs = append(subs, s)
	}
	return subs
}

// leave removes s; the last to leave closes the socket and waits for the hub's reader.
func (h *wsHub) leave(s *Subscription) {
	if h.detach(s) {
		<-h.done
	}
}

// detach removes s; true when it was the last, and the socket is closing.
func (h *wsHub) detach(s *Subscription) bool {
	h.c.hubMu.Lock()
	defer h.c.hubMu.Unlock()
	h.mu.Lock()
	delete(h.subs, s)
	last := len(h.subs) == 0
	conn := h.conn
	if last {
		h.conn = nil
	}
	h.mu.Unlock()
	if !last {
		return false
	}
	if h.c.hub == h {
		h.c.hub = nil
	}
	h.cancel()
	if conn != nil {
		conn.Close(websocket.StatusNormalClosure, "closed by the client")
	}
	return true
}

// subscribe holds pattern for one more Subscription and waits until the broker confirms it.
func (h *wsHub) subscribe(ctx context.Context, pattern string) error {
	ch := make(chan error, 1)
	h.mu.Lock()
	h.refs[pattern]++
	h.waiters[pattern] = append(h.waiters[pattern], ch)
	conn := h.conn
	h.mu.Unlock()
	if conn != nil {
		h.sendSubscribe(ctx, conn, pattern) // else the connect sends it
	}
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		h.mu.Lock()
		h.waiters[pattern] = slices.DeleteFunc(h.waiters[pattern], func(w chan error) bool { return w == ch })
		last := h.lastErr
		h.mu.Unlock()
		err := ctxError(ctx, fmt.Sprintf("subscribe to %q", pattern))
		if last != nil {
			err = fmt.Errorf("%w; the socket: %w", err, last)
		}
		return err
	}
}

// unsubscribe drops one hold of pattern; the last sends `unsubscribe`.
func (h *wsHub) unsubscribe(ctx context.Context, pattern string) error {
	h.mu.Lock()
	if h.refs[pattern] > 1 {
		h.refs[pattern]--
		h.mu.Unlock()
		return nil
	}
	delete(h.refs, pattern)
	conn := h.conn
	h.mu.Unlock()
	if conn == nil {
		return nil
	}
	return h.send(ctx, conn, map[string]string{"type": "unsubscribe", "topic": pattern})
}

func (h *wsHub) sendSubscribe(ctx context.Context, conn *websocket.Conn, pattern string) {
	h.mu.Lock()
	h.pending = append(h.pending, pattern)
	h.mu.Unlock()
	// A failed send means a broken socket: the reconnect subscribes again.
	h.send(ctx, conn, map[string]string{"type": "subscribe", "topic": pattern})
}

func (h *wsHub) send(ctx context.Context, conn *websocket.Conn, frame any) error {
	b, err := json.Marshal(frame)
	if err != nil {
		return err
	}
	// A Write whose context ends closes the socket: the caller's cancellation must not.
	ctx, cancel := h.c.withTimeout(context.WithoutCancel(ctx))
	defer cancel()
	return conn.Write(ctx, websocket.MessageText, b)
}

// run connects, subscribes everything, reads until the socket breaks, and does it again after
// the backoff, until the last Subscription leaves.
func (h *wsHub) run(ctx context.Context) {
	failures := 0
	header := http.Header{}
	h.c.authorize(header)
	for ctx.Err() == nil {
		dctx, cancel := h.c.withTimeout(ctx)
		conn, res, err := websocket.Dial(dctx, h.c.endpoint("/ws", nil),
			&websocket.DialOptions{HTTPClient: h.c.hc, HTTPHeader: header})
		var failed error
		if err != nil && ctx.Err() == nil {
			failed = h.c.transportError(ctx, dctx, err, "GET /ws", 0)
		}
		cancel()
		h.mu.Lock()
		h.lastErr = failed
		h.mu.Unlock()
		if err != nil && res != nil && res.StatusCode >= 400 && res.Body != nil {
			// A refusal of the upgrade (401, 403, …) fails every Add waiting now; the socket
			// keeps trying, with the backoff, for any later one.
			if fe := refusal(res); !loopRetryable(fe.Status) {
				h.failWaiters(fe)
			}
		}
		if err == nil {
			conn.SetReadLimit(maxEventBytes)
			h.mu.Lock()
			if ctx.Err() != nil { // the last Subscription left meanwhile
				h.mu.Unlock()
				conn.CloseNow()
				return
			}
			h.conn = conn
			h.pending = nil
			patterns := make([]string, 0, len(h.refs))
			for p := range h.refs {
				patterns = append(patterns, p)
			}
			h.mu.Unlock()
			for _, p := range patterns {
				h.sendSubscribe(ctx, conn, p)
			}
			h.read(ctx, conn, &failures)
			h.mu.Lock()
			if h.conn == conn {
				h.conn = nil
			}
			h.pending = nil
			h.mu.Unlock()
			conn.CloseNow()
		}
		if !sleepCtx(ctx, h.c.reconnectDelay(failures)) {
			return
		}
		failures++
	}
}

// failWaiters ends every Add waiting for a confirmation with err.
func (h *wsHub) failWaiters(err error) {
	h.mu.Lock()
	waiters := h.waiters
	h.waiters = map[string][]chan error{}
	h.mu.Unlock()
	for _, ws := range waiters {
		for _, w := range ws {
			w <- err
		}
	}
}

// wsFrame is a server frame of GET /ws.
type wsFrame struct {
	Type         string          `json:"type"`
	Topic        string          `json:"topic"`
	Subscription string          `json:"subscription"`
	Message      json.RawMessage `json:"message"`
	Code         string          `json:"code"`
	Detail       string          `json:"detail"`
}

// refusedCodes are the error frames that refuse a `subscribe`.
var refusedCodes = map[string]bool{"bad_request": true, "invalid_name": true,
	"invalid_parameter": true, "already_exists": true, "forbidden": true}

// read handles frames until the socket breaks. Reading is also what answers the broker's Pings.
func (h *wsHub) read(ctx context.Context, conn *websocket.Conn, failures *int) {
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			return
		}
		var f wsFrame
		if json.Unmarshal(data, &f) != nil {
			continue
		}
		switch f.Type {
		case "subscribed":
			*failures = 0
			h.mu.Lock()
			if i := slices.Index(h.pending, f.Topic); i >= 0 {
				h.pending = slices.Delete(h.pending, i, i+1)
			}
			ws := h.waiters[f.Topic]
			delete(h.waiters, f.Topic)
			h.mu.Unlock()
			for _, w := range ws {
				w <- nil
			}
		case "message":
			m := new(Message)
			if json.Unmarshal(f.Message, m) != nil {
				continue
			}
			h.mu.Lock()
			subs := make([]*Subscription, 0, len(h.subs))
			for s := range h.subs {
				subs = append(subs, s)
			}
			h.mu.Unlock()
			for _, s := range subs {
				s.offer(f.Subscription, m)
			}
		case "error":
			h.mu.Lock()
			var ws []chan error
			if refusedCodes[f.Code] && len(h.pending) > 0 {
				p := h.pending[0]
				h.pending = h.pending[1:]
				ws = h.waiters[p]
				delete(h.waiters, p)
			}
			var patterns []string
			if f.Code == "unavailable" { // a spy the broker dropped (fell behind): again
				for p := range h.refs {
					patterns = append(patterns, p)
				}
			}
			h.mu.Unlock()
			for _, w := range ws {
				w <- &Error{Status: codeStatus[Code(f.Code)], Code: Code(f.Code), Detail: f.Detail}
			}
			for _, p := range patterns {
				h.sendSubscribe(ctx, conn, p)
			}
		}
	}
}
