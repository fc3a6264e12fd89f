package ferry_test

import (
	"bytes"
	"testing"

	ferry "github.com/ferrymq/ferry/clients/go"
)

// The benchmarks run against the shared broker (skipped without one):
// go test -bench . -benchmem -run '^$'. The broker's fsync dominates Publish; allocs/op and
// B/op are the client's own.

func BenchmarkPublish1KiB(b *testing.B) {
	c, err := ferry.New(sharedURL(b))
	if err != nil {
		b.Fatal(err)
	}
	ctx, topic, payload := ctxT(b), topicName(b), bytes.Repeat([]byte("x"), 1024)
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		if _, err := c.Publish(ctx, topic, payload, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPublish1KiBParallel(b *testing.B) {
	c, err := ferry.New(sharedURL(b))
	if err != nil {
		b.Fatal(err)
	}
	ctx, topic, payload := ctxT(b), topicName(b), bytes.Repeat([]byte("x"), 1024)
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Publish(ctx, topic, payload, nil); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkConsumePeek100x1KiB reads the same 100 messages of 1 KiB each time (Peek takes
// nothing), so it measures the request and the decoding of the answer.
func BenchmarkConsumePeek100x1KiB(b *testing.B) {
	c, err := ferry.New(sharedURL(b))
	if err != nil {
		b.Fatal(err)
	}
	ctx, topic := ctxT(b), topicName(b)
	batch := make([]ferry.BatchMessage, 100)
	for i := range batch {
		batch[i].Payload = bytes.Repeat([]byte("y"), 1024)
	}
	if _, err := c.PublishBatch(ctx, topic, batch); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(100 * 1024)
	for b.Loop() {
		msgs, err := c.Consume(ctx, topic, &ferry.ConsumeOptions{Limit: 100, Peek: true})
		if err != nil || len(msgs) != 100 {
			b.Fatalf("%d messages, %v", len(msgs), err)
		}
	}
}
