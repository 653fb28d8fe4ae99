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
	tt := newTLSTable(t, "exactly_tls")
	caFile := tt.ca
	tlsDSN := func(host, mode, root string) string {
		return "postgres://exactly_tls:exactly@" + host + ":" + tt.port + "/exactly?sslmode=" + mode + "&sslrootcert=" + url.QueryEscape(root)
	}
	start := tt.start
	if err := start(tlsDSN("localhost", "verify-full", caFile)); err != nil {
		t.Fatalf("verify-full with the server's CA: %v", err)
	}
	if n := tt.rows(t); n != 100 {
		t.Fatalf("rows committed over TLS: %d, want 100", n)
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

// TestClientCertificate runs the sink as the test server's role that
// authenticates by client certificate only (pg_hba "cert"): with
// sslcert/sslkey of a certificate for the role, signed by the server's CA,
// the rows are committed; without a certificate, or with one for another
// name, the start is refused with an error that names the setting.
func TestClientCertificate(t *testing.T) {
	tt := newTLSTable(t, "exactly_cert")
	dir := t.TempDir()
	dsn := func(certName string) string {
		d := "postgres://exactly_cert@localhost:" + tt.port + "/exactly?sslmode=verify-full&sslrootcert=" + url.QueryEscape(tt.ca)
		if certName != "" {
			crt, key := clientCertificate(t, dir, filepath.Join(filepath.Dir(tt.ca), "client-ca.crt"), certName)
			d += "&sslcert=" + url.QueryEscape(crt) + "&sslkey=" + url.QueryEscape(key)
		}
		return d
	}
	if err := tt.start(dsn("exactly_cert")); err != nil {
		t.Fatalf("with the role's client certificate: %v", err)
	}
	if n := tt.rows(t); n != 100 {
		t.Fatalf("rows committed with a client certificate: %d, want 100", n)
	}
	for name, tc := range map[string]struct {
		dsn  string
		want []string
	}{
		"no client certificate":          {dsn(""), []string{"sslcert", "sslkey"}},
		"a certificate for another name": {dsn("someone-else"), []string{"sslcert", "CN"}},
	} {
		err := tt.start(tc.dsn)
		if err == nil {
			t.Errorf("%s: the job ran", name)
			continue
		}
		t.Logf("%s: %v", name, err)
		for _, w := range append(tc.want, `operator "numbers-table" cannot start`) {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", name, err, w)
			}
		}
	}
}

// clientCertificate writes a client certificate for the user cn, signed
// by the CA of caFile (its key beside it, with the extension .key), and
// its key, into dir; it returns their paths.
func clientCertificate(t *testing.T, dir, caFile, cn string) (crtFile, keyFile string) {
	t.Helper()
	ca, err := x509.ParseCertificate(readPEM(t, caFile))
	if err != nil {
		t.Fatal(err)
	}
	caKey, err := x509.ParsePKCS8PrivateKey(readPEM(t, strings.TrimSuffix(caFile, ".crt")+".key"))
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	crtFile, keyFile = filepath.Join(dir, cn+".crt"), filepath.Join(dir, cn+".key")
	if err := os.WriteFile(crtFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return crtFile, keyFile
}

// tlsTable is a table of its own schema that a role of the test server
// may write, and a job that writes 0..99 into it.
type tlsTable struct {
	admin         *pgx.Conn
	schema, table string
	port          string // the server's
	ca            string // the file of the CA that signed its certificate
}

// newTLSTable creates the schema and table for role, dropped at the end.
func newTLSTable(t *testing.T, role string) *tlsTable {
	t.Helper()
	dsn := testenv.Postgres(t)
	tt := &tlsTable{ca: testenv.PostgresTLSCA(t)}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	tt.port = u.Port()
	raw := make([]byte, 4)
	_, _ = rand.Read(raw)
	tt.table = "tls_" + hex.EncodeToString(raw)
	if tt.admin, err = pgx.Connect(context.Background(), dsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tt.admin.Close(context.Background()) })
	// A schema of its own: the sink's shared tables there belong to the
	// role, not to the other tests' role.
	tt.schema = tt.table
	for _, q := range []string{"CREATE SCHEMA " + tt.schema, "GRANT ALL ON SCHEMA " + tt.schema + " TO " + role,
		"CREATE TABLE " + tt.schema + "." + tt.table + " (v bigint)", "GRANT ALL ON " + tt.schema + "." + tt.table + " TO " + role} {
		if _, err := tt.admin.Exec(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _ = tt.admin.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+tt.schema+" CASCADE") })
	return tt
}

// start runs a job that writes 0..99 into the table through dsn.
func (tt *tlsTable) start(dsn string) error {
	snk, err := NewSink(Options{DSN: dsn, Schema: tt.schema, Table: tt.table, Columns: []Column{{"v", "bigint"}}}, func(v int64, row []any) []any { return append(row, v) })
	if err != nil {
		return err
	}
	gen, err := generator.New(generator.Options{Count: 100}, func(i uint64) int64 { return int64(i) })
	if err != nil {
		return err
	}
	j := stream.New("tls-" + tt.table)
	stream.SinkTo(stream.Source(j, "numbers", gen), "numbers-table", snk)
	dir, err := os.MkdirTemp("", "tls-checkpoints-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	return j.Run(context.Background(), stream.Options{CheckpointDir: dir, CheckpointInterval: 50 * time.Millisecond})
}

// rows counts the table's rows.
func (tt *tlsTable) rows(t *testing.T) int {
	t.Helper()
	var n int
	if err := tt.admin.QueryRow(context.Background(), "SELECT count(*) FROM "+tt.schema+"."+tt.table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
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
