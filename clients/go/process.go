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
	// Visibility is the lease asked for each delivery (0 means 30 s); while a message is held
	// its lease is touched every half of it.
	Visibility time.Duration
	// OnError, when set, hears each failed request of the loop: a long poll that failed (Process
	// then waits and polls again), and an ack, touch, requeue or release that failed. It is
	// called from Process's goroutines, the lease keeper's too: keep it quick and safe for
	// concurrent use. Without it those failures are silent until Process returns.
	OnError func(error)
}

const (
	defaultPrefetch   = 10
	defaultVisibility = 30 * time.Second
	// processWait is the long poll of Process (the broker's longest is 30 s).
	processWait = 20 * time.Second
)

// Process consumes topic until ctx ends, calling handler for each message, one at a time and in
// the order delivered:
//
//   - it long-polls GET /consume/{topic} for up to Prefetch messages at once;
//   - a handler that returns nil has its message acked; acks are batched (POST /ack/{topic}
//     with {"ids":[…]}) and sent before the next poll and at every lease touch;
//   - a handler that returns an error has its message requeued (POST /requeue) with
//     err.Error() as the reason, which counts an attempt (the third goes to {topic}.dlq);
//   - every message held and not finished (the one in hand and the prefetched ones) has its
//     lease touched (POST /touch) every Visibility/2, so a slow handler keeps it;
//   - when ctx ends, the message in hand is let finish (its ctx is ctx, so it may stop early):
//     nil acks it, an error wrapping ctx's error releases it (it was interrupted, not failed),
//     any other error requeues it. Prefetched messages never started are released (POST
//     /api/queues/release: ready again at once for other consumers, no attempt counted), the
//     finished ones are acked, and Process returns nil: ending ctx is how it is stopped. But
//     when the last long poll before ctx ended had failed (the broker could not be reached),
//     Process returns an error wrapping that failure (errors.Is ErrConnection, say) and ctx's.
//
// Transient failures (a lost connection, a timeout, 429, 5xx) are waited out, 1 s doubling to
// 32 s, each told to OnError. A refusal waiting cannot mend (a bad name, a missing key: 4xx)
// ends Process with its *Error. Failed acks are tried again at the next flush. A long poll cut short by ctx may have
// been answered by the broker already: what it leased comes back when its lease ends.
func (c *Client) Process(ctx context.Context, topic string, opts *ProcessOptions,
	handler func(ctx context.Context, m *Message) error) error {
	if opts == nil {
		opts = &ProcessOptions{}
	}
	p := &processor{c: c, topic: topic, group: opts.Group, prefetch: opts.Prefetch,
		visibility: opts.Visibility, onError: opts.OnError}
	if p.prefetch <= 0 {
		p.prefetch = defaultPrefetch
	}
	if p.visibility <= 0 {
		p.visibility = defaultVisibility
	}
	return p.run(ctx, handler)
}

// processor is one run of Process: what it holds.
type processor struct {
	c          *Client
	topic      string
	group      string
	prefetch   int
	visibility time.Duration
	onError    func(error)

	mu   sync.Mutex
	held []*Message // prefetched or in hand, not settled
	done []string   // finished, not acked yet
}

func (p *processor) run(ctx context.Context, handler func(context.Context, *Message) error) error {
	// Settlements go out after ctx ended too: on a context of their own.
	settle := context.WithoutCancel(ctx)
	keeperCtx, stopKeeper := context.WithCancel(settle)
	var keeper sync.WaitGroup
	keeper.Add(1)
	go func() {
		defer keeper.Done()
		p.keepLeases(keeperCtx, settle)
	}()
	defer func() {
		stopKeeper()
		keeper.Wait()
		p.flush(settle)
	}()

	failures := 0
	var lastFailure error // of the last long poll, nil once one succeeds
	for ctx.Err() == nil {
		p.flush(settle)
		msgs, err := p.poll(ctx)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			var fe *Error
			if errors.As(err, &fe) && !loopRetryable(fe.Status) {
				return err
			}
			lastFailure = err
			p.failed(err)
			wait := reconnectDelay(failures)
			failures++
			if fe != nil && fe.RetryAfter > 0 {
				wait = time.Duration(fe.RetryAfter) * time.Second
			}
			sleepCtx(ctx, wait)
			continue
		}
		failures = 0
		lastFailure = nil
		p.mu.Lock()
		p.held = append(p.held, msgs...)
		p.mu.Unlock()
		for i, m := range msgs {
			if ctx.Err() != nil {
				p.release(settle, msgs[i:])
				break
			}
			herr := handler(ctx, m)
			switch {
			case herr == nil:
				p.finish(m, true)
			case ctx.Err() != nil && errors.Is(herr, ctx.Err()):
				p.finish(m, false)
				p.release(settle, []*Message{m})
			default:
				p.finish(m, false)
				p.requeue(settle, m, herr.Error())
			}
		}
	}
	if lastFailure != nil {
		return fmt.Errorf("ferry: Process of %q ended (%w) while its long poll failed: %w",
			p.topic, context.Cause(ctx), lastFailure)
	}
	return nil
}

// failed tells OnError of a failed request.
func (p *processor) failed(err error) {
	if p.onError != nil {
		p.onError(err)
	}
}

// finish drops m from what is held; acked puts its id in the next batch ack.
func (p *processor) finish(m *Message, acked bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, h := range p.held {
		if h == m {
			p.held = append(p.held[:i], p.held[i+1:]...)
			break
		}
	}
	if acked {
		p.done = append(p.done, m.ID)
	}
}

// keepLeases touches what is held and acks what is finished every visibility/2.
func (p *processor) keepLeases(ctx, settle context.Context) {
	t := time.NewTicker(p.visibility / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.flush(settle)
		p.mu.Lock()
		held := append([]*Message(nil), p.held...)
		p.mu.Unlock()
		q := p.groupQuery()
		q.Set("by", durationParam(p.visibility))
		for _, m := range held {
			touch := &call{method: http.MethodPost, path: "/touch/" + seg(p.topic) + "/" + seg(m.ID),
				query: q, idempotent: true}
			if _, err := p.c.request(settle, touch, nil); err != nil {
				p.failed(err) // the next touch tries again
			}
		}
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
	var out struct {
		Acked    int      `json:"acked"`
		NotFound []string `json:"not_found"`
	}
	_, err := p.c.request(ctx, &call{method: http.MethodPost, path: "/ack/" + seg(p.topic),
		query: p.groupQuery(), json: map[string]any{"ids": ids}, idempotent: true}, &out)
	if err != nil {
		p.failed(err)
		p.mu.Lock()
		p.done = append(ids, p.done...)
		p.mu.Unlock()
	}
}

// release gives messages back unstarted: ready again at once, no attempt counted.
func (p *processor) release(ctx context.Context, msgs []*Message) {
	for _, m := range msgs {
		p.finish(m, false)
		body := map[string]any{"queue": p.topic, "id": m.ID}
		if p.group != "" {
			body["group"] = p.group
		}
		release := &call{method: http.MethodPost, path: "/api/queues/release", json: body, idempotent: true}
		if _, err := p.c.request(ctx, release, nil); err != nil {
			p.failed(err) // its lease ends anyway
		}
	}
}

// requeue gives m back as a failed attempt, with reason.
func (p *processor) requeue(ctx context.Context, m *Message, reason string) {
	if len(reason) > 1024 {
		reason = reason[:1024]
	}
	body := map[string]any{"id": m.ID, "topic": p.topic, "reason": reason}
	if p.group != "" {
		body["group"] = p.group
	}
	if _, err := p.c.request(ctx, &call{method: http.MethodPost, path: "/requeue", json: body}, nil); err != nil {
		p.failed(err) // its lease ends anyway
	}
}

// poll long-polls for up to prefetch messages; none is an empty slice.
func (p *processor) poll(ctx context.Context) ([]*Message, error) {
	wait := processWait
	if p.c.timeout > 0 && wait > p.c.timeout-time.Second {
		wait = max(p.c.timeout-time.Second, 0)
	}
	q := p.groupQuery()
	q.Set("limit", strconv.Itoa(p.prefetch))
	q.Set("timeout", durationParam(wait))
	q.Set("visibility", durationParam(p.visibility))
	// One decode straight into the answer's shape: limit > 1 answers an array, limit=1 one object
	// (a RawMessage read first and decoded again cost the drain a third of its speed).
	var msgs []*Message
	var one Message
	var out any = &msgs
	if p.prefetch == 1 {
		out = &one
	}
	status, err := p.c.request(ctx, &call{method: http.MethodGet, path: "/consume/" + seg(p.topic),
		query: q, wait: wait, empty: "queue_empty", idempotent: true}, out)
	if err != nil {
		return nil, err
	}
	if status == http.StatusNotFound { // queue_empty
		return nil, nil
	}
	if p.prefetch == 1 {
		return []*Message{&one}, nil
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
