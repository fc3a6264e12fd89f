package ferry

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Retry settings, as the TypeScript client's defaults.
const (
	maxRetries    = 3                      // retries after the first attempt
	retryBase     = 200 * time.Millisecond // first backoff, doubling
	maxRetryDelay = 5 * time.Second        // longest wait between attempts, Retry-After included
	maxRedirects  = 5                      // 307/308 hops followed per attempt
)

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
	// wait is a long poll's wait, added to the per-attempt timeout.
	wait time.Duration
	// empty is a problem code that means an empty answer (consume's queue_empty), not an error.
	empty string
	// doneOnRetry is a problem code that, after a lost attempt, means that attempt did the work.
	doneOnRetry string
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
// Rules: 429 and 503 are retried (the broker refuses those before acting), waiting Retry-After
// (at most 5 s) or a jittered backoff; a lost connection is retried only when cl.idempotent;
// a timeout is never retried. 307/308 are followed with the key and the body. Errors are
// *Error for a broker's refusal, or wrap ErrTimeout or ErrConnection.
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
	lost := false
	for attempt := 0; ; attempt++ {
		status, h, data, err := c.once(ctx, cl, body, contentType, action)
		if err == nil {
			if (status >= 200 && status < 300) || containsInt(cl.answers, status) {
				if out != nil && len(bytes.TrimSpace(data)) > 0 {
					if jerr := json.Unmarshal(data, out); jerr != nil {
						return status, &Error{Status: status, Code: "bad_response",
							Detail:    fmt.Sprintf("%s: cannot read the answer: %v", action, jerr),
							RequestID: h.Get("X-Request-Id")}
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
		case cl.noRetry || attempt >= maxRetries:
			return status, err
		case errors.As(err, &fe):
			busy := fe.Status == http.StatusTooManyRequests || fe.Status == http.StatusServiceUnavailable
			// The broker refuses a 429/503 before acting; a 503 that is not its problem answer
			// (a proxy's) may come after the work was done, so only safe calls try again.
			if !busy || (fe.Code == "bad_response" && !cl.idempotent) {
				return status, err
			}
			if fe.RetryAfter > 0 {
				wait = min(time.Duration(fe.RetryAfter)*time.Second, maxRetryDelay)
			} else {
				wait = backoff(attempt)
			}
		case cl.idempotent: // a lost connection
			wait = backoff(attempt)
		default:
			return status, err
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
	limit := c.timeout + cl.wait
	actx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	target := c.endpoint(cl.path, cl.query)
	for hop := 0; ; hop++ {
		req, err := http.NewRequestWithContext(actx, cl.method, target, bytes.NewReader(body))
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
		c.authorize(req.Header)
		res, err := c.hc.Do(req)
		if err != nil {
			return 0, nil, nil, transportError(ctx, actx, err, action, limit)
		}
		data, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			return 0, nil, nil, transportError(ctx, actx, err, action, limit)
		}
		if (res.StatusCode == http.StatusTemporaryRedirect || res.StatusCode == http.StatusPermanentRedirect) &&
			hop < maxRedirects {
			loc, lerr := res.Location()
			if lerr == nil {
				target = loc.String()
				continue
			}
		}
		return res.StatusCode, res.Header, data, nil
	}
}

// transportError names a failed attempt: the caller's cancel as is, a deadline as ErrTimeout,
// anything else as ErrConnection.
func transportError(ctx, actx context.Context, err error, action string, limit time.Duration) error {
	if ctx.Err() != nil {
		return ctxError(ctx, action)
	}
	if actx.Err() != nil || isTimeout(err) {
		return fmt.Errorf("%w: %s: no answer within %v: %w", ErrTimeout, action, limit, err)
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
		e.Code, e.Detail = p.Code, p.Detail
		if p.RequestID != "" {
			e.RequestID = p.RequestID
		}
	} else {
		e.Code = "bad_response"
		text := strings.TrimSpace(string(data))
		if len(text) > 200 {
			text = text[:200]
		}
		e.Detail = fmt.Sprintf("%s answered %d %s", action, status, text)
	}
	if ra := h.Get("Retry-After"); ra != "" {
		if n, err := strconv.Atoi(strings.TrimSpace(ra)); err == nil && n > 0 {
			e.RetryAfter = n
		} else if t, err := http.ParseTime(ra); err == nil {
			if s := int(time.Until(t).Round(time.Second) / time.Second); s > 0 {
				e.RetryAfter = s
			}
		}
	}
	return e
}

// backoff is the wait before retry number attempt (0-based): 200 ms doubling up to 5 s, the
// upper half jittered.
func backoff(attempt int) time.Duration {
	full := min(retryBase<<min(attempt, 16), maxRetryDelay)
	j, err := rand.Int(rand.Reader, big.NewInt(int64(full/2)+1))
	if err != nil {
		return full
	}
	return full/2 + time.Duration(j.Int64())
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
