package kafkatest

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/exactlyonce/exactly/internal/testenv"
)

// MTLSUser is the principal of the test broker's client certificate
// (testenv.KafkaSecured.TLSDir/client.crt).
const MTLSUser = "exactly-mtls"

// Secured is a user of the test broker's secured listeners: a SCRAM-SHA-512
// user of the SASL_SSL listener, made for one test, and the mTLS user,
// both allowed every operation on the resources whose names start with the
// test's name, and on the transactional ids of a sink's default prefix in a
// job of that name ("exactly-" + name).
type Secured struct {
	testenv.KafkaSecured
	// User and Password are the SCRAM-SHA-512 user's.
	User, Password string
	// CA trusts the brokers' certificates; Client is the mTLS user's
	// certificate.
	CA     *x509.CertPool
	Client tls.Certificate
}

// NewSecured creates a SCRAM-SHA-512 user with a random password, waits
// until it can log in, and allows it and the mTLS user every operation on
// the topics, groups and transactional ids whose names start with name,
// and on the cluster. The user and the grants on name are removed when the
// test ends; the mTLS user's grant on the cluster stays (the same grant
// for every test: one test's end must not take it from another).
func NewSecured(t testing.TB, adm *kadm.Client, name string) Secured {
	t.Helper()
	s := NewSCRAMUser(t, adm, name)
	grant := func(b *kadm.ACLBuilder, remove bool) {
		t.Helper()
		if remove {
			Grant(t, adm, b)
		} else {
			CreateACLs(t, adm, b)
		}
	}
	grant(kadm.NewACLs().Allow("User:"+s.User, "User:"+MTLSUser).AllowHosts().Topics(name).TransactionalIDs(name, "exactly-"+name).Groups(name).
		ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpAll), true)
	grant(kadm.NewACLs().Allow("User:"+s.User).AllowHosts().Clusters().Operations(kadm.OpAll), true)
	grant(kadm.NewACLs().Allow("User:"+MTLSUser).AllowHosts().Clusters().Operations(kadm.OpAll), false)
	return s
}

// Grant creates the ACLs b describes, revoked when the test ends.
func Grant(t testing.TB, adm *kadm.Client, b *kadm.ACLBuilder) {
	t.Helper()
	CreateACLs(t, adm, b)
	t.Cleanup(func() { Revoke(t, adm, b) })
}

// Revoke deletes the ACLs b describes.
func Revoke(t testing.TB, adm *kadm.Client, b *kadm.ACLBuilder) {
	t.Helper()
	res, err := adm.DeleteACLs(context.Background(), b)
	if err == nil {
		for _, r := range res {
			err = r.Err
		}
	}
	if err != nil {
		t.Errorf("deleting ACLs: %v", err)
	}
}

// CreateACLs creates the ACLs b describes (see Grant).
func CreateACLs(t testing.TB, adm *kadm.Client, b *kadm.ACLBuilder) {
	t.Helper()
	res, err := adm.CreateACLs(context.Background(), b)
	if err == nil {
		for _, r := range res {
			err = r.Err
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}

// BrokersCA returns the CA that signed the test broker's certificates
// (testenv.KafkaSecured.TLSDir/ca.crt).
func BrokersCA(t testing.TB) *x509.CertPool {
	t.Helper()
	file := filepath.Join(testenv.KafkaTLS(t).TLSDir, "ca.crt")
	pem, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	ca := x509.NewCertPool()
	if !ca.AppendCertsFromPEM(pem) {
		t.Fatalf("no certificate in %s", file)
	}
	return ca
}

// MTLSClient returns the certificate of the mTLS user (MTLSUser) that
// the test broker's CA signed.
func MTLSClient(t testing.TB) tls.Certificate {
	t.Helper()
	dir := testenv.KafkaTLS(t).TLSDir
	client, err := tls.LoadX509KeyPair(filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key"))
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// NewSCRAMUser creates a SCRAM-SHA-512 user of the test broker's SASL_SSL
// listener with a random password and no ACL, removed when the test ends,
// and waits until it can log in.
func NewSCRAMUser(t testing.TB, adm *kadm.Client, name string) Secured {
	t.Helper()
	sec := testenv.KafkaTLS(t)
	ctx := context.Background()
	ca := BrokersCA(t)
	client := MTLSClient(t)
	raw := make([]byte, 12)
	_, _ = rand.Read(raw)
	s := Secured{KafkaSecured: sec, User: name + "-user", Password: hex.EncodeToString(raw), CA: ca, Client: client}
	if _, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: s.User, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: s.Password}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = adm.AlterUserSCRAMs(context.Background(), []kadm.DeleteSCRAM{{User: s.User, Mechanism: kadm.ScramSha512}}, nil)
	})
	// The credentials reach the broker's SCRAM cache a moment after the
	// request: until then a login fails.
	WaitFor(t, 30*time.Second, "the SCRAM user "+s.User+" can log in", func() bool {
		cl, err := kgo.NewClient(kgo.SeedBrokers(sec.SASLSSL), kgo.DialTLSConfig(&tls.Config{RootCAs: ca}),
			kgo.SASL(scram.Auth{User: s.User, Pass: s.Password}.AsSha512Mechanism()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return cl.Ping(ctx) == nil
	})
	return s
}
