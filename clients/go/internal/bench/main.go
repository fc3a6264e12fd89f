// Command bench is the Go client's side of the load benchmark (tests/bench/load.ts rows 2 and
// 3d): it drives a running broker through the ferry package and prints one JSON line.
//
//	bench -url URL -mode drain -topic T -n 100000 -c 8 -prefetch 100
//	  runs c concurrent Process loops (Prefetch 100, batch acks) on one Client until n messages
//	  were handled, then ends them (which acks the last ones); timed from the start to the
//	  loops' return: {"mode","taken","seconds","rate","polls","acks"}.
//	bench -url URL -mode publish -topic T -c 64 -d 5s [-warm 1s] [-n 0]
//	  publishes 1 KiB bodies from c goroutines for d (or n messages in all when n > 0), after
//	  warm on T-warm: {"mode","sent","errors","seconds","rate","p50_us","p99_us"}.
//
// The Client's transport keeps c idle connections to the broker (net/http keeps 2 by default,
// and closes the others after each request).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	ferry "github.com/ferrymq/ferry/clients/go"
)

// counting counts the requests it carries by path.
type counting struct {
	next        http.RoundTripper
	polls, acks atomic.Int64
}

func (t *counting) RoundTrip(r *http.Request) (*http.Response, error) {
	switch {
	case strings.HasPrefix(r.URL.Path, "/consume/"):
		t.polls.Add(1)
	case strings.HasPrefix(r.URL.Path, "/ack/"):
		t.acks.Add(1)
	}
	return t.next.RoundTrip(r)
}

func main() {
	rawURL := flag.String("url", "", "broker URL")
	mode := flag.String("mode", "drain", "drain or publish")
	n := flag.Int("n", 0, "drain: messages to handle; publish: messages in all (0: for -d)")
	c := flag.Int("c", 8, "Process loops (drain) or publishing goroutines (publish)")
	topic := flag.String("topic", "bench", "topic")
	prefetch := flag.Int("prefetch", 100, "drain: Prefetch of each Process loop")
	d := flag.Duration("d", 5*time.Second, "publish: how long")
	warm := flag.Duration("warm", 0, "publish: warm-up on {topic}-warm first")
	size := flag.Int("size", 1024, "publish: body bytes")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the run to this file")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fail(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fail(err)
		}
		defer pprof.StopCPUProfile()
	}

	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = *c * 2
	tr.MaxIdleConnsPerHost = *c * 2
	ct := &counting{next: tr}
	client, err := ferry.New(*rawURL, ferry.WithHTTPClient(&http.Client{Transport: ct}))
	if err != nil {
		fail(err)
	}
	var out any
	switch *mode {
	case "drain":
		out = drain(client, ct, *topic, *n, *c, *prefetch)
	case "publish":
		body := make([]byte, *size)
		for i := range body {
			body[i] = 'x'
		}
		if *warm > 0 {
			publish(client, *topic+"-warm", body, 0, *c, *warm)
		}
		out = publish(client, *topic, body, *n, *c, *d)
	default:
		fail(fmt.Errorf("unknown -mode %q (drain or publish)", *mode))
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}

type drainResult struct {
	Mode    string  `json:"mode"`
	Taken   int64   `json:"taken"`
	Seconds float64 `json:"seconds"`
	Rate    float64 `json:"rate"`
	Polls   int64   `json:"polls"`
	Acks    int64   `json:"acks"`
}

func drain(client *ferry.Client, ct *counting, topic string, n, loops, prefetch int) drainResult {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var taken atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, loops)
	t0 := time.Now()
	for range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := client.Process(ctx, topic, &ferry.ProcessOptions{Prefetch: prefetch},
				func(context.Context, *ferry.Message) error {
					if taken.Add(1) >= int64(n) {
						cancel()
					}
					return nil
				})
			if err != nil {
				errs <- err
				cancel()
			}
		}()
	}
	wg.Wait()
	secs := time.Since(t0).Seconds()
	close(errs)
	for err := range errs {
		fail(err)
	}
	return drainResult{Mode: "drain", Taken: taken.Load(), Seconds: secs,
		Rate: float64(taken.Load()) / secs, Polls: ct.polls.Load(), Acks: ct.acks.Load()}
}

type publishResult struct {
	Mode    string  `json:"mode"`
	Sent    int     `json:"sent"`
	Errors  int     `json:"errors"`
	Seconds float64 `json:"seconds"`
	Rate    float64 `json:"rate"`
	P50us   float64 `json:"p50_us"`
	P99us   float64 `json:"p99_us"`
}

// publish publishes body from conc goroutines until d has passed or, when total > 0, until
// total publishes were sent; latencies are per Publish call.
func publish(client *ferry.Client, topic string, body []byte, total, conc int, d time.Duration) publishResult {
	ctx := context.Background()
	var left atomic.Int64
	left.Store(int64(total))
	lat := make([][]time.Duration, conc)
	errCount := make([]int, conc)
	var wg sync.WaitGroup
	t0 := time.Now()
	end := t0.Add(d)
	for g := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if total > 0 {
					if left.Add(-1) < 0 {
						return
					}
				} else if time.Now().After(end) {
					return
				}
				s := time.Now()
				if _, err := client.Publish(ctx, topic, body, nil); err != nil {
					errCount[g]++
					continue
				}
				lat[g] = append(lat[g], time.Since(s))
			}
		}()
	}
	wg.Wait()
	secs := time.Since(t0).Seconds()
	all := slices.Concat(lat...)
	slices.Sort(all)
	q := func(f float64) float64 {
		if len(all) == 0 {
			return 0
		}
		return float64(all[int(f*float64(len(all)-1))].Microseconds())
	}
	errs := 0
	for _, e := range errCount {
		errs += e
	}
	return publishResult{Mode: "publish", Sent: len(all), Errors: errs, Seconds: secs,
		Rate: float64(len(all)) / secs, P50us: q(0.5), P99us: q(0.99)}
}
