package stream

import (
	"encoding/binary"
	"fmt"

	"github.com/exactlyonce/exactly/state"
)

// pane is the state of one window of one key: its accumulator, how many
// times it fired, and whether records were added since it last fired (it
// is then due to fire when the watermark passes its end).
type pane[A any] struct {
	acc     A
	firings int
	pending bool
}

// paneCodec encodes a pane as a uvarint of firings<<1 | pending, then the
// accumulator. A compact paneCodec, for windows without lateness, encodes
// the accumulator alone: such a pane never outlives its firing, so it is
// always pending and has never fired. That is the encoding of the window
// state before lateness existed, which the checkpoints of those windows
// keep.
type paneCodec[A any] struct {
	acc     state.Codec[A]
	compact bool
}

func (c paneCodec[A]) Append(dst []byte, p pane[A]) []byte {
	return c.acc.Append(c.header(dst, p), p.acc)
}

// AppendChecked is Append that reports accumulators the codec cannot
// encode, when it can tell (state.JSONCodec).
func (c paneCodec[A]) AppendChecked(dst []byte, p pane[A]) ([]byte, error) {
	if ca, ok := c.acc.(state.CheckedAppender[A]); ok {
		return ca.AppendChecked(c.header(dst, p), p.acc)
	}
	return c.Append(dst, p), nil
}

// header appends the firings and pending flag, unless c is compact.
func (c paneCodec[A]) header(dst []byte, p pane[A]) []byte {
	if c.compact {
		return dst
	}
	h := uint64(p.firings) << 1
	if p.pending {
		h |= 1
	}
	return binary.AppendUvarint(dst, h)
}

func (c paneCodec[A]) Decode(src []byte) (pane[A], error) {
	p := pane[A]{pending: true}
	if !c.compact {
		h, n := binary.Uvarint(src)
		if n <= 0 {
			return pane[A]{}, fmt.Errorf("%w: window pane: bad header", state.ErrMalformed)
		}
		p.firings, p.pending = int(h>>1), h&1 == 1
		src = src[n:]
	}
	acc, err := c.acc.Decode(src)
	if err != nil {
		return pane[A]{}, err
	}
	p.acc = acc
	return p, nil
}
