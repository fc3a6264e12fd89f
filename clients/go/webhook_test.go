package ferry_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	ferry "github.com/ferrymq/ferry/clients/go"
)

func TestVerifyWebhookAcceptsARealDeliveryFromTheBroker(t *testing.T) {
	for _, secret := range []string{
		"whsec_" + base64.StdEncoding.EncodeToString([]byte("thirty-two bytes of key material")),
		"a plain secret ü",
	} {
		type delivery struct {
			h    http.Header
			body []byte
		}
		got := make(chan delivery, 4)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			got <- delivery{r.Header.Clone(), body}
		}))
		topic := topicName(t)
		reg, _ := json.Marshal(map[string]string{"url": srv.URL + "/hook", "secret": secret})
		if st := post(t, "POST", sharedURL(t)+"/webhook/"+url.PathEscape(topic), string(reg), nil); st != 201 {
			t.Fatalf("register webhook: %d", st)
		}
		id := publish(t, sharedURL(t), topic, `{"order":42,"note":"naïve"}`)
		select {
		case d := <-got:
			if d.h.Get("webhook-id") != id {
				t.Errorf("webhook-id %q, want the message id %q", d.h.Get("webhook-id"), id)
			}
			if err := ferry.VerifyWebhook(secret, d.h, d.body); err != nil {
				t.Errorf("secret %q: %v (headers %v)", secret, err, d.h)
			}
			if err := ferry.VerifyWebhook(secret, d.h, append(d.body, '\n')); !errors.Is(err, ferry.ErrWebhookSignature) {
				t.Errorf("a changed body gave %v", err)
			}
			if err := ferry.VerifyWebhook("whsec_b3RoZXI=", d.h, d.body); !errors.Is(err, ferry.ErrWebhookSignature) {
				t.Errorf("another secret gave %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("secret %q: no webhook POST within 15 s", secret)
		}
		srv.Close()
	}
}
