package pipeline

import (
	"crypto/tls"
	"crypto/x509"
	"os"

	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/pipeline/internal/config"
)

// configTLS is the schema's TLS section.
type configTLS = config.TLS

// kafkaConn returns the connection of a kafka source or sink: its brokers,
// SASL and TLS, with the TLS files read now, so that a missing or
// malformed one is reported at its line in the pipeline's file.
func (p *plan) kafkaConn(brokers []string, s *configSASL, t *configTLS) (kafka.Conn, error) {
	conn := kafka.Conn{Brokers: brokers, SASL: sasl(s)}
	if t == nil {
		return conn, nil
	}
	c := &tls.Config{ServerName: t.ServerName, MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return conn, p.doc.Errorf(&t.CAFile, "tls.ca_file: %v: give the PEM file of the CA that signed the brokers' certificates", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return conn, p.doc.Errorf(&t.CAFile, "tls.ca_file %s holds no PEM certificate: give the CA's certificate (-----BEGIN CERTIFICATE-----)", t.CAFile)
		}
		c.RootCAs = pool
	}
	switch {
	case t.CertFile != "" && t.KeyFile != "":
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return conn, p.doc.Errorf(&t.CertFile, "tls.cert_file %s with tls.key_file %s: %v: give a PEM certificate and its PEM private key", t.CertFile, t.KeyFile, err)
		}
		c.Certificates = []tls.Certificate{cert}
	case t.CertFile != "":
		return conn, p.doc.Errorf(&t.CertFile, "tls.cert_file is given without tls.key_file: give the certificate's private key too")
	case t.KeyFile != "":
		return conn, p.doc.Errorf(&t.KeyFile, "tls.key_file is given without tls.cert_file: give the certificate too")
	}
	conn.TLS = c
	return conn, nil
}

// tlsPaths returns the paths of a TLS section, for resolvePaths.
func tlsPaths(t *configTLS) []*string {
	if t == nil {
		return nil
	}
	return []*string{&t.CAFile, &t.CertFile, &t.KeyFile}
}
