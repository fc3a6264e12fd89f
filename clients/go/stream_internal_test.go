package ferry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"
)

func TestSSEParserReadsEveryLineEndingCommentsAndMultiLineData(t *testing.T) {
	text := ": ping\r\n\r\nid: 1\r\ndata: a\r\ndata: b\r\n\r\n" + // CRLF, two data lines
		"event: reset\rdata: {\"reason\":\"x\"}\r\r" + // CR alone
		"id: 2\ndata:no space\n\n" +
		"id\ndata: empty id\n\n" +
		"data: unterminated"
	want := []sseEvent{
		{typ: "message", data: "a\nb", id: "1", hasID: true},
		{typ: "reset", data: `{"reason":"x"}`},
		{typ: "message", data: "no space", id: "2", hasID: true},
		{typ: "message", data: "empty id", id: "", hasID: true},
	}
	// Byte by byte too, so that a CRLF split across reads is one line end.
	for _, r := range []io.Reader{strings.NewReader(text), iotest.OneByteReader(strings.NewReader(text))} {
		p := newSSEParser(r)
		for i, w := range want {
			ev, err := p.next()
			if err != nil {
				t.Fatalf("event %d: %v", i, err)
			}
			if ev != w {
				t.Fatalf("event %d: %+v, want %+v", i, ev, w)
			}
		}
		if ev, err := p.next(); err != io.EOF {
			t.Fatalf("after the last event: %+v, %v; want io.EOF", ev, err)
		}
	}
}

// TestStreamReplacesASilentConnectionAndResumes runs Stream against a fake broker: the first
// connection sends one event and goes silent, the second (which must resume after it) ends with
// `event: shutdown`, the third answers 503, and the fourth sends the next event.
func TestStreamReplacesASilentConnectionAndResumes(t *testing.T) {
	var mu sync.Mutex
	var lastIDs []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n := len(lastIDs)
		lastIDs = append(lastIDs, r.Header.Get("Last-Event-ID"))
		mu.Unlock()
		if n == 2 {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(503)
			io.WriteString(w, `{"status":503,"code":"draining","detail":"restarting"}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		f := w.(http.Flusher)
		switch n {
		case 0:
			io.WriteString(w, ": ping\n\nid: 7\ndata: {\"id\":\"a\",\"topic\":\"t\",\"payload\":\"MQ==\"}\n\n")
			f.Flush()
			<-r.Context().Done() // silent until the client gives up on it
		case 1:
			io.WriteString(w, "event: shutdown\ndata: {\"reason\":\"the broker is stopping\"}\n\n")
		default:
			io.WriteString(w, "event: reset\ndata: {\"reason\":\"x\"}\n\nid: 9\ndata: {\"id\":\"b\",\"topic\":\"t\",\"payload\":\"Mg==\"}\n\n")
			f.Flush()
			<-r.Context().Done()
		}
	}))
	defer srv.Close()
	c, err := New(srv.URL, withSchedule(10*time.Millisecond, 300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resets := 0
	var got []string
	for m, err := range c.Stream(ctx, "t", &StreamOptions{OnReset: func() { resets++ }}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(m.Payload)+"@"+m.EventID)
		if len(got) == 2 {
			break
		}
	}
	if strings.Join(got, " ") != "1@7 2@9" || resets != 1 {
		t.Fatalf("got %q, %d resets (ctx %v)", got, resets, ctx.Err())
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(lastIDs, ",") != ",7,7,7" {
		t.Fatalf("Last-Event-ID of each connection: %q", lastIDs)
	}
}
