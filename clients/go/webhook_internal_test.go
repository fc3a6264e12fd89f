package ferry

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"
)

// webhookVectors are tests/_support/webhook_vectors.json, which the broker's signer test
// (tests/lib/push/webhook_signature_test.ts) checks too.
type webhookVector struct {
	Name             string `json:"name"`
	Secret           string `json:"secret"`
	ID               string `json:"id"`
	Timestamp        int64  `json:"timestamp"`
	Body             string `json:"body"`
	WebhookSignature string `json:"webhook_signature"`
}

func loadWebhookVectors(t *testing.T) []webhookVector {
	t.Helper()
	raw, err := os.ReadFile("../../tests/_support/webhook_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Vectors []webhookVector }
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Vectors) == 0 {
		t.Fatal("no vectors")
	}
	return doc.Vectors
}

func vectorHeaders(v webhookVector, sig string) http.Header {
	h := http.Header{}
	h.Set("webhook-id", v.ID)
	h.Set("webhook-timestamp", strconv.FormatInt(v.Timestamp, 10))
	h.Set("webhook-signature", sig)
	return h
}

func TestVerifyWebhookAcceptsTheSharedVectors(t *testing.T) {
	for _, v := range loadWebhookVectors(t) {
		now := time.Unix(v.Timestamp, 0).Add(time.Minute)
		body := []byte(v.Body)
		if err := verifyWebhookAt(v.Secret, vectorHeaders(v, v.WebhookSignature), body, now); err != nil {
			t.Errorf("%s: %v", v.Name, err)
		}
		// Among other signatures, and other versions, of a rotated secret.
		list := "v1,AAAA v2,xyz " + v.WebhookSignature
		if err := verifyWebhookAt(v.Secret, vectorHeaders(v, list), body, now); err != nil {
			t.Errorf("%s, in a list: %v", v.Name, err)
		}
		// A changed body, id, secret or signature fails.
		bad := map[string]error{
			"body":   verifyWebhookAt(v.Secret, vectorHeaders(v, v.WebhookSignature), append(body, ' '), now),
			"secret": verifyWebhookAt(v.Secret+"x", vectorHeaders(v, v.WebhookSignature), body, now),
			"v2":     verifyWebhookAt(v.Secret, vectorHeaders(v, "v2"+v.WebhookSignature[2:]), body, now),
		}
		h := vectorHeaders(v, v.WebhookSignature)
		h.Set("webhook-id", "other")
		bad["id"] = verifyWebhookAt(v.Secret, h, body, now)
		for what, err := range bad {
			if !errors.Is(err, ErrWebhookSignature) {
				t.Errorf("%s: a changed %s gave %v, want ErrWebhookSignature", v.Name, what, err)
			}
		}
	}
}

func TestVerifyWebhookChecksTheTimestampWithinFiveMinutes(t *testing.T) {
	v := loadWebhookVectors(t)[0]
	at := time.Unix(v.Timestamp, 0)
	h := vectorHeaders(v, v.WebhookSignature)
	for _, d := range []time.Duration{-5 * time.Minute, 5 * time.Minute} {
		if err := verifyWebhookAt(v.Secret, h, []byte(v.Body), at.Add(d)); err != nil {
			t.Errorf("now = timestamp %+v: %v", d, err)
		}
	}
	for _, d := range []time.Duration{-5*time.Minute - time.Second, 5*time.Minute + time.Second} {
		if err := verifyWebhookAt(v.Secret, h, []byte(v.Body), at.Add(d)); !errors.Is(err, ErrWebhookTimestamp) {
			t.Errorf("now = timestamp %+v: %v, want ErrWebhookTimestamp", d, err)
		}
	}
	h.Set("webhook-timestamp", "soon")
	if err := verifyWebhookAt(v.Secret, h, []byte(v.Body), at); !errors.Is(err, ErrWebhookTimestamp) {
		t.Errorf("an unreadable timestamp gave %v", err)
	}
	if err := VerifyWebhook(v.Secret, http.Header{}, nil); !errors.Is(err, ErrWebhookSignature) {
		t.Errorf("no headers gave %v", err)
	}
}

func TestWebhookKeyAcceptsUnpaddedBase64(t *testing.T) {
	if got := string(webhookKey("whsec_cmF3")); got != "raw" {
		t.Errorf("whsec_cmF3: %q", got)
	}
	if got := string(webhookKey("whsec_cmF3cw")); got != "raws" {
		t.Errorf("whsec_cmF3cw (no padding): %q", got)
	}
	if got := string(webhookKey("plain ü")); got != "plain ü" {
		t.Errorf("plain: %q", got)
	}
}
