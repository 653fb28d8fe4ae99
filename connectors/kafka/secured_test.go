package kafka_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/internal/kafkatest"
	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/sink"
	"github.com/exactlyonce/exactly/stream"
)

// secured is the test broker's secured listeners as kafka.Conns: SASL_SSL
// with a SCRAM-SHA-512 user of the test, and mTLS.
type secured struct {
	kafkatest.Secured
	sasl, mtls kafka.Conn
}

func newSecured(t *testing.T, adm *kadm.Client, name string) secured {
	t.Helper()
	s := secured{Secured: kafkatest.NewSecured(t, adm, name)}
	s.sasl = saslConn(s.Secured)
	s.mtls = kafka.Conn{Brokers: []string{s.MTLS}, TLS: &tls.Config{RootCAs: s.CA, Certificates: []tls.Certificate{s.Client}}, DialTimeout: 3 * time.Second}
	return s
}

// saslConn connects as s's SCRAM user over the SASL_SSL listener.
func saslConn(s kafkatest.Secured) kafka.Conn {
	return kafka.Conn{Brokers: []string{s.SASLSSL}, TLS: &tls.Config{RootCAs: s.CA},
		SASL: kafka.SASL{Mechanism: kafka.SASLScramSHA512, User: s.User, Password: s.Password}, DialTimeout: 3 * time.Second}
}

// expiredClient returns a certificate of the mTLS user signed by the
// test broker's CA that expired a day ago.
func expiredClient(t *testing.T, dir string) tls.Certificate {
	t.Helper()
	ca, err := tls.LoadX509KeyPair(filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(ca.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "exactly-mtls"},
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, ca.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestSecuredListeners runs the exactly-once count job against the test
// broker's secured listeners, reading and writing as a SCRAM-SHA-512 user
// over SASL_SSL and as the mTLS user, with ACLs enforced: each output is
// exact. (The misconfigurations are TestSecuredMisconfigurations.)
func TestSecuredListeners(t *testing.T) {
	t.Parallel()
	brokers := testenv.Kafka(t)
	adm := kafkatest.Admin(t, brokers)
	name := kafkatest.UniqueName("secured")
	sec := newSecured(t, adm, name)
	in := name + "-in"
	kafkatest.CreateTopic(t, adm, in, 2)
	const keys, perKey = 20, 50
	produceInput(t, brokers, in, keys, perKey)
	for _, c := range []struct {
		name string
		conn kafka.Conn
	}{{"sasl_ssl", sec.sasl}, {"mtls", sec.mtls}} {
		t.Run(c.name, func(t *testing.T) {
			out := name + "-" + c.name
			kafkatest.CreateTopic(t, adm, out, 2)
			j, err := countJob(c.conn, in, out, name+"-"+c.name+"-txn", 2, 100*time.Millisecond, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := j.Run(context.Background(), stream.Options{CheckpointDir: t.TempDir(), CheckpointInterval: 100 * time.Millisecond}); err != nil {
				t.Fatalf("the job over %s: %v", c.name, err)
			}
			checkCounts(t, kafkatest.ReadCommitted(t, brokers, out, keys*perKey, 30*time.Second), keys, perKey)
		})
	}
}

// TestSecuredMisconfigurations checks each misconfiguration of a secured
// connection at start (the sink's Check): the error names the setting to
// fix, and comes at once, without waiting for a broker that will never
// accept the connection.
func TestSecuredMisconfigurations(t *testing.T) {
	t.Parallel()
	brokers := testenv.Kafka(t)
	adm := kafkatest.Admin(t, brokers)
	name := kafkatest.UniqueName("misconfigured")
	sec := newSecured(t, adm, name)
	out := name + "-out"
	kafkatest.CreateTopic(t, adm, out, 1)
	otherCA := x509.NewCertPool() // trusts nothing the broker presents
	with := func(c kafka.Conn, change func(*kafka.Conn)) kafka.Conn {
		c.TLS = c.TLS.Clone()
		change(&c)
		return c
	}
	for _, c := range []struct {
		name string
		conn kafka.Conn
		want []string
		// retried: the error is retried until the check's deadline (a
		// connection closed at once may be a load balancer's too).
		retried bool
	}{
		{"wrong password", with(sec.sasl, func(c *kafka.Conn) { c.SASL.Password = "wrong" }), []string{"Conn.SASL", "authentication"}, false},
		{"unknown user", with(sec.sasl, func(c *kafka.Conn) { c.SASL.User = name + "-nobody" }), []string{"Conn.SASL", "authentication"}, false},
		{"wrong CA", with(sec.sasl, func(c *kafka.Conn) { c.TLS.RootCAs = otherCA }), []string{"Conn.TLS", "certificate"}, false},
		{"host name mismatch", with(sec.sasl, func(c *kafka.Conn) { c.TLS.ServerName = "kafka.invalid" }), []string{"Conn.TLS", "kafka.invalid"}, false},
		{"no client certificate", with(sec.mtls, func(c *kafka.Conn) { c.TLS.Certificates = nil }), []string{"Conn.TLS.Certificates"}, false},
		{"expired client certificate", with(sec.mtls, func(c *kafka.Conn) { c.TLS.Certificates = []tls.Certificate{expiredClient(t, sec.TLSDir)} }), []string{"Conn.TLS.Certificates"}, false},
		{"plaintext client, TLS listener", with(sec.sasl, func(c *kafka.Conn) { c.TLS = nil }), []string{"Conn.TLS"}, false},
		{"TLS client, plaintext listener", with(sec.sasl, func(c *kafka.Conn) { c.Brokers = []string{brokers}; c.SASL = kafka.SASL{} }), []string{"Conn.TLS", "plaintext"}, true},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			snk, err := kafka.NewSink(kafka.SinkOptions{Conn: c.conn, Topic: out, TransactionTimeout: time.Minute},
				func(v string) (kafka.Message, error) { return kafka.Message{Value: []byte(v)}, nil })
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			began := time.Now()
			err = snk.Check(ctx)
			t.Logf("after %v: %v", time.Since(began).Round(time.Millisecond), err)
			if err == nil {
				t.Fatal("no error")
			}
			if ctx.Err() != nil && !c.retried {
				t.Errorf("the check waited until its deadline: a misconfiguration must fail at once")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not mention %q", w)
				}
			}
			if !sink.IsPermanent(err) && !c.retried {
				t.Errorf("the error is not permanent: a job would restart in vain")
			}
			if strings.Contains(err.Error(), sec.Password) {
				t.Errorf("the error holds the password")
			}
		})
	}
}
