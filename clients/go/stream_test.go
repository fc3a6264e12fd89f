package ferry_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ferry "github.com/ferrymq/ferry/clients/go"
)

// post sends a plain HTTP request to a broker (these tests do not lean on the client's own
// Publish or Ack) and decodes a JSON answer into out when it is not nil.
func post(t testing.TB, method, u string, body string, out any) int {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, u, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if out != nil && res.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, u, err, raw)
		}
	}
	return res.StatusCode
}

// publish stores body in topic over plain HTTP and returns the message id.
func publish(t testing.TB, base, topic, body string) string {
	t.Helper()
	var out struct{ ID string }
	if st := post(t, "POST", base+"/publish/"+url.PathEscape(topic), body, &out); st != 201 {
		t.Fatalf("publish to %s: status %d", topic, st)
	}
	return out.ID
}

func newClient(t testing.TB, base string) *ferry.Client {
	t.Helper()
	c, err := ferry.New(base, ferry.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestStreamYieldsStoredMessagesWithEventIDsAndResumes(t *testing.T) {
	topic := topicName(t)
	for i := range 3 {
		publish(t, sharedURL(t), topic, fmt.Sprintf(`{"n":%d}`, i))
	}
	c := newClient(t, sharedURL(t))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []*ferry.Message
	for m, err := range c.Stream(ctx, topic, &ferry.StreamOptions{LastEventID: "0"}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m)
		if len(got) == 3 {
			break
		}
	}
	if len(got) != 3 {
		t.Fatalf("got %d messages before the deadline", len(got))
	}
	prev := -1
	for i, m := range got {
		if string(m.Payload) != fmt.Sprintf(`{"n":%d}`, i) || m.Topic != topic {
			t.Errorf("message %d: %q in %q", i, m.Payload, m.Topic)
		}
		id, err := strconv.Atoi(m.EventID)
		if err != nil || id <= prev {
			t.Errorf("message %d: EventID %q after %d", i, m.EventID, prev)
		}
		prev = id
	}
	// Resuming after the second gives the third, then what is published next.
	publish(t, sharedURL(t), topic, `{"n":3}`)
	var rest []string
	for m, err := range c.Stream(ctx, topic, &ferry.StreamOptions{LastEventID: got[1].EventID}) {
		if err != nil {
			t.Fatal(err)
		}
		rest = append(rest, string(m.Payload))
		if len(rest) == 2 {
			break
		}
	}
	if strings.Join(rest, " ") != `{"n":2} {"n":3}` {
		t.Fatalf("resumed stream gave %q", rest)
	}
}

func TestStreamFilters(t *testing.T) {
	topic := topicName(t)
	publish(t, sharedURL(t), topic, `{"kind":"a","n":1}`)
	publish(t, sharedURL(t), topic, `{"kind":"b","n":2}`)
	publish(t, sharedURL(t), topic, `{"kind":"a","n":3}`)
	c := newClient(t, sharedURL(t))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []string
	for m, err := range c.Stream(ctx, topic, &ferry.StreamOptions{LastEventID: "0", FilterKey: "kind", FilterVal: "a"}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(m.Payload))
		if len(got) == 2 {
			break
		}
	}
	if strings.Join(got, " ") != `{"kind":"a","n":1} {"kind":"a","n":3}` {
		t.Fatalf("filtered stream gave %q", got)
	}
}

func TestStreamRefusalIsYieldedAndEndsIt(t *testing.T) {
	c := newClient(t, sharedURL(t))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n := 0
	for m, err := range c.Stream(ctx, "bad..name", nil) {
		n++
		var fe *ferry.Error
		if m != nil || !errors.As(err, &fe) || fe.Status != 400 || fe.Code != "invalid_name" {
			t.Fatalf("got %v, %v; want a 400 invalid_name", m, err)
		}
	}
	if n != 1 || ctx.Err() != nil {
		t.Fatalf("the sequence gave %d items (ctx: %v); want one error and its end", n, ctx.Err())
	}
}

func TestStreamEndsWhenTheContextEnds(t *testing.T) {
	c := newClient(t, sharedURL(t))
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	for m, err := range c.Stream(ctx, topicName(t), nil) {
		t.Fatalf("nothing was published, yet got %v, %v", m, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the sequence ended %v after its context", d)
	}
}

func TestStreamCallsOnResetWhenMessagesLeftTheTopic(t *testing.T) {
	topic := topicName(t)
	publish(t, sharedURL(t), topic, `"gone 1"`)
	publish(t, sharedURL(t), topic, `"gone 2"`)
	// Consume and ack both: they leave the topic before the stream resumes from 0.
	var msgs []struct{ ID string }
	if st := post(t, "GET", sharedURL(t)+"/consume/"+topic+"?limit=10", "", &msgs); st != 200 || len(msgs) != 2 {
		t.Fatalf("consume: %d, %d messages", st, len(msgs))
	}
	ids, _ := json.Marshal(map[string]any{"ids": []string{msgs[0].ID, msgs[1].ID}})
	if st := post(t, "POST", sharedURL(t)+"/ack/"+topic, string(ids), nil); st != 200 {
		t.Fatalf("ack: %d", st)
	}
	var resets atomic.Int32
	c := newClient(t, sharedURL(t))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go func() {
		time.Sleep(300 * time.Millisecond)
		publish(t, sharedURL(t), topic, `"after"`)
	}()
	for m, err := range c.Stream(ctx, topic, &ferry.StreamOptions{LastEventID: "0", OnReset: func() { resets.Add(1) }}) {
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Payload) != `"after"` {
			t.Fatalf("got %q, which had left the topic", m.Payload)
		}
		break
	}
	if resets.Load() != 1 {
		t.Fatalf("OnReset ran %d times, want 1", resets.Load())
	}
}

func TestStreamResumesAcrossABrokerRestart(t *testing.T) {
	b := ownBroker(t)
	topic := topicName(t)
	publish(t, b.URL, topic, `"before 1"`)
	publish(t, b.URL, topic, `"before 2"`)
	c := newClient(t, b.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var got []string
	restarted := make(chan struct{})
	for m, err := range c.Stream(ctx, topic, &ferry.StreamOptions{LastEventID: "0"}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(m.Payload))
		if len(got) == 2 {
			go func() {
				defer close(restarted)
				b.restart(t)
				publish(t, b.URL, topic, `"after 1"`)
				publish(t, b.URL, topic, `"after 2"`)
			}()
		}
		if len(got) == 4 {
			break
		}
	}
	<-restarted
	if strings.Join(got, " ") != `"before 1" "before 2" "after 1" "after 2"` {
		t.Fatalf("got %q (ctx: %v)", got, ctx.Err())
	}
}
