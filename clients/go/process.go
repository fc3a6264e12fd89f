package ferry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// ProcessOptions tunes Process. A nil *ProcessOptions means the default group, Prefetch 10.
type ProcessOptions struct {
	// Group consumes as this consumer group ("" is the topic's default group).
	Group string
	// Prefetch is how many messages one long poll takes at most (1–1000; 0 means 10).
	Prefetch int
	// Visibility is the lease asked for each delivery (0: the topic's, as in ConsumeOptions).
	// Process keeps the leases of what it holds: see Process.
	Visibility time.Duration
	// ShutdownTimeout bounds the shutdown once ctx ends (0: DefaultShutdownTimeout): the
	// handler still running, then the releases and acks still to send. A handler running
	// past it has its context cancelled, and its message's settle is given a quarter of
	// ShutdownTimeout more (5 s at most).
	ShutdownTimeout time.Duration
	// OnError, when set, hears each failed request of the loop: a long poll that failed (Process
	// then waits and polls again), and an ack, touch, requeue or release that failed. It is
	// called from Process's goroutines, the lease keeper's too: keep it quick and safe for
	// concurrent use. Without it those failures are silent until Process returns.
	OnError func(error)
}

// DefaultShutdownTimeout is ProcessOptions.ShutdownTimeout's default, as NATS's drain timeout.
const DefaultShutdownTimeout = 30 * time.Second

const (
	defaultPrefetch = 10
	// processWait is the long poll of Process (the broker's longest is 30 s).
	processWait = 20 * time.Second
	// releaseAtOnce is how many releases a shutdown sends at the same time.
	releaseAtOnce = 8
)

// settling marks the context of a Process's settles, which Client.Close lets through.
type settling struct{}

// settleAs is a handler's error that asks for a requeue of its own kind.
type settleAs struct {
	err   error
	delay time.Duration
	dead  bool
}

func (o *settleAs) Error() string {
	if o.err == nil {
		if o.dead {
			return "dead letter"
		}
		return "requeue after " + o.delay.String()
	}
	return o.err.Error()
}

func (o *settleAs) Unwrap() error { return o.err }

// RequeueAfter is a Process handler's error that requeues its message hidden for d (a failed
// attempt, with err's text as the reason), as NATS's NakWithDelay does.
func RequeueAfter(d time.Duration, err error) error { return &settleAs{err: err, delay: d} }

// DeadLetter is a Process handler's error that moves its message to `{topic}.dlq` now, with
// err's text as the reason: for a message no retry can mend, as NATS's Term does.
func DeadLetter(err error) error { return &settleAs{err: err, dead: true} }

// Process consumes topic until ctx ends, calling handler for each message, one at a time and in
// the order delivered:
//
//   - it long-polls GET /consume/{topic} for up to Prefetch messages at once;
//   - a handler that returns nil has its message acked; acks are batched (POST /ack/{topic}
//     with {"ids":[…]}) and sent before the next poll and at every lease check;
//   - a handler that returns an error has its message requeued (POST /requeue) with
//     err.Error() as the reason, which counts an attempt (the third goes to {topic}.dlq);
//     RequeueAfter(d, err) hides it for d, DeadLetter(err) moves it to {topic}.dlq at once;
//   - Process keeps the leases of what it holds (the message in hand and the prefetched ones):
//     four times a lease it touches, in one POST /touch/{topic}, the leases that would end
//     before the check after next;
//   - when ctx ends, Process stops polling. The handler's context is not ctx: a handler running
//     then is let finish, and its context ends only ShutdownTimeout later. Its outcome counts
//     as usual, except that an error wrapping context.Canceled or DeadlineExceeded releases the
//     message (interrupted, not failed). Prefetched messages never started are released (POST
//     /api/queues/release, several at once: ready again at once, no attempt counted), and the
//     finished ones are acked, all within ShutdownTimeout.
//
// Process returns nil when ctx ended and everything was settled. Otherwise its error joins what
// went wrong: each settle of the shutdown that failed (errors.Is ErrTimeout, say); the last long
// poll's failure when the broker could not be reached when ctx ended (errors.Is
// ErrConnection); ErrClosed when Client.Close stopped it; a refusal waiting cannot mend (a bad
// name, a missing key: a 4xx *Error), which ends Process at once.
//
// Transient failures (a lost connection, a timeout, 429, 5xx) are waited out, 1 s doubling to
// 32 s, each told to OnError. Failed acks are tried again at the next flush. A long poll cut
// short by ctx may have been answered by the broker already: what it leased comes back when its
// lease ends. A handler that panics leaves its message leased until the lease ends.
func (c *Client) Process(ctx context.Context, topic string, opts *ProcessOptions,
	handler func(ctx context.Context, m *Message) error) error {
	if handler == nil {
		return errors.New("ferry: Process needs a handler, got nil")
	}
	if opts == nil {
		opts = &ProcessOptions{}
	}
	p := &processor{c: c, topic: topic, group: opts.Group, prefetch: opts.Prefetch,
		visibility: opts.Visibility, lease: opts.Visibility, shutdown: opts.ShutdownTimeout,
		onError: opts.OnError, held: map[*Message]time.Time{}, unknown: make(chan struct{}, 1)}
	if p.prefetch <= 0 {
		p.prefetch = defaultPrefetch
	}
	if p.shutdown <= 0 {
		p.shutdown = DefaultShutdownTimeout
	}
	parent := ctx
	ctx, end, ok := c.begin(ctx)
	if !ok {
		return fmt.Errorf("%w: cannot process %q: the client is closed", ErrClosed, topic)
	}
	defer end()
	err := p.run(ctx, handler)
	if parent.Err() == nil && errors.Is(context.Cause(ctx), ErrClosed) {
		err = errors.Join(fmt.Errorf("%w: Process of %q stopped by Client.Close", ErrClosed, topic), err)
	}
	return err
}

// processor is one run of Process: what it holds.
type processor struct {
	c          *Client
	topic      string
	group      string
	prefetch   int
	visibility time.Duration // asked for; 0: the topic's
	shutdown   time.Duration
	onError    func(error)

	mu sync.Mutex
	// lease is the leases' length: Visibility, or the topic's as a touch answered (0: unknown).
	lease time.Duration
	held  map[*Message]time.Time // prefetched or in hand, not settled → when its lease ends
	done  []string               // finished, not acked yet
	// stopping: ctx ended; failures from then on are the shutdown's, returned by Process.
	stopping bool
	failures []error
	// unknown wakes the lease keeper to learn the topic's lease (a touch answers it) when
	// messages came before it was known.
	unknown chan struct{}
}

func (p *processor) run(ctx context.Context, handler func(context.Context, *Message) error) error {
	// The work context outlives ctx: settles run on it (and go out after Client.Close too)
	// until ShutdownTimeout and a last grace for the settle of a handler that stopped then;
	// handlers run on hctx, which ends at ShutdownTimeout.
	work, cancelWork := context.WithCancel(context.WithValue(context.WithoutCancel(ctx), settling{}, true))
	defer cancelWork()
	hctx, cancelHandlers := context.WithCancel(work)
	defer cancelHandlers()
	var graceMu sync.Mutex
	var timers []*time.Timer
	stopGrace := context.AfterFunc(ctx, func() {
		p.mu.Lock()
		p.stopping = true
		p.mu.Unlock()
		graceMu.Lock()
		timers = append(timers, time.AfterFunc(p.shutdown, cancelHandlers),
			time.AfterFunc(p.shutdown+lastGrace(p.shutdown), cancelWork))
		graceMu.Unlock()
	})
	defer func() {
		stopGrace()
		graceMu.Lock()
		for _, t := range timers {
			t.Stop()
		}
		graceMu.Unlock()
	}()

	keeperCtx, stopKeeper := context.WithCancel(work)
	var keeper sync.WaitGroup
	keeper.Add(1)
	go func() {
		defer keeper.Done()
		p.keepLeases(keeperCtx, work)
	}()
	var refused error
	failures := 0
	var lastFailure error // of the last long poll, nil once one succeeds
	for ctx.Err() == nil {
		p.flush(work)
		msgs, err := p.poll(ctx)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			var fe *Error
			if errors.As(err, &fe) && !loopRetryable(fe.Status) {
				refused = err
				break
			}
			lastFailure = err
			p.failed(err)
			wait := p.c.reconnectDelay(failures)
			failures++
			if fe != nil && fe.RetryAfter > 0 {
				wait = fe.RetryAfter
			}
			sleepCtx(ctx, wait)
			continue
		}
		failures = 0
		lastFailure = nil
		for i, m := range msgs {
			if ctx.Err() != nil {
				p.release(work, msgs[i:])
				break
			}
			p.handle(ctx, hctx, work, m, handler)
		}
	}
	stopKeeper()
	keeper.Wait()
	p.flush(work)

	p.mu.Lock()
	errs := p.failures
	p.mu.Unlock()
	if refused != nil {
		return errors.Join(append([]error{refused}, errs...)...)
	}
	if lastFailure != nil {
		errs = append([]error{fmt.Errorf("ferry: Process of %q ended (%w) while its long poll failed: %w",
			p.topic, context.Cause(ctx), lastFailure)}, errs...)
	}
	return errors.Join(errs...)
}

// handle runs handler on m and settles m as its answer says.
func (p *processor) handle(ctx, hctx, work context.Context, m *Message, handler func(context.Context, *Message) error) {
	herr := handler(hctx, m)
	var as *settleAs
	switch {
	case herr == nil:
		p.finish(m, true)
	case ctx.Err() != nil && (errors.Is(herr, context.Canceled) || errors.Is(herr, context.DeadlineExceeded)):
		p.finish(m, false)
		p.release(work, []*Message{m})
	case errors.As(herr, &as):
		p.finish(m, false)
		p.requeue(work, m, &RequeueOptions{Reason: reasonOf(as.err), Delay: as.delay, DeadLetter: as.dead})
	default:
		p.finish(m, false)
		p.requeue(work, m, &RequeueOptions{Reason: herr.Error()})
	}
}

// lastGrace is how long after ShutdownTimeout the settle of a handler that stopped then may
// take: a quarter of it, at most 5 s.
func lastGrace(shutdown time.Duration) time.Duration { return min(shutdown/4, 5*time.Second) }

func reasonOf(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// failed tells OnError of a failed request, and keeps it when it is part of the shutdown.
func (p *processor) failed(err error) {
	p.mu.Lock()
	if p.stopping {
		p.failures = append(p.failures, err)
	}
	p.mu.Unlock()
	if p.onError != nil {
		p.onError(err)
	}
}

// finish drops m from what is held; acked puts its id in the next batch ack.
func (p *processor) finish(m *Message, acked bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.held, m)
	if acked {
		p.done = append(p.done, m.ID)
	}
}

// tick is how often the lease keeper looks: a quarter of the lease (1 s while it is unknown).
func (p *processor) tick() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lease <= 0 {
		return time.Second
	}
	return max(p.lease/4, 5*time.Millisecond)
}

// keepLeases acks what is finished and touches what would lose its lease before the check
// after next, every tick, until ctx ends.
func (p *processor) keepLeases(ctx, work context.Context) {
	t := time.NewTimer(p.tick())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.unknown:
			p.mu.Lock()
			due := make([]*Message, 0, len(p.held))
			for m := range p.held {
				due = append(due, m)
			}
			p.mu.Unlock()
			p.touch(work, due)
			t.Reset(p.tick())
			continue
		case <-t.C:
		}
		p.flush(work)
		tick := p.tick()
		horizon := time.Now().Add(2 * tick)
		p.mu.Lock()
		var due []*Message
		for m, until := range p.held {
			if until.Before(horizon) {
				due = append(due, m)
			}
		}
		p.mu.Unlock()
		p.touch(work, due)
		t.Reset(tick)
	}
}

// touch extends the leases of msgs, in one request per 10,000: by the lease asked for, or the
// topic's, whose length the answer says.
func (p *processor) touch(ctx context.Context, msgs []*Message) {
	for i := 0; i < len(msgs); i += maxBatchAck {
		chunk := msgs[i:min(i+maxBatchAck, len(msgs))]
		ids := make([]string, len(chunk))
		for j, m := range chunk {
			ids[j] = m.ID
		}
		sent := time.Now()
		res, err := p.c.touchBatch(ctx, p.topic, p.group, ids, p.visibility)
		if err != nil {
			p.failed(err) // the next check tries again
			continue
		}
		p.mu.Lock()
		if p.visibility <= 0 && res.LeaseMS > 0 {
			p.lease = time.Duration(res.LeaseMS) * time.Millisecond
		}
		for _, m := range chunk {
			if _, ok := p.held[m]; ok {
				p.held[m] = sent.Add(p.lease)
			}
		}
		p.mu.Unlock()
	}
}

// flush acks the finished in one request; ids whose ack failed wait for the next flush.
func (p *processor) flush(ctx context.Context) {
	p.mu.Lock()
	ids := p.done
	p.done = nil
	p.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	if _, err := p.c.AckIDs(ctx, p.topic, ids, &AckOptions{Group: p.group}); err != nil {
		p.failed(err)
		p.mu.Lock()
		p.done = append(ids, p.done...)
		p.mu.Unlock()
	}
}

// release gives messages back unstarted: ready again at once, no attempt counted. Several go
// at once.
func (p *processor) release(ctx context.Context, msgs []*Message) {
	var wg sync.WaitGroup
	slots := make(chan struct{}, releaseAtOnce)
	for _, m := range msgs {
		p.finish(m, false)
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			body := map[string]any{"queue": p.topic, "id": m.ID}
			if p.group != "" {
				body["group"] = p.group
			}
			release := &call{method: http.MethodPost, path: "/api/queues/release", json: body,
				idempotent: true}
			if _, err := p.c.request(ctx, release, nil); err != nil {
				p.failed(err) // its lease ends anyway
			}
		}()
	}
	wg.Wait()
}

// requeue gives m back as a failed attempt.
func (p *processor) requeue(ctx context.Context, m *Message, opts *RequeueOptions) {
	if _, err := p.c.Requeue(ctx, m, opts); err != nil {
		p.failed(err) // its lease ends anyway
	}
}

// poll long-polls for up to prefetch messages (none is an empty slice) and holds them. When the
// lease is the topic's and still unknown, it has the keeper touch them at once to learn it.
func (p *processor) poll(ctx context.Context) ([]*Message, error) {
	wait := processWait
	if p.c.timeout > 0 && wait > p.c.timeout-time.Second {
		wait = max(p.c.timeout-time.Second, 0)
	}
	q := p.groupQuery()
	q.Set("limit", strconv.Itoa(p.prefetch))
	q.Set("timeout", durationParam(wait))
	if p.visibility > 0 {
		q.Set("visibility", durationParam(p.visibility))
	}
	// One decode straight into the answer's shape: limit > 1 answers an array, limit=1 one object
	// (a RawMessage read first and decoded again cost the drain a third of its speed).
	var msgs []*Message
	var one Message
	var out any = &msgs
	if p.prefetch == 1 {
		out = &one
	}
	sent := time.Now()
	status, err := p.c.request(ctx, &call{method: http.MethodGet, path: "/consume/" + seg(p.topic),
		query: q, wait: wait, empty: CodeQueueEmpty, idempotent: true}, out)
	if err != nil {
		return nil, err
	}
	if status == http.StatusNotFound { // queue_empty
		return nil, nil
	}
	if p.prefetch == 1 {
		msgs = []*Message{&one}
	}
	lease(msgs, p.group)
	// The lease began when the broker answered: after sent, and (a long poll waits) at most
	// about a quarter of the lease before the answer came, which the keeper's margin covers.
	began := sent
	if t := time.Now().Add(-p.tick()); t.After(sent) {
		began = t
	}
	p.mu.Lock()
	known := p.lease > 0
	for _, m := range msgs {
		p.held[m] = began.Add(p.lease)
	}
	p.mu.Unlock()
	if !known && len(msgs) > 0 {
		select {
		case p.unknown <- struct{}{}:
		default:
		}
	}
	return msgs, nil
}

func (p *processor) groupQuery() url.Values {
	q := url.Values{}
	if p.group != "" {
		q.Set("group", p.group)
	}
	return q
}

// durationParam writes d as the broker reads durations (`1500ms`).
func durationParam(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
}

// loopRetryable tells a status worth waiting out: 408, 429 and 5xx.
func loopRetryable(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500
}

// refusal reads a non-2xx answer into an *Error, as request does (problem).
func refusal(res *http.Response) *Error {
	data, _ := io.ReadAll(io.LimitReader(res.Body, 64*1024))
	return problem(res.StatusCode, res.Header, data, res.Request.Method+" "+res.Request.URL.Path)
}
