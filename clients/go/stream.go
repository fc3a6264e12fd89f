package ferry

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// StreamOptions tunes Stream. A nil *StreamOptions starts with the messages stored from now on.
type StreamOptions struct {
	// LastEventID resumes after this event id (a Message.EventID seen before): the broker first
	// sends every message stored after it that the topic still holds.
	LastEventID string
	// FilterKey keeps only messages whose JSON object payload has this key (dots reach nested
	// keys); with FilterVal, the value's text form must equal FilterVal.
	FilterKey string
	// FilterVal is the value FilterKey must have (needs FilterKey).
	FilterVal string
	// OnReset hears `event: reset`: messages were missed (they left the topic before a resume
	// reached them, or this reader fell too far behind). Messages go on arriving after it.
	OnReset func()
}

// Stream reads the server-sent events of GET /stream/{topic}: a live, read-only copy of every
// message stored in the topic (nothing is consumed), each with its EventID set.
//
//   - It reconnects whenever the stream ends or breaks (a restart, a lost connection, 45 s
//     without an event or ping), waiting 1 s doubling to 32 s, and resumes with Last-Event-ID
//     set to the last id seen, so nothing still held by the topic is missed. A broker that says
//     it is stopping (`event: shutdown`) is waited for quietly.
//   - These transient failures are not yielded; bound the wait with ctx.
//   - A refusal waiting cannot mend (4xx other than 408 and 429: a bad name, a missing key) is
//     yielded as an *Error and ends the sequence. An event whose data is not a Message is
//     yielded as an error, and the sequence goes on if the loop does.
//   - A broadcast has no event id: its EventID is "" (the resume point stays the last id).
//   - The sequence ends when ctx ends (nothing is yielded then) or the loop breaks. When the
//     Client is closed (before or during), it yields an error matching ErrClosed and ends.
//
// The connection is dropped after 45 s without an event or the broker's ping (sent every
// 15 s).
func (c *Client) Stream(ctx context.Context, topic string, opts *StreamOptions) iter.Seq2[*Message, error] {
	if opts == nil {
		opts = &StreamOptions{}
	}
	return func(yield func(*Message, error) bool) {
		parent := ctx
		ctx, stop := c.bound(parent)
		defer stop()
		closed := func() bool {
			if parent.Err() == nil && errors.Is(context.Cause(ctx), ErrClosed) {
				yield(nil, fmt.Errorf("%w: stream %q: the client is closed", ErrClosed, topic))
				return true
			}
			return false
		}
		s := &sseStream{c: c, topic: topic, opts: opts, last: opts.LastEventID}
		failures := 0
		for ctx.Err() == nil {
			connected, wait, err := s.connect(ctx, yield)
			if err != nil {
				if !errors.Is(err, errStop) && ctx.Err() == nil {
					yield(nil, err)
				}
				return
			}
			if connected {
				failures = 0
			}
			if wait == 0 {
				wait = c.reconnectDelay(failures)
				failures++
			}
			if !sleepCtx(ctx, wait) {
				break
			}
		}
		closed()
	}
}

// errStop is the caller's break, passed up from a yield.
var errStop = errors.New("ferry: stream left")

// sseStream is one Stream iteration: where to resume.
type sseStream struct {
	c     *Client
	topic string
	opts  *StreamOptions
	last  string
}

// connect reads one connection until it ends. connected says it got a 200; wait is how long
// to wait before the next (0: the backoff); err ends the sequence (errStop: the caller broke).
func (s *sseStream) connect(ctx context.Context, yield func(*Message, error) bool) (connected bool, wait time.Duration, err error) {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	q := url.Values{}
	if s.opts.FilterKey != "" {
		q.Set("filter_key", s.opts.FilterKey)
	}
	if s.opts.FilterVal != "" {
		q.Set("filter_val", s.opts.FilterVal)
	}
	req, err := http.NewRequestWithContext(cctx, http.MethodGet,
		s.c.endpoint("/stream/"+url.PathEscape(s.topic), q), nil)
	if err != nil {
		return false, 0, err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-cache")
	if s.last != "" {
		req.Header.Set("Last-Event-ID", s.last)
	}
	s.c.authorize(req.Header)
	// The answer's headers must come within the client's timeout; the body may last forever.
	var connectTimer *time.Timer
	if s.c.timeout > 0 {
		connectTimer = time.AfterFunc(s.c.timeout, cancel)
	}
	res, err := s.c.hc.Do(req)
	if connectTimer != nil && !connectTimer.Stop() && err == nil {
		res.Body.Close()
		return false, 0, nil // timed out as the answer came: try again
	}
	if err != nil {
		return false, 0, nil
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		fe := refusal(res)
		if !loopRetryable(fe.Status) {
			return false, 0, fe
		}
		return false, fe.RetryAfter, nil
	}

	// A watchdog replaces a connection nothing has come through for streamIdle.
	var mu sync.Mutex
	streamIdle := s.c.streamIdle
	idle := time.AfterFunc(streamIdle, cancel)
	defer idle.Stop()
	touch := func(on bool) {
		mu.Lock()
		defer mu.Unlock()
		if on {
			idle.Reset(streamIdle)
		} else {
			idle.Stop()
		}
	}
	p := newSSEParser(res.Body)
	for {
		ev, err := p.next()
		if err != nil {
			return true, 0, nil // ended or broke: reconnect (after a shutdown too)
		}
		touch(false) // the caller's time is not silence
		switch ev.typ {
		case "reset":
			if s.opts.OnReset != nil {
				s.opts.OnReset()
			}
		case "message":
			m := new(Message)
			if err := json.Unmarshal([]byte(ev.data), m); err != nil {
				if !yield(nil, fmt.Errorf("ferry: stream %q: unreadable event %.80q: %w", s.topic, ev.data, err)) {
					return true, 0, errStop
				}
				break
			}
			if ev.hasID {
				m.EventID = ev.id
				s.last = ev.id
			}
			if !yield(m, nil) {
				return true, 0, errStop
			}
		}
		// `shutdown` and unknown events: nothing to do; the end of the body follows.
		if ctx.Err() != nil {
			return true, 0, nil // the loop above ends, and says so if the Client closed
		}
		touch(true)
	}
}

// sseEvent is one dispatched server-sent event.
type sseEvent struct {
	typ   string // "message" unless an `event:` line named it
	data  string // the `data:` lines joined with "\n"
	id    string // this event's `id:` (when hasID)
	hasID bool
}

// sseParser reads the text/event-stream format as the HTML standard defines it: lines end in
// CRLF, LF or CR; `data:` lines join with newlines; `event:` names the event; `id:` names it
// (an id holding NUL is ignored); `:` lines are comments (pings); a blank line dispatches.
type sseParser struct {
	sc *bufio.Scanner
}

// maxEventBytes bounds one line: a 2 MiB payload as Base64 and as text, escaped.
const maxEventBytes = 32 << 20

func newSSEParser(r io.Reader) *sseParser {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), maxEventBytes)
	afterCR := false
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		skip := 0
		if afterCR && len(data) > 0 {
			afterCR = false
			if data[0] == '\n' { // the LF of a CRLF whose CR ended the last line
				skip = 1
				data = data[1:]
				if len(data) == 0 {
					return skip, nil, nil
				}
			}
		}
		if i := bytes.IndexAny(data, "\r\n"); i >= 0 {
			if data[i] == '\r' {
				if i+1 < len(data) {
					if data[i+1] == '\n' {
						return skip + i + 2, data[:i], nil
					}
				} else {
					afterCR = true
				}
			}
			return skip + i + 1, data[:i], nil
		}
		if atEOF {
			if len(data) > 0 { // an unterminated last line is dropped, as is its event
				return skip + len(data), nil, bufio.ErrFinalToken
			}
			return skip, nil, io.EOF
		}
		return skip, nil, nil
	})
	return &sseParser{sc: sc}
}

// next reads up to the next dispatched event; io.EOF (or the read's error) at the end.
func (p *sseParser) next() (sseEvent, error) {
	var ev sseEvent
	var data []string
	for p.sc.Scan() {
		line := p.sc.Text()
		if line == "" {
			if len(data) == 0 {
				ev = sseEvent{}
				continue
			}
			if ev.typ == "" {
				ev.typ = "message"
			}
			ev.data = strings.Join(data, "\n")
			return ev, nil
		}
		if line[0] == ':' {
			continue
		}
		field, value, found := strings.Cut(line, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch field {
		case "data":
			data = append(data, value)
		case "event":
			ev.typ = value
		case "id":
			if !strings.ContainsRune(value, 0) {
				ev.id, ev.hasID = value, true
			}
		}
	}
	if err := p.sc.Err(); err != nil {
		return sseEvent{}, err
	}
	return sseEvent{}, io.EOF
}
