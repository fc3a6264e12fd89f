package ferry_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ferry "github.com/ferrymq/ferry/clients/go"
)

// makePKI writes a throwaway CA and a certificate it signed for localhost and 127.0.0.1 into
// dir with openssl (no key is ever committed); it returns the CA's and the server's files.
func makePKI(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	run := func(args ...string) {
		cmd := exec.Command("openssl", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("openssl %s: %v\n%s", args[0], err, out)
		}
	}
	ec := []string{"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"}
	run(append(append([]string{"req", "-x509"}, ec...), "-days", "2", "-keyout", "ca.key",
		"-out", "ca.pem", "-subj", "/CN=Ferry Go test CA",
		"-addext", "basicConstraints=critical,CA:TRUE",
		"-addext", "keyUsage=critical,keyCertSign,cRLSign")...)
	run(append(append([]string{"req"}, ec...), "-keyout", "server.key", "-out", "server.csr",
		"-subj", "/CN=ferry")...)
	ext := "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
	if err := os.WriteFile(filepath.Join(dir, "ext.cnf"), []byte(ext), 0o600); err != nil {
		t.Fatal(err)
	}
	run("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
		"-CAcreateserial", "-days", "2", "-out", "server.pem", "-extfile", "ext.cnf")
	return filepath.Join(dir, "ca.pem"), filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key")
}

func TestWithTLSConfigPublishesConsumesAndSubscribesOverTLS(t *testing.T) {
	needBroker(t)
	dir := t.TempDir()
	caFile, certFile, keyFile := makePKI(t, dir)
	b, err := startBroker(filepath.Join(dir, "data"), []string{
		"BROKER_TLS_CERT=" + certFile, "BROKER_TLS_KEY=" + keyFile,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.stop()
	url := strings.Replace(b.URL, "http:", "https:", 1)
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatal("the CA does not parse")
	}
	c, err := ferry.New(url, ferry.WithTLSConfig(&tls.Config{RootCAs: roots}), ferry.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	got := make(chan *ferry.Message, 1)
	sub, err := c.Subscribe(ctx, "secure", func(m *ferry.Message) { got <- m }, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if _, err := c.Publish(ctx, "secure", []byte("over tls"), nil); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		if string(m.Payload) != "over tls" {
			t.Fatalf("subscribed payload %q", m.Payload)
		}
	case <-ctx.Done():
		t.Fatal("nothing arrived over wss")
	}
	msgs, err := c.Consume(ctx, "secure", &ferry.ConsumeOptions{AutoAck: true})
	if err != nil || len(msgs) != 1 || string(msgs[0].Payload) != "over tls" {
		t.Fatalf("consume: %v %v", msgs, err)
	}

	// Without the CA the certificate is refused: an error, not an answer.
	plain, err := ferry.New(url, ferry.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	_, err = plain.Publish(ctx, "secure", []byte("x"), nil)
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Fatalf("without the CA: %v", fmt.Sprint(err))
	}
}
