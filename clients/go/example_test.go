package ferry_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	ferry "github.com/ferrymq/ferry/clients/go"
)

// brokerExamples are the examples that need a broker; TestMain skips them when there is none.
var brokerExamples = []string{"Example", "ExampleClient_Publish", "ExampleClient_Consume",
	"ExampleClient_Requeue", "ExampleError", "ExampleClient_CreateTopic"}

// exampleTopic is a topic name no other example or test uses.
func exampleTopic(name string) string {
	return fmt.Sprintf("example-%s-%d", name, time.Now().UnixNano())
}

func Example() {
	ctx := context.Background()
	c, err := ferry.New(os.Getenv("FERRY_URL")) // "" would be http://127.0.0.1:7800
	if err != nil {
		panic(err)
	}
	topic := exampleTopic("orders")
	if _, err := c.Publish(ctx, topic, []byte("order 1"), nil); err != nil {
		panic(err)
	}
	msgs, err := c.Consume(ctx, topic, &ferry.ConsumeOptions{Limit: 10, Wait: time.Second})
	if err != nil {
		panic(err)
	}
	for _, m := range msgs {
		fmt.Printf("%s\n", m.Payload)
		if err := c.Ack(ctx, topic, m.ID, nil); err != nil {
			panic(err)
		}
	}
	// Output: order 1
}

func ExampleClient_Publish() {
	ctx := context.Background()
	c, _ := ferry.New(os.Getenv("FERRY_URL"))
	topic := exampleTopic("publish")
	opts := &ferry.PublishOptions{IdempotencyKey: "order-42", Priority: ferry.PriorityHigh,
		Headers: map[string]string{"X-MQ-Tenant": "acme"}}
	first, err := c.Publish(ctx, topic, []byte(`{"order":42}`), opts)
	if err != nil {
		panic(err)
	}
	again, err := c.Publish(ctx, topic, []byte(`{"order":42}`), opts)
	if err != nil {
		panic(err)
	}
	fmt.Println(first.Deduplicated, again.Deduplicated, again.ID == first.ID)
	// Output: false true true
}

func ExampleClient_Consume() {
	ctx := context.Background()
	c, _ := ferry.New(os.Getenv("FERRY_URL"))
	topic := exampleTopic("consume")
	msgs, err := c.Consume(ctx, topic, &ferry.ConsumeOptions{Wait: 100 * time.Millisecond})
	fmt.Println(len(msgs), err)
	c.Publish(ctx, topic, []byte(`{"kind":"a"}`), nil)
	c.Publish(ctx, topic, []byte(`{"kind":"b"}`), nil)
	msgs, _ = c.Consume(ctx, topic, &ferry.ConsumeOptions{FilterKey: "kind", FilterVal: "b", AutoAck: true})
	fmt.Printf("%s\n", msgs[0].Payload)
	// Output:
	// 0 <nil>
	// {"kind":"b"}
}

func ExampleClient_Requeue() {
	ctx := context.Background()
	c, _ := ferry.New(os.Getenv("FERRY_URL"))
	topic := exampleTopic("requeue")
	c.Publish(ctx, topic, []byte("poison"), nil)
	for range 3 {
		msgs, _ := c.Consume(ctx, topic, &ferry.ConsumeOptions{Wait: time.Second})
		res, _ := c.Requeue(ctx, msgs[0], &ferry.RequeueOptions{Reason: "cannot parse"})
		fmt.Println(res.RetryCount, res.Status)
	}
	moved, _ := c.Redrive(ctx, topic)
	fmt.Println("moved back:", moved)
	// Output:
	// 1 requeued
	// 2 requeued
	// 3 dead_lettered
	// moved back: 1
}

func ExampleError() {
	ctx := context.Background()
	c, _ := ferry.New(os.Getenv("FERRY_URL"))
	_, err := c.Publish(ctx, "no spaces allowed", []byte("x"), nil)
	var fe *ferry.Error
	if errors.As(err, &fe) {
		fmt.Println(fe.Status, fe.Code)
	}
	// Output: 400 invalid_name
}

func ExampleClient_CreateTopic() {
	ctx := context.Background()
	c, _ := ferry.New(os.Getenv("FERRY_URL"))
	name := exampleTopic("audit")
	err := c.CreateTopic(ctx, name, &ferry.TopicOptions{Policy: ferry.PolicyDropOldest, Retention: time.Hour})
	if err != nil {
		panic(err)
	}
	t, _ := c.Topic(ctx, name)
	fmt.Println(t.Policy, t.Retain)
	// Output: drop-oldest 1h
}
