package runtime

// OptionNames spell the options that the engine's messages ask the user
// to set, as the interface the job was started from spells them: a Go
// program sets fields of stream.Options, a user of the exactly binary
// passes flags or writes fields of the pipeline file. A message that
// offers a choice names it so that the user can make it where they are.
type OptionNames struct {
	RunFinished            string // runs a finished job on from its final checkpoint
	TakeOverSinks          string // reruns from scratch into sinks that hold another run's output
	RestartMaxAttempts     string // the restarts allowed without a completed checkpoint
	SkipCorruptCheckpoints string // falls back past completed checkpoints that do not verify
	RestoreFrom            string // a savepoint to start from
	ControlAddr            string // the control API's address
	ControlToken           string // the control API's token
}

// GoOptionNames spell the options as fields of stream.Options.
var GoOptionNames = OptionNames{
	RunFinished:            "stream.Options.RunFinished",
	TakeOverSinks:          "stream.Options.TakeOverSinks",
	RestartMaxAttempts:     "stream.Options.Restart.MaxAttempts",
	SkipCorruptCheckpoints: "stream.Options.SkipCorruptCheckpoints",
	RestoreFrom:            "stream.Options.RestoreFrom",
	ControlAddr:            "stream.Options.Control.Addr",
	ControlToken:           "stream.Options.Control.TokenFile or TokenEnv",
}

// WithOptionNames returns o, an [Options] or a stream.Options, with its
// messages spelling options as names do (the pipeline runner's, for the
// exactly binary).
func WithOptionNames[O any](o O, names OptionNames) O {
	return EditOptions(o, func(e *Options) { e.names = &names })
}

// optionNames returns how this job's messages spell options.
func (o *Options) optionNames() OptionNames {
	if o.names == nil {
		return GoOptionNames
	}
	return *o.names
}
