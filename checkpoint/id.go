package checkpoint

// ID identifies a checkpoint or savepoint of a job: the trigger, the
// barriers, the snapshots, the acknowledgements, the metadata and the
// sinks' committables of one checkpoint all carry its ID.
//
// IDs start at 1 and increase; within one checkpoint storage (one
// incarnation) they never repeat, across restarts and when a job is
// restored from a savepoint into another storage (the new ids continue
// above the restored one). 0 is no checkpoint: a fresh start, or a
// message that carries no barrier. Checkpoints and savepoints share one
// sequence, so an ID alone, without its [Kind], names one of them.
//
// Its encodings are those of a uint64 (a JSON number, a varint, twenty
// decimal digits in directory names; see docs/checkpoint-format.md).
type ID uint64
