package stream_test

import (
	"context"
	"strings"
	"testing"

	"github.com/exactlyonce/exactly/source"
	"github.com/exactlyonce/exactly/stream"
)

// toldWatermarks is counting whose readers tell their split's watermark
// (source.WatermarkReader): wm, whatever the records say.
type toldWatermarks struct {
	counting
	wm int64
}

func (s toldWatermarks) Open(ctx context.Context, split string, pos []byte) (source.Reader[int], error) {
	r, err := s.counting.Open(ctx, split, pos)
	return &toldReader{Reader: r, wm: s.wm}, err
}

type toldReader struct {
	source.Reader[int]
	wm int64
}

func (r *toldReader) Watermark() (int64, bool) { return r.wm, false }
func (r *toldReader) ResumeWatermark(int64)    {}

// TestWatermarkReaderNeedsEventTime: a source whose splits tell their
// watermark (a Kafka source with Upstreams) read without event time would
// drop the watermarks its upstream sends; the start fails naming the fix.
func TestWatermarkReaderNeedsEventTime(t *testing.T) {
	j := stream.New("told")
	stream.SinkTo(stream.Source(j, "in", toldWatermarks{counting: counting{n: 10, splits: 1}}), "out", newMemSink[int]())
	err := j.Run(context.Background(), stream.Options{CheckpointDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "stream.SourceWithEventTime") {
		t.Fatalf("Run = %v, want an error naming stream.SourceWithEventTime", err)
	}
}
