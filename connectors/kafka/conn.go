package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/exactlyonce/exactly/sink"
)

// SASLMechanism names a SASL authentication mechanism.
type SASLMechanism string

const (
	// SASLPlain is SASL/PLAIN: the password travels as is, so use it only with TLS.
	SASLPlain SASLMechanism = "PLAIN"
	// SASLScramSHA256 is SASL/SCRAM-SHA-256.
	SASLScramSHA256 SASLMechanism = "SCRAM-SHA-256"
	// SASLScramSHA512 is SASL/SCRAM-SHA-512.
	SASLScramSHA512 SASLMechanism = "SCRAM-SHA-512"
)

// defaultDialTimeout bounds one connection attempt when Conn.DialTimeout is zero.
const defaultDialTimeout = 10 * time.Second

// Conn says how to reach and authenticate to the Kafka cluster. It is shared
// by [SourceOptions] and [SinkOptions].
type Conn struct {
	// Brokers are the bootstrap brokers, "host:port". Required.
	Brokers []string
	// TLS, when set, encrypts every connection with this configuration.
	// Leave it nil for plaintext listeners.
	TLS *tls.Config
	// SASL, when its Mechanism is set, authenticates every connection.
	SASL SASL
	// ClientID is sent to the brokers for their logs and quotas. Default "exactly".
	ClientID string
	// DialTimeout bounds one connection attempt. Default 10s.
	DialTimeout time.Duration
}

// SASL holds SASL credentials. They are never logged.
type SASL struct {
	// Mechanism is SASLPlain, SASLScramSHA256 or SASLScramSHA512; empty disables SASL.
	Mechanism SASLMechanism
	// User is the user name.
	User string
	// Password is the password.
	Password string
}

// validate checks c, naming the field, the value and the fix. prefix is
// the options struct holding c, e.g. "SinkOptions".
func (c *Conn) validate(prefix string) error {
	if len(c.Brokers) == 0 {
		return fmt.Errorf("kafka: %s.Conn.Brokers is empty: list at least one bootstrap broker as host:port", prefix)
	}
	for i, b := range c.Brokers {
		if _, _, err := net.SplitHostPort(b); err != nil {
			return fmt.Errorf("kafka: %s.Conn.Brokers[%d] = %q is not host:port: %w", prefix, i, b, err)
		}
	}
	switch c.SASL.Mechanism {
	case "":
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
		if c.SASL.User == "" {
			return fmt.Errorf("kafka: %s.Conn.SASL.User is empty with mechanism %s: set the user name", prefix, c.SASL.Mechanism)
		}
	default:
		return fmt.Errorf("kafka: %s.Conn.SASL.Mechanism = %q is unknown: use %s, %s or %s", prefix, c.SASL.Mechanism, SASLPlain, SASLScramSHA256, SASLScramSHA512)
	}
	if c.DialTimeout < 0 {
		return fmt.Errorf("kafka: %s.Conn.DialTimeout = %v is negative: use 0 (default 10s) or a positive duration", prefix, c.DialTimeout)
	}
	return nil
}

// opts returns the franz-go options that connect as c says.
func (c *Conn) opts() []kgo.Opt {
	id := c.ClientID
	if id == "" {
		id = "exactly"
	}
	dial := c.DialTimeout
	if dial == 0 {
		dial = defaultDialTimeout
	}
	o := []kgo.Opt{
		kgo.SeedBrokers(c.Brokers...),
		kgo.ClientID(id),
		kgo.DialTimeout(dial),
		kgo.RetryTimeout(30 * time.Second),
	}
	if c.TLS != nil {
		o = append(o, kgo.DialTLSConfig(c.TLS.Clone()))
	}
	if m := c.saslMechanism(); m != nil {
		o = append(o, kgo.SASL(m))
	}
	return o
}

// saslMechanism returns the configured SASL mechanism, or nil.
func (c *Conn) saslMechanism() sasl.Mechanism {
	s := c.SASL
	switch s.Mechanism {
	case SASLPlain:
		return plain.Auth{User: s.User, Pass: s.Password}.AsMechanism()
	case SASLScramSHA256:
		return scram.Auth{User: s.User, Pass: s.Password}.AsSha256Mechanism()
	case SASLScramSHA512:
		return scram.Auth{User: s.User, Pass: s.Password}.AsSha512Mechanism()
	}
	return nil
}

// newClient opens a client with c's connection options and extra, and
// checks that the cluster answers, so that a wrong address or bad
// credentials fail here with a clear error instead of in a retry loop.
func (c *Conn) newClient(ctx context.Context, extra ...kgo.Opt) (*kgo.Client, error) {
	cl, err := kgo.NewClient(append(c.opts(), extra...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka: client options: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, c.pingTimeout())
	defer cancel()
	if err := cl.Ping(pctx); err != nil {
		cl.Close()
		return nil, c.explain(err)
	}
	return cl, nil
}

// pingTimeout bounds the first contact with the cluster.
func (c *Conn) pingTimeout() time.Duration {
	if c.DialTimeout > 0 {
		return 2 * c.DialTimeout
	}
	return 2 * defaultDialTimeout
}

// explain turns a failure to reach the cluster into an error that says
// what to check.
func (c *Conn) explain(err error) error {
	var saslErr *kerr.Error
	switch {
	case errors.As(err, &saslErr) && (saslErr == kerr.SaslAuthenticationFailed || saslErr == kerr.IllegalSaslState || saslErr == kerr.UnsupportedSaslMechanism):
		// Retrying cannot fix credentials either.
		return sink.Permanent(fmt.Errorf("kafka: authentication to %v failed (SASL mechanism %q, user %q): check Conn.SASL and the broker's sasl.enabled.mechanisms: %w", c.Brokers, c.SASL.Mechanism, c.SASL.User, err))
	case isAuthorization(err):
		return fmt.Errorf("kafka: the brokers %v refused an operation: grant the ACLs listed in docs/kafka.md to user %q: %w", c.Brokers, c.SASL.User, err)
	case c.tlsFix(err) != "":
		// Retrying cannot fix a certificate or a listener's protocol.
		return sink.Permanent(fmt.Errorf("kafka: cannot connect to the brokers %v: %s: %w", c.Brokers, c.tlsFix(err), err))
	case c.TLS != nil && strings.Contains(err.Error(), "using TLS when the broker is not expecting it"):
		// A plaintext listener closes a TLS client's connection at once,
		// but so may a load balancer with no broker behind it: retried,
		// and said.
		return unreachableError{fmt.Errorf("kafka: cannot reach the brokers %v: each closed the connection as soon as it opened: if the listener is plaintext, leave Conn.TLS nil for it or use the brokers' TLS listener: %w", c.Brokers, err)}
	default:
		return unreachableError{fmt.Errorf("kafka: cannot reach the brokers %v (TLS %t, SASL %q): check Conn.Brokers, that the brokers run, and the listener's security protocol: %w", c.Brokers, c.TLS != nil, c.SASL.Mechanism, err)}
	}
}

// tlsFix returns what to change when err is a TLS handshake that failed
// for a reason of configuration, or "" when it is not.
func (c *Conn) tlsFix(err error) string {
	var (
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
	)
	msg := err.Error()
	switch {
	case errors.As(err, &unknownCA):
		return "the brokers' certificate is not signed by a CA that Conn.TLS.RootCAs holds (nil: the system's): set Conn.TLS.RootCAs to the CA that signed the brokers' certificates"
	case errors.As(err, &hostname):
		return fmt.Sprintf("the brokers' certificate does not hold the name the client checks (%q): connect by a name the certificate holds, or set Conn.TLS.ServerName to one", hostname.Host)
	case errors.As(err, &invalid):
		return "the brokers' certificate is not valid (expired, not yet valid, or not for a server): renew it on the brokers, or check the clock; Conn.TLS decides what the client accepts"
	case strings.Contains(msg, "remote error: tls:"):
		return "the broker refused the TLS handshake: on a listener that requires client certificates (ssl.client.auth=required) set Conn.TLS.Certificates to a certificate, not expired, that a CA the brokers trust signed"
	case strings.Contains(msg, "speaking to a tls endpoint"):
		return "the listener speaks TLS and the client plaintext: set Conn.TLS (with the CA of the brokers' certificates in RootCAs), or use the brokers' plaintext listener"
	}
	return ""
}

// unreachableError is a failure to reach the cluster, as explain words it.
type unreachableError struct{ error }

func (e unreachableError) Unwrap() error { return e.error }

// untilReachable runs check until it succeeds, fails for another reason
// than an unreachable cluster, or ctx ends: a start during a broker's
// restart waits for it (stream.Options.CheckTimeout bounds the wait), a
// wrong address is reported when the wait ends.
func untilReachable(ctx context.Context, check func() error) error {
	began := time.Now()
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 2*time.Second) {
		err := check()
		if err == nil || !errors.As(err, new(unreachableError)) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (still so after trying for %v)", err, time.Since(began).Round(time.Millisecond))
		case <-time.After(backoff):
		}
	}
}

// refused returns the error for an operation the brokers refused for lack
// of an ACL: it names the principal, the resource and the ACL to grant on
// it (the operation grant, which may imply the one refused: Read and Write
// imply Describe); nil when err is no ACL refusal. Retrying cannot grant
// an ACL: the error is permanent.
func (c *Conn) refused(err error, grant, resource string) error {
	if err == nil || !isAuthorization(err) {
		return nil
	}
	return sink.Permanent(fmt.Errorf("kafka: the brokers %v refused %s access to %s: grant it the ACL %s on %s (docs/kafka.md, \"ACLs\"): %w",
		c.Brokers, c.principal(), resource, grant, resource, err))
}

// principal names the principal the brokers see for c.
func (c *Conn) principal() string {
	switch {
	case c.SASL.User != "":
		return "User:" + c.SASL.User
	case c.TLS != nil && len(c.TLS.Certificates) > 0:
		return "the principal of the client certificate (Conn.TLS.Certificates)"
	}
	return "this client's principal"
}

// isAuthorization reports whether err is an ACL refusal.
func isAuthorization(err error) bool {
	return errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.GroupAuthorizationFailed) ||
		errors.Is(err, kerr.ClusterAuthorizationFailed) || errors.Is(err, kerr.TransactionalIDAuthorizationFailed)
}
