package stream

import (
	"time"

	"github.com/exactlyonce/exactly/state"
)

// newFixedWindows returns the functions of tumbling and sliding windows:
// a key's panes are kept by window start in a map state, each window
// fires with an event-time timer at its end, and, with lateness, expires
// with another at its end plus the lateness.
func newFixedWindows[K comparable, T, A, OUT any](ctx *Context[K], wd windowing[K, T, A, OUT], size, slide int64) (ProcessFunc[K, T, OUT], error) {
	// Without lateness the state keeps its earlier name and encoding.
	name := "windows"
	if wd.lateness > 0 {
		name = "windows-late"
	}
	panes, err := state.NewMapState(ctx.State(), name, state.Int64Codec{}, paneCodec[A]{acc: wd.agg.Codec, compact: wd.lateness == 0})
	if err != nil {
		return ProcessFunc[K, T, OUT]{}, err
	}
	return ProcessFunc[K, T, OUT]{
		Process: func(ctx *Context[K], v T, out *Output[OUT]) error {
			t := wd.timestamp(v).UnixNano()
			windows, expired := 0, 0
			for start := t - mod(t, slide); start > t-size; start -= slide {
				windows++
				end := start + size
				if wd.expired(end, ctx.watermark) {
					expired++
					continue
				}
				panes.Compute(start, func(p pane[A], _ bool) pane[A] {
					if !p.pending {
						// The window's first record, or its first since it
						// fired: a timer at or before the watermark fires
						// with the next one.
						ctx.RegisterEventTimer(time.Unix(0, end-1))
					}
					p.acc = wd.agg.Add(p.acc, v)
					p.pending = true
					return p
				})
			}
			if windows > 0 && expired == windows {
				wd.lateRecord(ctx, v, out)
			}
			return nil
		},
		// A timer at when is the end of the window starting at
		// when+1-size, and the expiry of the one starting lateness
		// earlier; with sliding windows both may exist.
		OnEventTimer: func(ctx *Context[K], when time.Time, out *Output[OUT]) error {
			end := when.UnixNano() + 1
			if p, ok := panes.Get(end - size); ok && p.pending {
				p = wd.fire(ctx, end-size, end, p, out)
				if wd.expired(end, ctx.watermark) {
					panes.Remove(end - size)
				} else {
					panes.Put(end-size, p)
					ctx.RegisterEventTimer(wd.cleanupAt(end))
				}
			}
			if wd.lateness > 0 {
				start := end - wd.lateness - size
				if p, ok := panes.Get(start); ok && !p.pending && wd.expired(start+size, ctx.watermark) {
					panes.Remove(start)
				}
			}
			return nil
		},
	}, nil
}
