// Package stream is the typed API for writing exactly-once streaming jobs.
//
// A job is built from a [Job] with generic functions: [Source] reads a
// source; [Map], [Filter] and [FlatMap] transform records; [KeyBy] partitions
// a stream by key and [Process] runs a function with keyed state and
// processing-time and event-time timers on it; [WindowAggregate] aggregates
// it per event-time window ([Tumbling], [Sliding], [Session]), with
// [AllowedLateness] for late records; [CoProcess] runs a function of two
// keyed streams sharing keyed state and timers, on which the joins are
// built: [IntervalJoin] and [WindowJoin] on event time, [InnerJoin]
// without time bounds (its state bounded by [StateTTL]); [SideOutput] takes a second stream
// out of a process function (an [OutputTag] it emits to with [EmitTo]);
// [Union] merges streams; [SinkTo] writes a stream to an exactly-once
// sink. [Job.Run] executes the job. docs/operators.md describes every
// operator and what each sink shows of its output.
//
// Event time starts at a source: [SourceWithEventTime] tracks it per split
// and sends watermarks downstream (see docs/event-time.md).
//
//	j := stream.New("orders")
//	orders := stream.Source(j, "orders", src)
//	keyed := stream.KeyBy(orders, func(o Order) string { return o.Customer }, state.StringCodec{})
//	totals := stream.Process(keyed, "totals", setupTotals)
//	stream.SinkTo(totals, "db", dbSink)
//	err := j.Run(ctx, stream.Options{CheckpointDir: "ckpt"})
//
// Names given to sources, keyed process functions and sinks must be unique
// in the job and stable across versions of it: checkpointed state is matched
// to operators by name. Stateless operators get generated names.
//
// Stateless operators inherit the parallelism of their input and are
// chained to it, so a record passes through them by function calls. A
// different parallelism, set with [Parallelism], makes the edge rebalance.
package stream
