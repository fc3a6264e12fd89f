package ferry

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// events reads every event the parser dispatches from r.
func events(r io.Reader) []sseEvent {
	p := newSSEParser(r)
	var out []sseEvent
	for {
		ev, err := p.next()
		if err != nil {
			return out
		}
		out = append(out, ev)
	}
}

// FuzzSSEParser: whatever the bytes, the parser ends, dispatches the same events whether the
// body arrives whole or a byte at a time (a CRLF split across reads is one line end), and no
// field holds a line break. The seeds run with every `go test`.
func FuzzSSEParser(f *testing.F) {
	for _, seed := range []string{
		"",
		"data: {\"id\":\"1\"}\n\n",
		"id: 7\nevent: message\ndata: a\ndata: b\n\n",
		": ping\n\nevent: reset\ndata: {}\n\n",
		"data: crlf\r\n\r\ndata: cr\r\rdata: lf\n\n",
		"id: x\x00y\ndata: nul id ignored\n\n",
		"data:no space\n\ndata\n\nevent: shutdown\ndata: bye\n\n",
		"data: unterminated",
		"data: a\r",
		"\r\n\r\n\n\r",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		whole := events(strings.NewReader(string(body)))
		bytewise := events(iotest.OneByteReader(strings.NewReader(string(body))))
		if len(whole) != len(bytewise) {
			t.Fatalf("%q: %d events read whole, %d a byte at a time", body, len(whole), len(bytewise))
		}
		for i, ev := range whole {
			if ev != bytewise[i] {
				t.Fatalf("%q: event %d is %+v whole, %+v a byte at a time", body, i, ev, bytewise[i])
			}
			if strings.ContainsAny(ev.typ+ev.id, "\r\n") || strings.ContainsRune(ev.data, '\r') {
				t.Fatalf("%q: event %d holds a line break in a field: %+v", body, i, ev)
			}
			if ev.typ == "" {
				t.Fatalf("%q: event %d has no type", body, i)
			}
		}
	})
}
