package ferry_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"time"

	ferry "github.com/ferrymq/ferry/clients/go"
)

// brokerExamples are the examples that need a broker; TestMain skips them when there is none.
var brokerExamples = []string{"Example", "ExampleClient_Publish", "ExampleClient_Consume",
	"ExampleClient_Requeue", "ExampleError", "ExampleClient_CreateTopic", "ExampleClient_Process",
	"ExampleClient_Stream", "ExampleClient_Subscribe"}

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
		if err := c.Ack(ctx, m); err != nil {
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

// New with TLS: trust the private CA that signed the broker's certificate, for https:// calls
// and the wss:// socket of Subscribe alike.
func ExampleNew_tls() {
	pem, err := os.ReadFile("/etc/ferry/ca.pem")
	if err != nil {
		log.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	c, err := ferry.New("https://ferry.internal:7800",
		ferry.WithAPIKey(os.Getenv("FERRY_API_KEY")),
		ferry.WithTLSConfig(&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}),
		ferry.WithTimeout(30*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.URL())
}

func ExampleClient_Process() {
	ctx := context.Background()
	c, _ := ferry.New(os.Getenv("FERRY_URL"))
	topic := exampleTopic("process")
	for _, job := range []string{"resize a.png", "resize b.png"} {
		c.Publish(ctx, topic, []byte(job), nil)
	}
	run, stop := context.WithCancel(ctx)
	done := 0
	err := c.Process(run, topic, &ferry.ProcessOptions{Prefetch: 10},
		func(ctx context.Context, m *ferry.Message) error {
			fmt.Printf("%s\n", m.Payload) // nil acks it; an error requeues it
			if done++; done == 2 {
				stop() // Process returns once this handler is done
			}
			return nil
		})
	fmt.Println("stopped:", err)
	// Output:
	// resize a.png
	// resize b.png
	// stopped: <nil>
}

func ExampleClient_Stream() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _ := ferry.New(os.Getenv("FERRY_URL"))
	topic := exampleTopic("stream")
	c.Publish(ctx, topic, []byte("first"), nil)
	c.Publish(ctx, topic, []byte("second"), nil)
	// LastEventID "0" starts with what the topic holds; keep m.EventID to resume after it.
	for m, err := range c.Stream(ctx, topic, &ferry.StreamOptions{LastEventID: "0"}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s\n", m.Payload)
		if string(m.Payload) == "second" {
			break
		}
	}
	// Output:
	// first
	// second
}

func ExampleClient_Subscribe() {
	ctx := context.Background()
	c, _ := ferry.New(os.Getenv("FERRY_URL"))
	prefix := exampleTopic("shop")
	heard := make(chan string, 1)
	sub, err := c.Subscribe(ctx, prefix+".*", func(m *ferry.Message) {
		heard <- string(m.Payload)
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	c.Publish(ctx, prefix+".orders", []byte("order 1"), nil)
	fmt.Println(<-heard)
	// Output: order 1
}

// VerifyWebhook in a receiver: read the body as it came, then check its signature.
func ExampleVerifyWebhook() {
	const secret = "s3cret-shared-with-ferry"
	hook := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 4<<20))
		if err != nil {
			http.Error(w, "cannot read body", http.StatusBadRequest)
			return
		}
		if err := ferry.VerifyWebhook(secret, r.Header, body); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})

	// A POST signed as the broker signs it, and the same POST with another body.
	body := `{"order":42}`
	id, ts := "msg_1", strconv.FormatInt(time.Now().Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(id + "." + ts + "." + body))
	for _, sent := range []string{body, `{"order":43}`} {
		r := httptest.NewRequest(http.MethodPost, "/hooks/ferry", strings.NewReader(sent))
		r.Header.Set("webhook-id", id)
		r.Header.Set("webhook-timestamp", ts)
		r.Header.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
		w := httptest.NewRecorder()
		hook.ServeHTTP(w, r)
		fmt.Println(w.Code)
	}
	// Output:
	// 204
	// 401
}
