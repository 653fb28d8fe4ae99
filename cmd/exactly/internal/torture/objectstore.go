package torture

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/exactlyonce/exactly/checkpoint/store"
)

// The object-storage faults, made when the job keeps its checkpoints on
// the S3 server (Config.S3) instead of a local directory.
const (
	FaultS3Restart  = "s3-restart"     // SIGKILL and restart of the S3 server
	FaultSlowUpload = "s3-slow-upload" // uploads throttled to 1 KB/s for longer than the checkpoint timeout

	groupObjectStore = "objectstore"
	// s3Bucket is the bucket scripts/s3.sh creates.
	s3Bucket = "exactly-test"
	// s3ProxyOffset is the distance of toxiproxy's S3 port from the server's.
	s3ProxyOffset = 10
)

// objectStorage is where the job's checkpoints are on the S3 server.
type objectStorage struct {
	// direct is the checkpoints' location reached without the proxy, for
	// the injector's own reads and the cleanup.
	direct string
	// data is the posix backend's directory holding the objects, where
	// the checkpoint-corrupt fault flips a bit of one.
	data string
}

// setupObjectStorage points jc's checkpoints at a new prefix on the S3
// server at endpoint (http://host:port), through toxiproxy when there is
// one, and adds the object-storage faults. The undo it returns removes the
// proxy.
func (in *injector) setupObjectStorage(ctx context.Context, endpoint, prefix string, jc *jobConfig) (undo func() error, err error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme != "http" || u.Port() == "" {
		return nil, fmt.Errorf("torture: S3 endpoint %q: want http://host:port (scripts/s3.sh prints it as EXACTLY_S3)", endpoint)
	}
	port, _ := strconv.Atoi(u.Port())
	dataDir := os.Getenv("S3_DIR")
	if dataDir == "" {
		dataDir = filepath.Join(filepath.Dir(in.scripts), ".tmp", "s3")
	}
	in.s3 = &objectStorage{
		direct: "s3://" + s3Bucket + "/" + prefix + "?endpoint=" + endpoint,
		data:   filepath.Join(dataDir, "data", s3Bucket, prefix),
	}
	in.ckpt = in.s3.data
	jobEndpoint := endpoint
	undo = func() error { return nil }
	if in.tp != nil {
		proxy := net.JoinHostPort(u.Hostname(), strconv.Itoa(port+s3ProxyOffset))
		if err := in.tp.proxy(ctx, "s3", proxy, u.Host); err != nil {
			return nil, err
		}
		undo = func() error { return in.tp.remove(context.Background(), "s3") }
		jobEndpoint = "http://" + proxy
	}
	jc.Checkpoints = "s3://" + s3Bucket + "/" + prefix + "?endpoint=" + jobEndpoint
	in.groups = append(in.groups, groupObjectStore)
	return undo, nil
}

// objectStoreKinds returns the object-storage fault kinds: the slow upload
// needs toxiproxy.
func (in *injector) objectStoreKinds() []string {
	if in.tp == nil {
		return []string{FaultS3Restart}
	}
	return []string{FaultS3Restart, FaultSlowUpload}
}

// injectObjectStore makes one object-storage fault of kind.
func (in *injector) injectObjectStore(ctx context.Context, kind string, rng *rand.Rand) error {
	switch kind {
	case FaultS3Restart:
		if err := in.script(nil, "s3.sh", "kill"); err != nil {
			return err
		}
		sleep(ctx, time.Duration(rng.Int64N(int64(2*time.Second))))
		return in.script(nil, "s3.sh", "start")
	case FaultSlowUpload:
		bg := context.Background()
		if err := in.tp.toxic(bg, "s3", "slow", "bandwidth", "upstream", map[string]any{"rate": 1}); err != nil {
			return err
		}
		sleep(ctx, checkpointTimeout+time.Second+time.Duration(rng.Int64N(int64(3*time.Second))))
		return in.tp.reset(bg, "s3", true)
	}
	return fmt.Errorf("torture: unknown object-storage fault %q", kind)
}

// newestCompletedObject returns the directory, in the S3 server's data,
// of the newest checkpoint the manifest lists; "" when there is none.
func (in *injector) newestCompletedObject() (string, error) {
	st, err := store.OpenObject(in.s3.direct, store.Options{})
	if err != nil {
		return "", err
	}
	m, err := st.Latest()
	if err != nil || m == nil {
		return "", err
	}
	return filepath.Join(in.s3.data, fmt.Sprintf("chk-%020d", m.ID)), nil
}

// removeObjectStorage deletes the run's checkpoints from the S3 server.
func (in *injector) removeObjectStorage() error {
	if in.s3 == nil {
		return nil
	}
	st, err := store.OpenObject(in.s3.direct, store.Options{})
	if err != nil {
		return err
	}
	return st.RemoveAll()
}
