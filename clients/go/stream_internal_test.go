package ferry

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"
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
