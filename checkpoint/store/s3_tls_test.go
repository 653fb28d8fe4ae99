package store

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/internal/testenv"
)

// TestS3OverTLS writes and reads objects through the test S3 server's
// HTTPS endpoint with its CA in AWS_CA_BUNDLE, and checks that each
// misconfiguration fails at once with an error that names what to fix.
func TestS3OverTLS(t *testing.T) {
	srv := testenv.S3TLS(t)
	plain := testenv.S3(t)
	raw := make([]byte, 6)
	_, _ = rand.Read(raw)
	prefix := "store-tls/" + hex.EncodeToString(raw)
	bucketAt := func(t *testing.T, endpoint string) *s3Bucket {
		t.Helper()
		loc, err := parseS3URL("s3://" + testenv.S3Bucket + "/" + prefix + "?endpoint=" + endpoint)
		if err != nil {
			t.Fatal(err)
		}
		b, err := newS3Bucket(loc)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	t.Run("verified", func(t *testing.T) {
		t.Setenv(caBundleEnv, srv.CAFile)
		b := bucketAt(t, srv.Endpoint)
		ctx := context.Background()
		key := prefix + "/object"
		t.Cleanup(func() { _ = b.remove(context.Background(), key) })
		body := []byte("checkpoint bytes over TLS")
		if _, err := b.put(ctx, key, bytes.NewReader(body), int64(len(body)), putCondition{}); err != nil {
			t.Fatal(err)
		}
		got, _, err := b.get(ctx, key)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("read back %q, %v; want %q", got, err, body)
		}
	})

	dir := t.TempDir()
	otherCA := writeCA(t, dir, "other-ca.crt", time.Now().Add(24*time.Hour))
	notPEM := filepath.Join(dir, "not-pem.crt")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, bundle, endpoint string
		want                   string // in the error
	}{
		{"system CAs only", "", srv.Endpoint, "not signed by a CA this process trusts: set AWS_CA_BUNDLE"},
		{"wrong CA", otherCA, srv.Endpoint, "not signed by a CA this process trusts: set AWS_CA_BUNDLE"},
		{"HTTPS client, plain server", srv.CAFile, "https://" + strings.TrimPrefix(plain, "http://"), "the server speaks plain HTTP: write endpoint=http://"},
		{"plain client, HTTPS server", "", "http://" + strings.TrimPrefix(srv.Endpoint, "https://"), "if it speaks HTTPS, write endpoint=https://"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(caBundleEnv, c.bundle)
			b := bucketAt(t, c.endpoint)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			start := time.Now()
			_, err := b.list(ctx, prefix+"/")
			t.Logf("after %v: %v", time.Since(start).Round(time.Millisecond), err)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v; want one saying %q", err, c.want)
			}
			if ctx.Err() != nil {
				t.Fatalf("the error came only at the deadline: it was retried")
			}
			if refused := !strings.Contains(c.want, "if it speaks HTTPS"); errors.Is(err, ErrRefused) != refused {
				t.Errorf("errors.Is(err, ErrRefused) = %v; want %v", !refused, refused)
			}
		})
	}

	for _, c := range []struct{ name, bundle, want string }{
		{"missing CA file", filepath.Join(dir, "missing.crt"), "AWS_CA_BUNDLE: open "},
		{"CA file not PEM", notPEM, "holds no PEM certificate"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(caBundleEnv, c.bundle)
			_, err := OpenObject("s3://"+testenv.S3Bucket+"/"+prefix+"?endpoint="+srv.Endpoint, Options{})
			t.Logf("%v", err)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v; want one saying %q", err, c.want)
			}
		})
	}
}

// TestS3TLSErrorsNameTheFix checks the certificate errors the test server
// cannot produce (its certificate is valid and names 127.0.0.1).
func TestS3TLSErrorsNameTheFix(t *testing.T) {
	b := &s3Bucket{loc: s3Location{bucket: "b", endpoint: "s3.example:443", secure: true}}
	cert := &x509.Certificate{DNSNames: []string{"other.example"}}
	for _, c := range []struct {
		err  error
		want string
	}{
		{x509.HostnameError{Certificate: cert, Host: "s3.example"}, `does not hold the name "s3.example:443": set endpoint= to a name the certificate holds`},
		{x509.CertificateInvalidError{Cert: cert, Reason: x509.Expired}, "has expired or is not valid yet: renew it, or check this machine's clock"},
		{x509.CertificateInvalidError{Cert: cert, Reason: x509.IncompatibleUsage}, "is not valid for a server"},
		{errors.New("connection refused"), ""},
	} {
		got, _ := b.tlsFix(c.err)
		if c.want == "" && got != "" || !strings.Contains(got, c.want) {
			t.Errorf("tlsFix(%v) = %q; want %q", c.err, got, c.want)
		}
	}
}

// writeCA writes a self-signed CA certificate, valid until notAfter, to
// dir/name and returns its path.
func writeCA(t *testing.T, dir, name string, notAfter time.Time) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "another CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
