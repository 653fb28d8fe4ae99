package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/testenv"
)

// BenchmarkCheckpoint measures one whole checkpoint of the test job (2
// operators × 2 subtasks of small state: reserve an id, write 4 state
// files, complete, apply retention) in a local directory and on the test
// S3 server: the fixed cost a checkpoint interval pays for its storage.
func BenchmarkCheckpoint(b *testing.B) {
	run := func(b *testing.B, s Storage) {
		if _, err := s.Acquire(context.Background(), OwnershipOptions{Lease: time.Minute, Wait: time.Nanosecond}); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := tryCheckpoint(s, checkpoint.KindCheckpoint); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("dir", func(b *testing.B) { run(b, mustOpen(b, b.TempDir(), Options{})) })
	b.Run("s3", func(b *testing.B) {
		endpoint := testenv.S3(b)
		raw := make([]byte, 6)
		_, _ = rand.Read(raw)
		location := "s3://" + testenv.S3Bucket + "/bench-" + hex.EncodeToString(raw) + "?endpoint=" + endpoint
		s, err := OpenObject(location, Options{Logger: discardLogger()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.RemoveAll() })
		run(b, s)
	})
}

func discardLogger() *slog.Logger { l, _ := logBuffer(); return l }
