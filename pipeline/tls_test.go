package pipeline

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/exactlyonce/exactly/internal/kafkatest"
	"github.com/exactlyonce/exactly/internal/testenv"
)

// TestKafkaOverTLS runs a pipeline that reads as a SCRAM-SHA-512 user over
// the test broker's SASL_SSL listener, its password given as ${VAR}, and
// writes as the mTLS user over its client-certificate listener, each with
// the CA, certificate and key named in its tls section: every record is
// committed once.
func TestKafkaOverTLS(t *testing.T) {
	brokers := testenv.Kafka(t)
	name := strings.ReplaceAll(kafkatest.UniqueName("pipeline-tls"), "-", "_")
	in, out := name+"_in", name+"_out"
	cl := createTopics(t, brokers, in, out)
	sec := kafkatest.NewSecured(t, kadm.NewClient(cl), name)
	var keys, values, want []string
	for i := range 20 {
		keys = append(keys, fmt.Sprintf("k%d", i%3))
		values = append(values, fmt.Sprintf("v%d", i))
		want = append(want, fmt.Sprintf(`{"value":"v%d"}`, i))
	}
	produce(t, cl, in, keys, values)
	dir := sec.TLSDir
	src := fmt.Sprintf(`
name: %s
source:
  kind: kafka
  brokers: [%q]
  topics: [%s]
  bounded: true
  sasl: {mechanism: SCRAM-SHA-512, user: %s, password: "${KAFKA_PASSWORD}"}
  tls: {ca_file: %s}
decode: {format: raw}
sink:
  kind: kafka
  brokers: [%q]
  topic: %s
  tls: {ca_file: %s, cert_file: %s, key_file: %s}
checkpoint: {interval: 100ms}
`, name, sec.SASLSSL, in, sec.User, filepath.Join(dir, "ca.crt"), sec.MTLS, out,
		filepath.Join(dir, "ca.crt"), filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key"))
	t.Chdir(t.TempDir())
	p, err := Parse("tls.yaml", []byte(src), func(v string) (string, bool) {
		if v == "KAFKA_PASSWORD" {
			return sec.Password, true
		}
		return "", false
	})
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := p.Run(context.Background(), RunOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}); err != nil {
		t.Fatal(err)
	}
	t.Logf("the pipeline ran in %v", time.Since(began).Round(time.Millisecond))
	var got []string
	for _, r := range kafkatest.ReadCommitted(t, brokers, out, len(want), 30*time.Second) {
		got = append(got, string(r.Value))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("committed %q, want %q", got, want)
	}
}
