package stream

import (
	"github.com/exactlyonce/exactly/state"
)

// JoinOption configures an [InnerJoin]: [StateTTL], and the options of
// every operator ([Parallelism]).
type JoinOption interface{ applyJoin(*joinConfig) }

// joinConfig is what the options of an InnerJoin set.
type joinConfig struct {
	ttl   *state.TTL
	keyed []KeyedOption
}

type joinOption func(*joinConfig)

func (o joinOption) applyJoin(c *joinConfig) { o(c) }

func (o AnyOption) applyJoin(c *joinConfig) { c.keyed = append(c.keyed, o) }

// StateTTL bounds the state of an [InnerJoin]: each record it keeps
// expires ttl.After after it was stored (by default in event time, the
// join's watermark: see state.TTL), and a record of the other input
// arriving later no longer matches it. Default: records are kept forever,
// and the state grows with every record of every key.
func StateTTL(ttl state.TTL) JoinOption {
	return joinOption(func(c *joinConfig) { c.ttl = &ttl })
}

// InnerJoin joins two keyed streams without time bounds: for each key it
// emits join(key, a, b) once for every record a of the first input and b
// of the second, as soon as the later of the two arrives. Every record is
// kept in checkpointed state to meet the records of the other input still
// to come: forever, unless [StateTTL] lets them expire. Event times are
// not used (in's Time1 and Time2 may be nil); a state TTL in event time
// reads the watermark. The output of a pair does not depend on the order
// in which the two inputs' records interleave, only whether a record
// expired before its match came does. name must be unique and stable: the
// kept records are checkpointed under it.
//
// Only the inner join is built: an outer join would emit a record without
// a match at once and must take it back (a retraction) when the match
// arrives, which the engine's sinks have no way to express yet.
func InnerJoin[K comparable, A, B, OUT any](a KeyedStream[K, A], b KeyedStream[K, B], name string,
	in JoinInputs[A, B], join func(key K, a A, b B) OUT, opts ...JoinOption) Stream[OUT] {
	var c joinConfig
	for _, o := range opts {
		o.applyJoin(&c)
	}
	j := a.s.job
	if c.ttl != nil && c.ttl.After <= 0 {
		j.fail("InnerJoin %q: StateTTL After = %v: use a positive duration such as time.Hour", name, c.ttl.After)
	}
	checkJoin(j, "InnerJoin", name, in, false, join == nil)
	var stateOpts []state.Option
	if c.ttl != nil {
		stateOpts = append(stateOpts, state.WithTTL(*c.ttl))
	}
	return connect(a, b, "InnerJoin", name, func(ctx *Context[K]) (ProcessFunc[K, either[A, B], OUT], error) {
		kept1, err := state.NewListState(ctx.State(), "kept1", in.Codec1, stateOpts...)
		if err != nil {
			return ProcessFunc[K, either[A, B], OUT]{}, err
		}
		kept2, err := state.NewListState(ctx.State(), "kept2", in.Codec2, stateOpts...)
		if err != nil {
			return ProcessFunc[K, either[A, B], OUT]{}, err
		}
		return ProcessFunc[K, either[A, B], OUT]{
			Process: func(ctx *Context[K], v either[A, B], out *Output[OUT]) error {
				if v.second {
					for a := range kept1.All() {
						out.Emit(join(ctx.Key(), a, v.b))
					}
					kept2.Add(v.b)
					return nil
				}
				for b := range kept2.All() {
					out.Emit(join(ctx.Key(), v.a, b))
				}
				kept1.Add(v.a)
				return nil
			},
		}, nil
	}, c.keyed)
}
