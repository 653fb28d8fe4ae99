package store

import (
	"bytes"
	"errors"
	"testing"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/format"
	"github.com/exactlyonce/exactly/internal/vfs"
)

// FuzzReadState feeds arbitrary state files to ReadState, with a handle
// whose size and checksum match so that decoding is reached. It must never
// panic, must report every failure as ErrCorrupt, and whatever it accepts
// must encode back to the same bytes (the encoding is canonical).
func FuzzReadState(f *testing.F) {
	for _, snap := range []checkpoint.SubtaskSnapshot{
		{},
		snapshotFor(3, "op", 1),
		{Entries: [][]byte{[]byte("x"), nil}},
	} {
		b, err := format.EncodeState(snap)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("EXSTATE\x00\x00\x00\x00\x01\xff\xff\xff\xff\xff\xff\xff\xff"))
	s := mustOpen(f, testDir, Options{FS: vfs.NewCrashableMem()})
	f.Fuzz(func(t *testing.T, file []byte) {
		h, err := s.WriteState(1, checkpoint.KindCheckpoint, "op", 0, checkpoint.SubtaskSnapshot{})
		if err != nil {
			t.Fatal(err)
		}
		// Reseal the fuzzed payload half the time, so that decoding is
		// reached more often than the checksum lets it.
		if len(file) > 0 && file[0]&1 == 1 {
			file = format.Seal(format.StateMagic, append(format.NewEnvelope(len(file)), file[1:]...))
		}
		overwrite(t, s.fs, s.Dir(1, checkpoint.KindCheckpoint)+"/"+h.File, file)
		h.Size, h.CRC32C = int64(len(file)), format.Checksum(file)
		snap, err := s.ReadState(1, checkpoint.KindCheckpoint, h)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNewerVersion) {
				t.Fatalf("error not marked corrupt: %v", err)
			}
			return
		}
		again, err := format.EncodeState(snap)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, file) {
			t.Fatalf("accepted %x but it encodes back as %x", file, again)
		}
	})
}
