package ferry

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// WebhookTolerance is how far a webhook's `webhook-timestamp` may be from now, either way.
const WebhookTolerance = 5 * time.Minute

var (
	// ErrWebhookSignature matches (errors.Is) a webhook whose Standard Webhooks headers are
	// missing or whose `webhook-signature` holds no signature of this body with this secret.
	ErrWebhookSignature = errors.New("ferry: webhook signature does not match")
	// ErrWebhookTimestamp matches (errors.Is) a webhook whose `webhook-timestamp` is unreadable
	// or more than WebhookTolerance away from now (a replay, or a badly wrong clock).
	ErrWebhookTimestamp = errors.New("ferry: webhook timestamp out of tolerance")
)

// VerifyWebhook checks a webhook POST from the broker as Standard Webhooks prescribes: h must
// hold `webhook-id`, `webhook-timestamp` (Unix seconds, within WebhookTolerance of now) and
// `webhook-signature`, a space-separated list of `v1,<base64 HMAC-SHA256>` of
// "{webhook-id}.{webhook-timestamp}.{body}", one of which must match (compared in constant
// time). The HMAC key is the secret's UTF-8 bytes, or for a secret written `whsec_<base64>` the
// decoded bytes, as the broker signs. body is the request body exactly as received. A nil error
// means the webhook is authentic; otherwise the error matches ErrWebhookSignature or
// ErrWebhookTimestamp.
func VerifyWebhook(secret string, h http.Header, body []byte) error {
	return verifyWebhookAt(secret, h, body, time.Now())
}

func verifyWebhookAt(secret string, h http.Header, body []byte, now time.Time) error {
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return fmt.Errorf("%w: missing webhook-id, webhook-timestamp or webhook-signature", ErrWebhookSignature)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: webhook-timestamp %.40q is not Unix seconds", ErrWebhookTimestamp, ts)
	}
	at := time.Unix(sec, 0)
	if at.Before(now.Add(-WebhookTolerance)) || at.After(now.Add(WebhookTolerance)) {
		return fmt.Errorf("%w: webhook-timestamp %s is %v from now", ErrWebhookTimestamp, ts,
			now.Sub(at).Round(time.Second))
	}
	want := webhookSignature(webhookKey(secret), id, ts, body)
	for _, s := range strings.Fields(sigs) {
		version, sig, ok := strings.Cut(s, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return ErrWebhookSignature
}

// webhookKey is the HMAC key of a secret: the bytes of `whsec_<base64>`, or its UTF-8 text.
func webhookKey(secret string) []byte {
	if rest, ok := strings.CutPrefix(secret, "whsec_"); ok {
		// Padding may be left out, as the broker's Base64 decoder allows.
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding} {
			if key, err := enc.DecodeString(rest); err == nil {
				return key
			}
		}
	}
	return []byte(secret)
}

// webhookSignature is the HMAC-SHA256 of "id.timestamp.body".
func webhookSignature(key []byte, id, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + ts + "."))
	m.Write(body)
	return m.Sum(nil)
}
