package stream

// WindowCoGroup groups two keyed streams per event-time window: for each
// key and window of w ([Tumbling], [Sliding] or [Session], as in
// [WindowJoin]) in which either input has records, it calls
// cogroup(key, window, as, bs, out) with all of the window's records of
// each input, in arrival order, when the watermark passes the window's
// end. One of as and bs may be empty: that is how outer joins are written
// (a left outer join emits each a with its matches, or alone when bs is
// empty), as are anti joins and per-window comparisons of two streams.
// The lists are only valid during the call.
//
// Options: [AllowedLateness] keeps a window's records for that long after
// it fired; a record arriving meanwhile calls cogroup again with every
// record of the window and [Window].Firing > 0, whose results update the
// earlier ones (the function decides what an update is: for example, emit
// only the pairs with the late record, or the whole result again for an
// upsert sink). Late records beyond it go to [JoinInputs].Late1 and
// Late2 (the [LateRecords] option does not apply: a cogroup has two
// inputs) and are counted in [Metrics].LateRecords. [Parallelism] and the
// other options of every operator apply. State and its limits are those
// of WindowJoin. name must be unique and stable: the open windows are
// checkpointed under it.
func WindowCoGroup[K comparable, A, B, OUT any](a KeyedStream[K, A], b KeyedStream[K, B], name string, w Windows,
	in JoinInputs[A, B], cogroup func(key K, w Window, as []A, bs []B, out *Output[OUT]), opts ...WindowOption) Stream[OUT] {
	j := a.s.job
	checkJoin(j, "WindowCoGroup", name, in, true, cogroup == nil)
	var c windowConfig
	for _, o := range opts {
		o.applyWindow(&c)
	}
	switch {
	case c.late != nil:
		j.fail("WindowCoGroup %q: the LateRecords option does not apply to two inputs: set JoinInputs.Late1 and Late2", name)
	case c.lateness < 0:
		j.fail("WindowCoGroup %q: AllowedLateness(%v) is negative: use 0 (no lateness) or a positive duration", name, c.lateness)
	}
	result := func(key K, w Window, p windowPairs[A, B], out *Output[OUT]) { cogroup(key, w, p.first, p.second, out) }
	return windowBoth(a, b, "WindowCoGroup", name, w, in, result, c.lateness, c.keyed)
}
