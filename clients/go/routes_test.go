package ferry_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"testing"

	ferry "github.com/ferrymq/ferry/clients/go"
)

// covered maps each broker operation (method and OpenAPI path) to the Client method that calls
// it. Stream, Subscribe and Process are the other Go developer's and may not exist yet in this
// branch, so they are checked only when present.
var covered = map[string]string{
	"GET /healthz":                "Health",
	"POST /api/drain":             "Drain",
	"POST /publish/{topic}":       "Publish",
	"POST /publish/{topic}/batch": "PublishBatch",
	"GET /consume/{topic}":        "Consume",
	"POST /ack/{topic}":           "AckMany",
	"POST /touch/{topic}":         "TouchMany",
	"POST /ack/{topic}/{id}":      "Ack",
	"POST /requeue":               "Requeue",
	"POST /touch/{topic}/{id}":    "Touch",
	"POST /api/topics":            "CreateTopic",
	"GET /api/topics":             "Topics",
	"GET /api/topics/{name}":      "Topic",
	"POST /api/groups":            "CreateGroup",
	"GET /api/groups":             "Groups",
	"GET /api/queues":             "TopicSummaries",
	"POST /api/queues/redrive":    "Redrive",
	"DELETE /api/queues/purge":    "Purge",
	"DELETE /api/queues/delete":   "DeleteTopic",
	"GET /api/queues/peek":        "Peek",
	"GET /api/stats":              "Stats",
	"GET /api/cluster/status":     "ClusterStatus",
	"POST /webhook/{topic}":       "AddWebhook",
	"GET /api/webhooks":           "Webhooks",
	"DELETE /api/webhooks/{id}":   "DeleteWebhook",
	"GET /stream/{topic}":         "Stream",
	"GET /ws":                     "Subscribe",
}

// skipped are operations with no Go method, and why.
var skipped = map[string]string{
	"DELETE /api/topics/{name}":       "same as DELETE /api/queues/delete, which DeleteTopic calls",
	"POST /api/queues/publish":        "dashboard form twin of POST /publish/{topic}",
	"POST /api/queues/consume":        "dashboard form twin of GET /consume/{topic}",
	"GET /api/queues/inflight":        "dashboard's in-flight list; not in the Go client's surface",
	"POST /api/queues/release":        "Process gives back prefetched messages through it; no method of its own",
	"GET /api/queues/webhooks":        "dashboard's per-queue webhook list; Webhooks(topic) covers it",
	"GET /api/rates":                  "dashboard's rate charts",
	"GET /api/webhooks/{id}/attempts": "dashboard's attempt log; Webhooks has each last attempt",
	"GET /metrics":                    "Prometheus text, for a scraper, not a client",
	"GET /cluster/replicate":          "internal: nodes replicate their log over it",
	"GET /dashboard/{file}":           "the dashboard's static files",
	"GET /openapi.json":               "the API description itself",
	"GET /asyncapi.json":              "the API description itself",
	"GET /docs":                       "the reference pages",
	"GET /docs/{file}":                "the reference pages",
}

func TestEveryRouteHasAMethod(t *testing.T) {
	res, err := http.Get(sharedURL(t) + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.NewDecoder(res.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	client := reflect.TypeOf(&ferry.Client{})
	var missing []string
	seen := 0
	listed := map[string]bool{}
	for path, ops := range doc.Paths {
		for method := range ops {
			switch method {
			case "get", "post", "put", "patch", "delete":
			default:
				continue // parameters, summary, …
			}
			op := strings.ToUpper(method) + " " + path
			seen++
			listed[op] = true
			if name, ok := covered[op]; ok {
				if _, has := client.MethodByName(name); !has {
					missing = append(missing, op+": Client has no method "+name)
				}
				continue
			}
			if _, ok := skipped[op]; !ok {
				missing = append(missing, op+": neither a Go method nor a reason")
			}
		}
	}
	for _, m := range []map[string]string{covered, skipped} {
		for op := range m {
			if !listed[op] {
				missing = append(missing, op+": in the test's map but not in openapi.json")
			}
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Error(m)
	}
	if seen < len(covered) {
		t.Fatalf("openapi.json lists %d operations; the map %d", seen, len(covered))
	}
}
