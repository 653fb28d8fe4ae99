package stream

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/exactlyonce/exactly/state"
)

// session is one session window of a key, [start, end), and its pane.
type session[A any] struct {
	start, end int64
	pane[A]
}

// newSessionWindows returns the functions of session windows: a key's
// sessions, ordered by start and disjoint, are one value of keyed state.
// Event-time timers wake the key up at the end of a session that is due to
// fire and at the expiry of one that fired; the sessions say what is due,
// so a timer that outlived the session it was set for does nothing, and
// the timers a merge no longer needs are deleted.
func newSessionWindows[K comparable, T, A, OUT any](ctx *Context[K], wd windowing[K, T, A, OUT], gap int64) (ProcessFunc[K, T, OUT], error) {
	sessions, err := state.NewValueState(ctx.State(), "sessions", sessionsCodec[A]{pane: paneCodec[A]{acc: wd.agg.Codec}})
	if err != nil {
		return ProcessFunc[K, T, OUT]{}, err
	}
	// save stores the key's sessions after a change from old, and moves
	// its timers to what the new sessions need.
	save := func(ctx *Context[K], old, now []session[A]) {
		if len(now) == 0 {
			sessions.Clear()
		} else {
			sessions.Update(now)
		}
		before, after := wd.sessionTimers(old), wd.sessionTimers(now)
		for _, t := range before {
			if !slices.Contains(after, t) {
				ctx.DeleteEventTimer(time.Unix(0, t))
			}
		}
		for _, t := range after {
			if !slices.Contains(before, t) {
				ctx.RegisterEventTimer(time.Unix(0, t))
			}
		}
	}
	return ProcessFunc[K, T, OUT]{
		Process: func(ctx *Context[K], v T, out *Output[OUT]) error {
			t := wd.timestamp(v).UnixNano()
			old, _ := sessions.Value()
			now, ok := wd.addToSessions(old, t, addSat(t, gap), v, ctx.watermark)
			if !ok {
				wd.lateRecord(ctx, v, out)
				return nil
			}
			save(ctx, old, now)
			return nil
		},
		// A key's timers due at one watermark all find the sessions
		// handled by the first: the others change nothing.
		OnEventTimer: func(ctx *Context[K], _ time.Time, out *Output[OUT]) error {
			old, _ := sessions.Value()
			now := make([]session[A], 0, len(old))
			changed := false
			for _, s := range old {
				if s.pending && s.end-1 <= ctx.watermark {
					s.pane = wd.fire(ctx, s.start, s.end, s.pane, out)
					changed = true
				}
				if !s.pending && wd.expired(s.end, ctx.watermark) {
					changed = true
					continue
				}
				now = append(now, s)
			}
			if changed {
				save(ctx, old, now)
			}
			return nil
		},
	}, nil
}

// addToSessions returns sessions with the record v, whose window is
// [start, end), added: merged with the sessions it overlaps, or as a new
// session. It returns false, and sessions unchanged, when the session v
// would be in expired at watermark wm.
func (wd *windowing[K, T, A, OUT]) addToSessions(sessions []session[A], start, end int64, v T, wm int64) ([]session[A], bool) {
	merged := session[A]{start: start, end: end}
	first, n := len(sessions), 0 // the sessions v joins: sessions[first:first+n]
	for i, s := range sessions {
		if s.start < end && start < s.end {
			if n == 0 {
				first = i
				merged.acc = s.acc
			} else {
				merged.acc = wd.agg.Merge(merged.acc, s.acc)
			}
			n++
			merged.start, merged.end = min(merged.start, s.start), max(merged.end, s.end)
			merged.firings = max(merged.firings, s.firings)
		} else if n == 0 && s.start >= end {
			first = i
			break
		}
	}
	if wd.expired(merged.end, wm) {
		return sessions, false
	}
	merged.acc = wd.agg.Add(merged.acc, v)
	merged.pending = true
	now := make([]session[A], 0, len(sessions)+1-n)
	now = append(now, sessions[:first]...)
	now = append(now, merged)
	return append(now, sessions[first+n:]...), true
}

// sessionTimers returns the event-time timers sessions need: the end of
// each one due to fire, the expiry of each one that fired.
func (wd *windowing[K, T, A, OUT]) sessionTimers(sessions []session[A]) []int64 {
	var ts []int64
	for _, s := range sessions {
		if s.pending {
			ts = append(ts, s.end-1)
		} else {
			ts = append(ts, wd.cleanupAt(s.end).UnixNano())
		}
	}
	return ts
}

// sessionsCodec encodes a key's sessions as their count, then for each its
// start (varint), its length (uvarint) and its length-prefixed pane.
type sessionsCodec[A any] struct{ pane paneCodec[A] }

func (c sessionsCodec[A]) Append(dst []byte, ss []session[A]) []byte {
	dst, _ = c.append(dst, ss, func(dst []byte, p pane[A]) ([]byte, error) { return c.pane.Append(dst, p), nil })
	return dst
}

// AppendChecked is Append that reports accumulators the codec cannot
// encode, when it can tell (state.JSONCodec).
func (c sessionsCodec[A]) AppendChecked(dst []byte, ss []session[A]) ([]byte, error) {
	return c.append(dst, ss, c.pane.AppendChecked)
}

func (c sessionsCodec[A]) append(dst []byte, ss []session[A], appendPane func([]byte, pane[A]) ([]byte, error)) ([]byte, error) {
	dst = binary.AppendUvarint(dst, uint64(len(ss)))
	var buf []byte
	for _, s := range ss {
		var err error
		if buf, err = appendPane(buf[:0], s.pane); err != nil {
			return dst, err
		}
		dst = binary.AppendVarint(dst, s.start)
		dst = binary.AppendUvarint(dst, uint64(s.end-s.start))
		dst = binary.AppendUvarint(dst, uint64(len(buf)))
		dst = append(dst, buf...)
	}
	return dst, nil
}

func (c sessionsCodec[A]) Decode(src []byte) ([]session[A], error) {
	malformed := func(what string) error { return fmt.Errorf("%w: sessions: %s", state.ErrMalformed, what) }
	count, n := binary.Uvarint(src)
	if n <= 0 || count > uint64(len(src)) {
		return nil, malformed("bad count")
	}
	src = src[n:]
	ss := make([]session[A], 0, count)
	for range count {
		start, n1 := binary.Varint(src)
		if n1 <= 0 {
			return nil, malformed("bad start")
		}
		length, n2 := binary.Uvarint(src[n1:])
		if n2 <= 0 || length == 0 || start+int64(length) < start {
			return nil, malformed("bad length")
		}
		size, n3 := binary.Uvarint(src[n1+n2:])
		rest := src[n1+n2+max(n3, 0):]
		if n3 <= 0 || size > uint64(len(rest)) {
			return nil, malformed("bad pane length")
		}
		p, err := c.pane.Decode(rest[:size])
		if err != nil {
			return nil, err
		}
		ss = append(ss, session[A]{start: start, end: start + int64(length), pane: p})
		src = rest[size:]
	}
	if len(src) != 0 {
		return nil, malformed("trailing bytes")
	}
	return ss, nil
}
