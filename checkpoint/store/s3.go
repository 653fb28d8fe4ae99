package store

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// s3Location is a parsed s3:// URL: s3://bucket/prefix?endpoint=…&region=….
type s3Location struct {
	bucket, prefix string
	endpoint       string // host[:port]
	secure         bool   // https
	region         string
}

// parseS3URL parses raw, an s3:// URL. The endpoint defaults to AWS
// (s3.amazonaws.com, or the region's); endpoint=http://host:port selects
// plain HTTP, as for a test server on loopback.
func parseS3URL(raw string) (s3Location, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// Not shown: a URL that does not parse may still hold a secret.
		return s3Location{}, errors.New("checkpoint storage: the s3:// URL does not parse (not shown, it may hold a secret): write s3://bucket/prefix?endpoint=host:port&region=region")
	}
	if u.Scheme != "s3" {
		return s3Location{}, fmt.Errorf("checkpoint storage %s: scheme %q: want s3://bucket/prefix", redactURL(u), u.Scheme)
	}
	if u.Host == "" {
		return s3Location{}, fmt.Errorf("checkpoint storage %s: no bucket: write s3://bucket/prefix", redactURL(u))
	}
	if u.User != nil {
		return s3Location{}, fmt.Errorf("checkpoint storage %s: credentials in the URL are not accepted (they would end up in logs): use AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or ~/.aws/credentials", redactURL(u))
	}
	loc := s3Location{bucket: u.Host, prefix: strings.Trim(u.Path, "/"), secure: true}
	q := u.Query()
	for k := range q {
		if k != "endpoint" && k != "region" {
			return s3Location{}, fmt.Errorf("checkpoint storage %s: unknown parameter %q (its value not shown): the parameters are endpoint and region", redactURL(u), k)
		}
	}
	loc.region = q.Get("region")
	if loc.region == "" {
		loc.region = os.Getenv("AWS_REGION")
	}
	switch ep := q.Get("endpoint"); {
	case ep == "" && loc.region != "":
		loc.endpoint = "s3." + loc.region + ".amazonaws.com"
	case ep == "":
		loc.endpoint = "s3.amazonaws.com"
	case strings.HasPrefix(ep, "http://"):
		loc.endpoint, loc.secure = strings.TrimPrefix(ep, "http://"), false
	default:
		loc.endpoint = strings.TrimPrefix(ep, "https://")
	}
	if loc.endpoint == "" || strings.Contains(loc.endpoint, "/") {
		return s3Location{}, fmt.Errorf("checkpoint storage %s: endpoint %q: want host:port, optionally after http:// or https://", redactURL(u), q.Get("endpoint"))
	}
	return loc, nil
}

// redactURL returns u without its user information and with only the
// names of its query parameters.
func redactURL(u *url.URL) string {
	c := *u
	c.User = nil
	q := url.Values{}
	for k := range u.Query() {
		q.Set(k, "…")
	}
	if k := u.Query().Get("endpoint"); k != "" {
		q.Set("endpoint", k)
	}
	c.RawQuery = q.Encode()
	return c.String()
}

// s3Bucket is a bucket on an S3-compatible server, through minio-go.
// Credentials come from the standard AWS environment variables
// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), then the
// shared credentials file (~/.aws/credentials, AWS_PROFILE), then the
// instance's IAM role; they are never logged.
type s3Bucket struct {
	cl  *minio.Client
	loc s3Location
}

// newS3Bucket connects to loc's server.
func newS3Bucket(loc s3Location) (*s3Bucket, error) {
	creds := credentials.NewChainCredentials([]credentials.Provider{
		&credentials.EnvAWS{},
		&credentials.FileAWSCredentials{},
		&credentials.IAM{Client: &http.Client{Transport: http.DefaultTransport}},
	})
	transport, err := minio.DefaultTransport(loc.secure)
	if err != nil {
		return nil, fmt.Errorf("checkpoint storage s3://%s: %w", loc.bucket, err)
	}
	if loc.secure {
		if transport.TLSClientConfig.RootCAs, err = caBundle(); err != nil {
			return nil, fmt.Errorf("checkpoint storage s3://%s: %w", loc.bucket, err)
		}
	}
	cl, err := minio.New(loc.endpoint, &minio.Options{Creds: creds, Secure: loc.secure, Region: loc.region,
		Transport: serverDates{transport}})
	if err != nil {
		return nil, fmt.Errorf("checkpoint storage s3://%s: %w", loc.bucket, err)
	}
	return &s3Bucket{cl: cl, loc: loc}, nil
}

// caBundleEnv names the variable that holds the PEM file of the CAs an S3
// server's certificate is checked against, as for the AWS SDKs and CLI.
const caBundleEnv = "AWS_CA_BUNDLE"

// caBundle returns the CAs of the file AWS_CA_BUNDLE names, or nil (the
// system's) if it is not set.
func caBundle() (*x509.CertPool, error) {
	file := os.Getenv(caBundleEnv)
	if file == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: set it to the PEM file of the CA that signed the S3 server's certificate, or unset it for the system's CAs", caBundleEnv, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s=%s holds no PEM certificate: set it to the PEM file of the CA that signed the S3 server's certificate", caBundleEnv, file)
	}
	return pool, nil
}

// ErrRefused is wrapped by the errors of an S3 server whose TLS
// connection this process refuses (a certificate it cannot verify) or
// cannot make (plain HTTP where HTTPS was asked), and of one that does not
// know the access key or finds the signature wrong (a wrong secret key):
// retrying cannot fix them, so a job stops at once instead of waiting for
// the storage. (AccessDenied is retried: a policy takes effect a moment
// after it is changed.)
var ErrRefused = errors.New("checkpoint/store: the storage refuses the connection or the credentials")

// tlsFix returns what to fix when err is a refused TLS connection to the
// S3 server, or "" when it is not one; refused says whether the error is
// certain to recur ([ErrRefused]).
func (b *s3Bucket) tlsFix(err error) (fix string, refused bool) {
	fix = b.tlsHint(err)
	if fix == "" {
		return "", false
	}
	return fix, !strings.Contains(fix, "closed the connection")
}

// tlsHint is tlsFix's text.
func (b *s3Bucket) tlsHint(err error) string {
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	var header tls.RecordHeaderError
	switch {
	case errors.As(err, &unknown):
		return fmt.Sprintf("the S3 server's certificate is not signed by a CA this process trusts: set %s to the PEM file of the CA that signed it (unset: the system's CAs)", caBundleEnv)
	case errors.As(err, &host):
		return fmt.Sprintf("the S3 server's certificate does not hold the name %q: set endpoint= to a name the certificate holds", b.loc.endpoint)
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return "the S3 server's certificate has expired or is not valid yet: renew it, or check this machine's clock"
	case errors.As(err, &invalid):
		return "the S3 server's certificate is not valid for a server: have it reissued for TLS server authentication"
	case errors.As(err, &header) || strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return "the server speaks plain HTTP: write endpoint=http://host:port, or use its HTTPS port"
	case !b.loc.secure && strings.Contains(err.Error(), "Connection closed by foreign host"):
		// minio-go's words for a connection closed before any response,
		// which is what an HTTPS server does with a plain request (and
		// also a proxy with no server behind it: not certain).
		return "the server closed the connection without answering: if it speaks HTTPS, write endpoint=https://host:port (or host:port)"
	}
	return ""
}

// serverDates is a transport that records the Date of each response in the
// *time.Time its request's context holds under serverDateKey, if any.
type serverDates struct{ http.RoundTripper }

// serverDateKey is the context key of serverDates.
type serverDateKey struct{}

func (t serverDates) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.RoundTripper.RoundTrip(r)
	if at, ok := r.Context().Value(serverDateKey{}).(*time.Time); ok && err == nil {
		if d, perr := http.ParseTime(resp.Header.Get("Date")); perr == nil {
			*at = d
		}
	}
	return resp, err
}

// s3Err turns minio's error for key into one that wraps fs.ErrNotExist or
// errPrecondition where it means that, and says what to fix otherwise.
func (b *s3Bucket) s3Err(doing, key string, err error) error {
	code := minio.ToErrorResponse(err).Code
	where := fmt.Sprintf("checkpoint storage: %s %s", doing, b.url(key))
	switch code {
	case "NoSuchKey":
		return fmt.Errorf("%s: %w", where, fs.ErrNotExist)
	case "PreconditionFailed":
		return fmt.Errorf("%s: %w", where, errPrecondition)
	case "ConditionalRequestConflict":
		// 409: another conditional write of the key was in progress, and
		// this one was refused, not applied: a lost race like a failed
		// condition, not a write of unknown outcome.
		return fmt.Errorf("%s: a concurrent conditional write won (409 %s): %w", where, code, errPrecondition)
	case "NoSuchBucket":
		return fmt.Errorf("%s: bucket %q does not exist on %s: create it first: %w", where, b.loc.bucket, b.loc.endpoint, err)
	case "InvalidAccessKeyId", "SignatureDoesNotMatch":
		return fmt.Errorf("%s: the server refuses the credentials (%s): set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or ~/.aws/credentials) to a key of the server, allowed to read, write, list and delete in the bucket: %w", where, code, errors.Join(err, ErrRefused))
	case "AccessDenied":
		return fmt.Errorf("%s: access denied (%s): set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or ~/.aws/credentials) to a key allowed to read, write, list and delete in the bucket: %w", where, code, err)
	}
	if fix, refused := b.tlsFix(err); refused {
		return fmt.Errorf("%s: %s: %w", where, fix, errors.Join(err, ErrRefused))
	} else if fix != "" {
		return fmt.Errorf("%s: %s: %w", where, fix, err)
	}
	return fmt.Errorf("%s: %w", where, err)
}

func (b *s3Bucket) get(ctx context.Context, key string) ([]byte, string, error) {
	// The client pins a read to the object's entity tag after its first
	// request (If-Match): an object overwritten meanwhile (the manifest,
	// which its owner renews) answers 412. That read is made again.
	for attempt := 1; ; attempt++ {
		data, etag, err := b.getOnce(ctx, key)
		if err == nil || !errors.Is(err, errPrecondition) || attempt == maxOverwrittenReads {
			return data, etag, err
		}
	}
}

// maxOverwrittenReads bounds the reads of an object that keeps being
// overwritten while it is read.
const maxOverwrittenReads = 5

// getOnce reads an object once; see get.
func (b *s3Bucket) getOnce(ctx context.Context, key string) ([]byte, string, error) {
	obj, err := b.cl.GetObject(ctx, b.loc.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, "", b.s3Err("reading", key, err)
	}
	defer obj.Close()
	data, err := io.ReadAll(obj)
	if err != nil {
		return nil, "", b.s3Err("reading", key, err)
	}
	// After the read the client knows the object's information: no
	// second request.
	st, err := obj.Stat()
	if err != nil {
		return nil, "", b.s3Err("reading", key, err)
	}
	return data, st.ETag, nil
}

func (b *s3Bucket) copyTo(ctx context.Context, key string, w io.Writer) (int64, error) {
	obj, err := b.cl.GetObject(ctx, b.loc.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return 0, b.s3Err("reading", key, err)
	}
	defer obj.Close()
	n, err := io.Copy(w, obj)
	if err != nil {
		return n, b.s3Err("reading", key, err)
	}
	return n, nil
}

// partBytes is the size of the parts of an upload in parts: the memory it
// holds, which the state backends' memory budget leaves out (see
// state.Memory). S3 takes parts of 5 MiB and more.
const partBytes = 8 << 20

func (b *s3Bucket) put(ctx context.Context, key string, body io.Reader, size int64, cond putCondition) (string, error) {
	// A conditional write (the manifest, a checkpoint's metadata: small)
	// is one PUT, which the condition applies to. Others are uploaded in
	// parts once larger than one part, so that an object of state is not
	// capped at the 5 GiB of a single PUT on AWS S3 (with 10,000 parts of
	// partBytes, at 78 GiB). An upload in parts holds one part in memory.
	opts := minio.PutObjectOptions{ContentType: "application/octet-stream", DisableMultipart: cond.ifAbsent || cond.ifMatch != "", PartSize: partBytes}
	switch {
	case cond.ifAbsent:
		opts.SetMatchETagExcept("*")
	case cond.ifMatch != "":
		opts.SetMatchETag(cond.ifMatch)
	}
	info, err := b.cl.PutObject(ctx, b.loc.bucket, key, body, size, opts)
	if err != nil {
		return "", b.s3Err("writing", key, err)
	}
	return info.ETag, nil
}

func (b *s3Bucket) size(ctx context.Context, key string) (int64, error) {
	st, err := b.cl.StatObject(ctx, b.loc.bucket, key, minio.StatObjectOptions{})
	if err != nil {
		return 0, b.s3Err("checking", key, err)
	}
	return st.Size, nil
}

func (b *s3Bucket) age(ctx context.Context, key string) (objectAge, error) {
	var now time.Time
	st, err := b.cl.StatObject(context.WithValue(ctx, serverDateKey{}, &now), b.loc.bucket, key, minio.StatObjectOptions{})
	if err != nil {
		return objectAge{}, b.s3Err("checking", key, err)
	}
	if now.IsZero() || st.LastModified.IsZero() {
		return objectAge{etag: st.ETag}, nil
	}
	return objectAge{etag: st.ETag, age: now.Sub(st.LastModified), known: true}, nil
}

func (b *s3Bucket) list(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	for obj := range b.cl.ListObjects(ctx, b.loc.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if obj.Err != nil {
			return nil, b.s3Err("listing", prefix, obj.Err)
		}
		keys = append(keys, obj.Key)
	}
	slices.Sort(keys)
	return keys, nil
}

func (b *s3Bucket) remove(ctx context.Context, key string) error {
	err := b.cl.RemoveObject(ctx, b.loc.bucket, key, minio.RemoveObjectOptions{})
	if err != nil && !errors.Is(b.s3Err("", key, err), fs.ErrNotExist) {
		return b.s3Err("removing", key, err)
	}
	return nil
}

func (b *s3Bucket) url(key string) string { return "s3://" + b.loc.bucket + "/" + key }
