package ferry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// maxRedirects is how many 307/308 hops an attempt follows.
const maxRedirects = 5

// call is one request to the broker and the rules around it.
type call struct {
	method string
	// path is the URL path, its segments already escaped (use seg).
	path  string
	query url.Values
	// body is sent as is; json, when not nil, is encoded instead and sets Content-Type.
	body        []byte
	json        any
	contentType string
	header      http.Header
	// idempotent: safe to send again after a lost connection.
	idempotent bool
	// wait is a long poll's wait, added to the per-attempt timeout (when there is one).
	wait time.Duration
	// empty is a problem code that means an empty answer (consume's queue_empty), not an error.
	empty Code
	// doneOnRetry is a problem code that, after a lost attempt, means that attempt did the work.
	doneOnRetry Code
	// answers are non-2xx statuses whose body is the answer (the 503 of /healthz).
	answers []int
	// noRetry: one attempt only.
	noRetry bool
}

// seg escapes one path segment.
func seg(s string) string { return url.PathEscape(s) }

// noRedirect makes an http.Client hand 3xx answers back instead of following them.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// request sends cl with retries and decodes a 2xx JSON answer into out (when out is not nil).
// It returns the final status; on an `empty` problem it returns that status and a nil error.
//
// Rules (WithRetry sets how many attempts and the backoff): 429 and 503 are retried (the broker
// refuses those before acting), waiting the whole Retry-After or a jittered backoff, unless the
// context would end first; a lost connection is retried only when cl.idempotent; a timeout is
// never retried. 307/308 are followed with the body, and with the key as redirect.go allows.
// Errors are *Error for a broker's refusal, or wrap ErrTimeout or ErrConnection.
func (c *Client) request(ctx context.Context, cl *call, out any) (int, error) {
	body := cl.body
	contentType := cl.contentType
	if cl.json != nil {
		b, err := json.Marshal(cl.json)
		if err != nil {
			return 0, fmt.Errorf("ferry: cannot encode the request: %w", err)
		}
		body, contentType = b, "application/json"
	}
	action := cl.method + " " + cl.path
	if c.closed.Load() && ctx.Value(settling{}) == nil { // a Process's shutdown work may go on
		return 0, fmt.Errorf("%w: %s: the client is closed", ErrClosed, action)
	}
	lost := false
	for attempt := 0; ; attempt++ {
		status, h, data, err := c.once(ctx, cl, body, contentType, action)
		if err == nil {
			if (status >= 200 && status < 300) || containsInt(cl.answers, status) {
				if out != nil && len(bytes.TrimSpace(data)) > 0 {
					if jerr := json.Unmarshal(data, out); jerr != nil {
						return status, fmt.Errorf("%w: %s answered %d (request %s) that cannot be read: %w",
							ErrBadResponse, action, status, h.Get("X-Request-Id"), jerr)
					}
				}
				return status, nil
			}
			perr := problem(status, h, data, action)
			if perr.Code != "" && (perr.Code == cl.empty || (lost && perr.Code == cl.doneOnRetry)) {
				return status, nil
			}
			err = perr
		} else if errors.Is(err, ErrConnection) {
			lost = true
		} else {
			return 0, err // a timeout or the caller's cancel
		}
		var wait time.Duration
		var fe *Error
		switch {
		case cl.noRetry || attempt+1 >= c.retry.Attempts:
			return status, err
		case errors.As(err, &fe):
			busy := fe.Status == http.StatusTooManyRequests || fe.Status == http.StatusServiceUnavailable
			// The broker refuses a 429/503 before acting; a 503 that is not its problem answer
			// (a proxy's) may come after the work was done, so only safe calls try again.
			if !busy || (fe.Code == "" && !cl.idempotent) {
				return status, err
			}
			if fe.RetryAfter > 0 {
				wait = fe.RetryAfter
			} else {
				wait = c.retry.backoff(attempt)
			}
		case cl.idempotent: // a lost connection
			wait = c.retry.backoff(attempt)
		default:
			return status, err
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return status, err // the context would end while waiting: this answer is the news
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, ctxError(ctx, action)
		case <-t.C:
		}
	}
}

// once is one attempt, following 307/308 redirects; it reads the whole answer.
func (c *Client) once(ctx context.Context, cl *call, body []byte, contentType, action string) (int, http.Header, []byte, error) {
	actx, cancel := ctx, context.CancelFunc(func() {})
	if c.timeout > 0 {
		actx, cancel = context.WithTimeout(ctx, c.timeout+cl.wait)
	}
	defer cancel()
	target := c.endpointURL(cl.path, cl.query)
	withKey := true
	for hop := 0; ; hop++ {
		req, err := http.NewRequestWithContext(actx, cl.method, target.String(), bytes.NewReader(body))
		if err != nil {
			return 0, nil, nil, fmt.Errorf("ferry: %s: %w", action, err)
		}
		if body == nil {
			req.Body, req.ContentLength = http.NoBody, 0
		}
		for k, vs := range cl.header {
			req.Header[k] = vs
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		req.Header.Set("Accept", "application/json")
		if withKey {
			c.authorize(req.Header)
		} else {
			c.identify(req.Header)
		}
		res, err := c.hc.Do(req)
		if err != nil {
			return 0, nil, nil, c.transportError(ctx, actx, err, action, cl.wait)
		}
		data, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			return 0, nil, nil, c.transportError(ctx, actx, err, action, cl.wait)
		}
		if (res.StatusCode == http.StatusTemporaryRedirect || res.StatusCode == http.StatusPermanentRedirect) &&
			hop < maxRedirects {
			if loc, lerr := res.Location(); lerr == nil {
				if withKey, err = c.follow(actx, action, target, loc); err != nil {
					return 0, nil, nil, err
				}
				target = loc
				continue
			}
		}
		return res.StatusCode, res.Header, data, nil
	}
}

// transportError names a failed attempt: the caller's cancel as is, a deadline as ErrTimeout
// (saying which limit ran out), anything else as ErrConnection.
func (c *Client) transportError(ctx, actx context.Context, err error, action string, wait time.Duration) error {
	if ctx.Err() != nil {
		return ctxError(ctx, action)
	}
	if actx.Err() != nil {
		limit := fmt.Sprintf("%v, the client's timeout (WithTimeout)", c.timeout)
		if wait > 0 {
			limit = fmt.Sprintf("%v, the client's timeout (WithTimeout) of %v plus the long poll's wait of %v",
				c.timeout+wait, c.timeout, wait)
		}
		return fmt.Errorf("%w: %s: no answer within %s: %w", ErrTimeout, action, limit, err)
	}
	if isTimeout(err) { // a limit of the transport's own (dial, TLS handshake, headers)
		return fmt.Errorf("%w: %s: %w", ErrTimeout, action, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrConnection, action, err)
}

// ctxError is the error of a call whose context ended: ErrTimeout for a deadline.
func ctxError(ctx context.Context, action string) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w: %s: %w", ErrTimeout, action, ctx.Err())
	}
	return fmt.Errorf("ferry: %s: %w", action, ctx.Err())
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// problem reads a non-2xx answer as an *Error (RFC 9457 body, or what there is).
func problem(status int, h http.Header, data []byte, action string) *Error {
	e := &Error{Status: status, RequestID: h.Get("X-Request-Id")}
	var p struct {
		Title     string `json:"title"`
		Detail    string `json:"detail"`
		Code      string `json:"code"`
		RequestID string `json:"request_id"`
	}
	if json.Unmarshal(data, &p) == nil && p.Code != "" {
		e.Code, e.Detail = Code(p.Code), p.Detail
		if p.RequestID != "" {
			e.RequestID = p.RequestID
		}
	} else { // not the broker's problem body: Code stays ""
		text := strings.TrimSpace(string(data))
		if len(text) > 200 {
			text = text[:200]
		}
		e.Detail = fmt.Sprintf("%s answered %d %s", action, status, text)
	}
	if ra := h.Get("Retry-After"); ra != "" {
		if n, err := strconv.Atoi(strings.TrimSpace(ra)); err == nil && n > 0 {
			e.RetryAfter = time.Duration(n) * time.Second
		} else if t, err := http.ParseTime(ra); err == nil {
			if d := time.Until(t).Round(time.Second); d > 0 {
				e.RetryAfter = d
			}
		}
	}
	return e
}

// backoff is the wait before retry number attempt (0-based): Backoff doubling up to MaxBackoff,
// the upper half jittered.
func (r Retry) backoff(attempt int) time.Duration {
	full := min(r.Backoff<<min(attempt, 16), r.MaxBackoff)
	return full/2 + rand.N(full/2+1)
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// durationText is d in the broker's form: an integer and one of h, m, s, ms (rounded up to ms).
func durationText(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	case d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	default:
		return strconv.FormatInt(int64((d+time.Millisecond-1)/time.Millisecond), 10) + "ms"
	}
}
