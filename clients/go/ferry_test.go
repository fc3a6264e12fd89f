package ferry_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	ferry "github.com/ferrymq/ferry/clients/go"
)

// client is a Client of the shared broker.
func client(t testing.TB, opts ...ferry.Option) *ferry.Client {
	t.Helper()
	c, err := ferry.New(sharedURL(t), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestPublishConsumeAck(t *testing.T) {
	c, ctx, topic := client(t), ctxT(t), topicName(t)
	res, err := c.Publish(ctx, topic, []byte("hello"), &ferry.PublishOptions{
		Priority: ferry.PriorityHigh, Headers: map[string]string{"X-MQ-Trace": "t1", "Tenant": "a"},
		TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if res.ID == "" || res.Deduplicated || res.Topic != topic || res.ExpiresAt.IsZero() {
		t.Fatalf("publish answer %+v", res)
	}
	msgs, err := c.Consume(ctx, topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 {
		t.Fatalf("got %d messages", len(msgs))
	}
	m := msgs[0]
	if m.ID != res.ID || !bytes.Equal(m.Payload, []byte("hello")) || m.Topic != topic || m.Priority != "high" {
		t.Fatalf("message %+v", m)
	}
	if m.Headers["x-mq-trace"] != "t1" || m.Headers["x-mq-tenant"] != "a" {
		t.Fatalf("headers %v", m.Headers)
	}
	if m.Timestamp.IsZero() {
		t.Fatal("no timestamp")
	}
	if err := c.Touch(ctx, m, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := c.Ack(ctx, m); err != nil {
		t.Fatal(err)
	}
	// A second ack: the message is no longer held.
	err = c.Ack(ctx, m)
	var fe *ferry.Error
	if !errors.As(err, &fe) || fe.Status != 404 || fe.Code != "message_not_found" {
		t.Fatalf("second ack: %v", err)
	}
	// Empty queue: an empty slice, no error.
	msgs, err = c.Consume(ctx, topic, nil)
	if err != nil || msgs == nil || len(msgs) != 0 {
		t.Fatalf("empty consume: %v %v", msgs, err)
	}
}

func TestConsumeManyAndAckMany(t *testing.T) {
	c, ctx, topic := client(t), ctxT(t), topicName(t)
	for i := range 5 {
		if _, err := c.Publish(ctx, topic, []byte{'a' + byte(i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	msgs, err := c.Consume(ctx, topic, &ferry.ConsumeOptions{Limit: 10, Visibility: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 5 {
		t.Fatalf("got %d", len(msgs))
	}
	for i, m := range msgs {
		if string(m.Payload) != string(rune('a'+i)) {
			t.Fatalf("order: %d is %q", i, m.Payload)
		}
	}
	ids := []string{msgs[0].ID, msgs[1].ID, msgs[2].ID, msgs[3].ID, msgs[4].ID, "0190c0de-0000-7000-8000-000000000000"}
	n, err := c.AckIDs(ctx, topic, ids, nil)
	if err != nil || n != 5 {
		t.Fatalf("AckMany: %d %v", n, err)
	}
}

func TestPublishIdempotentBatchBroadcast(t *testing.T) {
	c, ctx, topic := client(t), ctxT(t), topicName(t)
	a, err := c.Publish(ctx, topic, []byte("x"), &ferry.PublishOptions{IdempotencyKey: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Publish(ctx, topic, []byte("x"), &ferry.PublishOptions{IdempotencyKey: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	if !b.Deduplicated || b.ID != a.ID {
		t.Fatalf("repeat: %+v vs %+v", b, a)
	}
	rs, err := c.PublishBatch(ctx, topic, []ferry.BatchMessage{
		{Payload: []byte("one")},
		{Payload: []byte("two"), Priority: ferry.PriorityLow, Headers: map[string]string{"K": "v"}, Delay: time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].ID == "" || rs[1].ID == "" {
		t.Fatalf("batch: %+v", rs)
	}
	bc, err := c.Publish(ctx, topic, []byte("hi"), &ferry.PublishOptions{Broadcast: true})
	if err != nil {
		t.Fatal(err)
	}
	if !bc.Broadcast || bc.ID != "" {
		t.Fatalf("broadcast: %+v", bc)
	}
}

func TestGroups(t *testing.T) {
	c, ctx, topic := client(t), ctxT(t), topicName(t)
	if err := c.CreateTopic(ctx, topic, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateGroup(ctx, topic, "billing"); err != nil {
		t.Fatal(err)
	}
	var fe *ferry.Error
	if err := c.CreateGroup(ctx, topic, "billing"); !errors.As(err, &fe) || fe.Status != 409 || fe.Code != "already_exists" {
		t.Fatalf("second CreateGroup: %v", err)
	}
	gs, err := c.Groups(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, g := range gs {
		found = found || g.Name == "billing"
	}
	if !found {
		t.Fatalf("groups: %+v", gs)
	}
	if _, err := c.Publish(ctx, topic, []byte("m"), nil); err != nil {
		t.Fatal(err)
	}
	// Both the default group and billing get their own copy.
	for _, g := range []string{"", "billing"} {
		ms, err := c.Consume(ctx, topic, &ferry.ConsumeOptions{Group: g})
		if err != nil || len(ms) != 1 {
			t.Fatalf("group %q: %v %v", g, ms, err)
		}
		if err := c.Ack(ctx, ms[0]); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRequeueToDLQAndRedrive(t *testing.T) {
	c, ctx, topic := client(t), ctxT(t), topicName(t)
	if _, err := c.Publish(ctx, topic, []byte("bad"), nil); err != nil {
		t.Fatal(err)
	}
	var last *ferry.RequeueResult
	for i := range 3 {
		ms, err := c.Consume(ctx, topic, &ferry.ConsumeOptions{Wait: 2 * time.Second})
		if err != nil || len(ms) != 1 {
			t.Fatalf("consume %d: %v %v", i, ms, err)
		}
		if ms[0].RetryCount != i {
			t.Fatalf("retry count %d, want %d", ms[0].RetryCount, i)
		}
		last, err = c.Requeue(ctx, ms[0], &ferry.RequeueOptions{Reason: "boom"})
		if err != nil {
			t.Fatal(err)
		}
	}
	if last.Status != "dead_lettered" || last.RetryCount != 3 || last.Queue != topic+".dlq" {
		t.Fatalf("third requeue: %+v", last)
	}
	dlq, err := c.Peek(ctx, topic+".dlq")
	if err != nil || len(dlq) != 1 || dlq[0].Reason != "boom" {
		t.Fatalf("dlq: %+v %v", dlq, err)
	}
	n, err := c.Redrive(ctx, topic)
	if err != nil || n != 1 {
		t.Fatalf("redrive: %d %v", n, err)
	}
	ms, err := c.Consume(ctx, topic, nil)
	if err != nil || len(ms) != 1 || ms[0].RetryCount != 0 || ms[0].RedriveCount != 1 {
		t.Fatalf("after redrive: %+v %v", ms, err)
	}
}

func TestTopicsQueuesPurgeDelete(t *testing.T) {
	c, ctx, topic := client(t), ctxT(t), topicName(t)
	if err := c.CreateTopic(ctx, topic, &ferry.TopicOptions{Policy: ferry.PolicyDropOldest, Retention: time.Hour}); err != nil {
		t.Fatal(err)
	}
	tp, err := c.Topic(ctx, topic)
	if err != nil || tp.Policy != ferry.PolicyDropOldest || tp.Retain != "1h" {
		t.Fatalf("topic: %+v %v", tp, err)
	}
	plain := topic + "-plain"
	if err := c.CreateTopic(ctx, plain, &ferry.TopicOptions{}); err != nil {
		t.Fatal(err)
	}
	if tp, err := c.Topic(ctx, plain); err != nil || tp.Retain != "" || tp.Policy != ferry.PolicyReject {
		t.Fatalf("plain topic: %+v %v", tp, err)
	}
	ts, err := c.Topics(ctx)
	if err != nil || len(ts) < 2 {
		t.Fatalf("topics: %v %v", ts, err)
	}
	for range 2 {
		if _, err := c.Publish(ctx, topic, []byte("p"), nil); err != nil {
			t.Fatal(err)
		}
	}
	if ms, err := c.Peek(ctx, topic); err != nil || len(ms) != 2 {
		t.Fatalf("peek: %v %v", ms, err)
	}
	qs, err := c.TopicSummaries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var q *ferry.TopicSummary
	for _, x := range qs {
		if x.Name == topic {
			q = x
		}
	}
	if q == nil || q.Depth != 2 {
		t.Fatalf("queue: %+v", q)
	}
	if n, err := c.Purge(ctx, topic); err != nil || n != 2 {
		t.Fatalf("purge: %d %v", n, err)
	}
	if err := c.DeleteTopic(ctx, topic); err != nil {
		t.Fatal(err)
	}
	var fe *ferry.Error
	if _, err := c.Topic(ctx, topic); !errors.As(err, &fe) || fe.Status != 404 {
		t.Fatalf("deleted topic: %v", err)
	}
}

func TestWebhooksStatsHealthCluster(t *testing.T) {
	c, ctx, topic := client(t), ctxT(t), topicName(t)
	w, err := c.AddWebhook(ctx, topic, "http://127.0.0.1:1/hook", "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	if w.ID == "" || w.URL != "http://127.0.0.1:1/hook" || !w.Signed {
		t.Fatalf("webhook: %+v", w)
	}
	ws, err := c.Webhooks(ctx, topic)
	if err != nil || len(ws) != 1 || ws[0].ID != w.ID || ws[0].State == "" {
		t.Fatalf("webhooks: %+v %v", ws, err)
	}
	if err := c.DeleteWebhook(ctx, w.ID); err != nil {
		t.Fatal(err)
	}
	if ws, err := c.Webhooks(ctx, topic); err != nil || len(ws) != 0 {
		t.Fatalf("after delete: %+v %v", ws, err)
	}
	st, err := c.Stats(ctx)
	if err != nil || st.Totals.Published == 0 {
		t.Fatalf("stats: %+v %v", st, err)
	}
	h, err := c.Health(ctx)
	if err != nil || h.Status != "ok" || h.Version == "" {
		t.Fatalf("health: %+v %v", h, err)
	}
	cs, err := c.ClusterStatus(ctx)
	if err != nil || cs.Mode != "standalone" {
		t.Fatalf("cluster: %+v %v", cs, err)
	}
}

func TestDrain(t *testing.T) {
	b := ownBroker(t, "BROKER_DATA_DIR=:memory:")
	c, err := ferry.New(b.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	if err := c.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	h, err := c.Health(ctx)
	if err != nil || h.Status != "draining" {
		t.Fatalf("health while draining: %+v %v", h, err)
	}
}
