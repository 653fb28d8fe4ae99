package postgres

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/exactlyonce/exactly/connectors/generator"
	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/stream"
)

// TestTLS runs the sink against the test server's TLS-only role: with
// sslmode=verify-full and the right CA a job's rows are committed; a wrong
// CA, an expired CA, a host name the certificate does not hold and a
// plaintext connection are each refused at Start with an error that says
// what to fix.
func TestTLS(t *testing.T) {
	dsn := testenv.Postgres(t)
	caFile := testenv.PostgresTLSCA(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 4)
	_, _ = rand.Read(raw)
	table := "tls_" + hex.EncodeToString(raw)
	admin, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	// A schema of its own: the sink's shared tables there belong to the
	// TLS role, not to the other tests' role.
	schema := table
	for _, q := range []string{"CREATE SCHEMA " + schema, "GRANT ALL ON SCHEMA " + schema + " TO exactly_tls",
		"CREATE TABLE " + schema + "." + table + " (v bigint)", "GRANT ALL ON " + schema + "." + table + " TO exactly_tls"} {
		if _, err := admin.Exec(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })

	tlsDSN := func(host, mode, root string) string {
		return "postgres://exactly_tls:exactly@" + host + ":" + u.Port() + "/exactly?sslmode=" + mode + "&sslrootcert=" + url.QueryEscape(root)
	}
	start := func(dsn string) error {
		snk, err := NewSink(Options{DSN: dsn, Schema: schema, Table: table, Columns: []Column{{"v", "bigint"}}}, func(v int64, row []any) []any { return append(row, v) })
		if err != nil {
			t.Fatal(err)
		}
		gen, err := generator.New(generator.Options{Count: 100}, func(i uint64) int64 { return int64(i) })
		if err != nil {
			t.Fatal(err)
		}
		j := stream.New("tls-" + table)
		stream.SinkTo(stream.Source(j, "numbers", gen), "numbers-table", snk)
		return j.Run(context.Background(), stream.Options{CheckpointDir: t.TempDir(), CheckpointInterval: 50 * time.Millisecond})
	}

	if err := start(tlsDSN("localhost", "verify-full", caFile)); err != nil {
		t.Fatalf("verify-full with the server's CA: %v", err)
	}
	var n int
	if err := admin.QueryRow(context.Background(), "SELECT count(*) FROM "+schema+"."+table).Scan(&n); err != nil || n != 100 {
		t.Fatalf("rows committed over TLS: %d (%v), want 100", n, err)
	}

	dir := t.TempDir()
	otherCA := writeCA(t, dir, "other.crt", selfSignedCA(t))
	expiredCA := writeCA(t, dir, "expired.crt", expiredCopy(t, caFile))
	for name, tc := range map[string]struct {
		dsn  string
		want []string
	}{
		"a CA that did not sign the server's certificate": {tlsDSN("localhost", "verify-full", otherCA), []string{"certificate signed by unknown authority", "sslrootcert"}},
		"an expired CA":                      {tlsDSN("localhost", "verify-full", expiredCA), []string{"expired", "sslrootcert"}},
		"a host name not in the certificate": {tlsDSN("127.0.0.1", "verify-full", caFile), []string{"127.0.0.1", "a name the certificate holds"}},
		"a plaintext connection":             {tlsDSN("127.0.0.1", "disable", caFile), []string{"no encryption", "set sslmode=verify-full"}},
	} {
		err := start(tc.dsn)
		if err == nil {
			t.Errorf("%s: the job ran", name)
			continue
		}
		for _, w := range append(tc.want, `operator "numbers-table" cannot start`) {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", name, err, w)
			}
		}
		t.Logf("%s: %v", name, err)
	}
}

// selfSignedCA returns a new CA certificate, PEM-encoded.
func selfSignedCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "another CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// expiredCopy returns the CA certificate in caFile re-issued with the
// same name and key (ca.key beside it) but expired yesterday: the server's
// certificate chains to it, and only its validity fails.
func expiredCopy(t *testing.T, caFile string) []byte {
	t.Helper()
	ca := readPEM(t, caFile)
	cert, err := x509.ParseCertificate(ca)
	if err != nil {
		t.Fatal(err)
	}
	keyDER := readPEM(t, filepath.Join(filepath.Dir(caFile), "ca.key"))
	key, err := x509.ParsePKCS8PrivateKey(keyDER)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := *cert
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour)
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, &tmpl, cert.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func readPEM(t *testing.T, file string) []byte {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(data)
	if b == nil {
		t.Fatalf("%s holds no PEM block", file)
	}
	return b.Bytes
}

func writeCA(t *testing.T, dir, name string, pemBytes []byte) string {
	t.Helper()
	f := filepath.Join(dir, name)
	if err := os.WriteFile(f, pemBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}
