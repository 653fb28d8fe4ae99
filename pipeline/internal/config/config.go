// Package config is the schema of a pipeline file, defined once: the
// decoder (package yamlconf) reads files into these structs and checks
// them against their tags, and docs/pipelines.md is generated from the
// same structs and tags (go generate ./pipeline).
package config

import (
	"time"

	"github.com/exactlyonce/exactly/pipeline/internal/yamlconf"
)

// Pipeline is the whole file.
type Pipeline struct {
	Name        string     `yaml:"name" required:"true" example:"orders-per-minute" doc:"The job's name. It is recorded in checkpoints and names the sinks' transactions and progress rows, so keep it stable across versions of the pipeline."`
	Parallelism int        `yaml:"parallelism" default:"1" doc:"Parallel subtasks of each operator (at most 128)."`
	Guarantee   string     `yaml:"guarantee" default:"exactly_once" enum:"exactly_once,at_least_once" doc:"exactly_once: every input record affects the committed output once, through crashes. at_least_once: the kafka sink writes without transactions (duplicates after a crash); the other sinks are transactional either way."`
	Source      *Source    `yaml:"source" doc:"Where records come from, for a pipeline of one source (else use inputs)."`
	Decode      *Decode    `yaml:"decode" doc:"How the kafka and file source turns bytes into records (the generator makes records itself). Required for them."`
	EventTime   *EventTime `yaml:"event_time" doc:"The records' event time, which windows need."`
	Transforms  []Step     `yaml:"transforms" doc:"Steps applied in order to each record of source."`
	Sink        *Sink      `yaml:"sink" doc:"Where the output of source and transforms goes, exactly once, for a pipeline of one sink (else use outputs)."`
	DeadLetters *Sink      `yaml:"dead_letters" doc:"Where records that fail to decode or to evaluate go, with the reason: records of the fields stage (where it failed), error and value (the input). Without it (and without an output from dead_letters) such a record stops the job with an error naming it."`
	Inputs      []Input    `yaml:"inputs" doc:"Several sources, each a named stream of records (instead of source, decode and event_time)."`
	Streams     []Stream   `yaml:"streams" doc:"Named streams made from inputs and other streams: the union of one or more, then transforms (instead of transforms)."`
	Outputs     []Output   `yaml:"outputs" doc:"Several sinks, each writing one named stream (instead of sink); a stream may feed any number of them."`
	Checkpoint  Checkpoint `yaml:"checkpoint" doc:"Checkpoint storage and pace."`
	State       State      `yaml:"state" doc:"Where keyed state (aggregations, windows) lives."`
	Restart     Restart    `yaml:"restart" doc:"How a failed run is restarted from its latest checkpoint."`
	Cluster     Cluster    `yaml:"cluster" doc:"How the instances of exactly run --cluster share the pipeline (ignored without --cluster)."`
}

// Input is one of several sources: a named stream of decoded records.
type Input struct {
	Name      string     `yaml:"name" required:"true" example:"web_orders" doc:"The stream's name, which streams and outputs read from (letters, digits and '_'). It names the source's checkpointed positions: keep it stable."`
	Source    Source     `yaml:"source" required:"true" doc:"Where the records come from."`
	Decode    *Decode    `yaml:"decode" doc:"How a kafka or file source turns bytes into records. Required for them."`
	EventTime *EventTime `yaml:"event_time" doc:"The records' event time, which windows need."`
}

// Stream is a named stream made from others.
type Stream struct {
	Name       string   `yaml:"name" required:"true" example:"orders" doc:"The stream's name, which streams and outputs read from (letters, digits and '_'). It prefixes its steps' names and their checkpointed state: keep it stable."`
	From       []string `yaml:"from" required:"true" example:"[web_orders, shop_orders]" doc:"The inputs and streams (defined above this one) whose union it transforms; their records must have the same fields, of the same types, in the same order. NAME.late names the late records of stream NAME's windowed aggregate."`
	Transforms []Step   `yaml:"transforms" doc:"Steps applied in order to each record; none: the union as it is."`
}

// Output is one of several sinks.
type Output struct {
	Name string `yaml:"name" required:"true" example:"orders_db" doc:"The sink's name (letters, digits and '_'); it names the sink's transactions and progress: keep it stable."`
	From string `yaml:"from" required:"true" example:"orders" doc:"The input or stream it writes; dead_letters for the records that failed anywhere in the pipeline, NAME.late for the late records of stream NAME's windowed aggregate."`
	Sink Sink   `yaml:"sink" required:"true" doc:"Where the records go, exactly once."`
}

// Source is a source.
type Source struct {
	Kind        string           `yaml:"kind" kind:"true" required:"true" enum:"kafka,file,generator" doc:"The kind of source."`
	Brokers     []string         `yaml:"brokers" kinds:"kafka" required:"kafka" example:"[\"localhost:9092\"]" doc:"Bootstrap brokers, host:port."`
	Topics      []string         `yaml:"topics" kinds:"kafka" required:"kafka" example:"[orders]" doc:"Topics to read; each must exist."`
	Start       string           `yaml:"start" kinds:"kafka" default:"earliest" enum:"earliest,latest" doc:"Where partitions without a checkpointed position start."`
	Bounded     bool             `yaml:"bounded" kinds:"kafka" doc:"Read each partition up to its end as seen at the start, then finish."`
	SASL        *SASL            `yaml:"sasl" kinds:"kafka" doc:"SASL authentication."`
	TLS         *TLS             `yaml:"tls" kinds:"kafka" doc:"TLS to the brokers; absent: plaintext."`
	Paths       []string         `yaml:"paths" kinds:"file" required:"file" example:"[input/orders.jsonl]" doc:"Files to read, one record per line; each file is one split. A relative path is relative to the pipeline file's directory, as are all paths of a pipeline."`
	Count       uint64           `yaml:"count" kinds:"generator" required:"generator" example:"1000" doc:"Number of records to generate; 0: unbounded."`
	Splits      int              `yaml:"splits" kinds:"generator" default:"4" doc:"Number of splits the records are dealt to (record i goes to split i mod splits)."`
	Rate        float64          `yaml:"rate" kinds:"generator" doc:"Records per second across all splits; 0: as fast as possible. A split not read for a while catches up by at most one second of its share."`
	Fields      yamlconf.Entries `yaml:"fields" kinds:"generator" required:"generator" type:"mapping of name: expression" example:"{id: index, amount: index % 100}" doc:"The generated record's fields, in order: each an expression of index, the record's number from 0 (an int)."`
	Parallelism int              `yaml:"parallelism" doc:"Parallel subtasks of the source; 0: the pipeline's parallelism."`
}

// SASL holds SASL credentials; write the password as ${VAR}.
type SASL struct {
	Mechanism string `yaml:"mechanism" required:"true" enum:"PLAIN,SCRAM-SHA-256,SCRAM-SHA-512" doc:"The SASL mechanism."`
	User      string `yaml:"user" required:"true" doc:"The user name."`
	Password  string `yaml:"password" required:"true" example:"${KAFKA_PASSWORD}" doc:"The password: give it as ${VAR}; it never appears in logs or errors."`
}

// TLS configures TLS to the Kafka brokers; an empty mapping (tls: {})
// turns it on with the system's CAs.
type TLS struct {
	CAFile     string `yaml:"ca_file" example:"certs/ca.crt" doc:"PEM file of the CA certificates that signed the brokers' certificates; default: the system's. A relative path is relative to the pipeline file's directory."`
	CertFile   string `yaml:"cert_file" example:"certs/client.crt" doc:"PEM file of a client certificate, for listeners that require one (mTLS); give key_file with it."`
	KeyFile    string `yaml:"key_file" example:"certs/client.key" doc:"PEM file of the client certificate's private key; give cert_file with it. It is read, never logged."`
	ServerName string `yaml:"server_name" doc:"The name the brokers' certificates must hold; default: the host of each broker address."`
}

// Decode describes the records' encoding.
type Decode struct {
	Format string           `yaml:"format" kind:"true" required:"true" enum:"json,csv,raw" doc:"json: one JSON object per record. csv: one comma-separated line per record, columns in the order of fields. raw: the record's bytes as one string field, value."`
	Strict bool             `yaml:"strict" kinds:"json" doc:"Reject a record with a field not listed in fields or lacking one of them (default: ignore unknown fields, give missing ones their zero value). Either way a value of the wrong type is rejected."`
	Fields yamlconf.Entries `yaml:"fields" kinds:"json,csv" required:"json,csv" type:"mapping of name: type" example:"{user: string, amount: int}" doc:"The record's fields and their types, in order: string, int, float, bool or time (RFC 3339 text, or for JSON also milliseconds since the epoch)."`
}

// EventTime says where a record's event time is.
type EventTime struct {
	Field             yamlconf.Text `yaml:"field" required:"true" type:"expression" example:"ts" doc:"An expression of the decoded record giving its event time: a time field, or an int of milliseconds since the Unix epoch."`
	MaxOutOfOrderness time.Duration `yaml:"max_out_of_orderness" doc:"How far a record may lag behind the newest one of its split before it is late."`
	IdleTimeout       time.Duration `yaml:"idle_timeout" example:"10s" doc:"A split (a Kafka partition, a file) that yields no record for this long is idle: it stops holding the watermark back until it yields again. Default: never idle, so an empty partition holds every window open."`
}

// Step is one transform; exactly one of its fields is set.
type Step struct {
	Filter    yamlconf.Text    `yaml:"filter" oneof:"true" type:"expression" example:"amount > 10" doc:"Keep the records for which the boolean expression is true."`
	Map       yamlconf.Entries `yaml:"map" oneof:"true" type:"mapping of name: expression" example:"{user: user, cents: amount * 100}" doc:"Replace each record by one with these fields, in order, each an expression of the record."`
	KeyBy     yamlconf.Text    `yaml:"key_by" oneof:"true" type:"expression" example:"user" doc:"Partition the records by this expression (a string, int or bool); an aggregate must follow."`
	Aggregate *Aggregate       `yaml:"aggregate" oneof:"true" doc:"Aggregate the records of each key (after key_by): a running aggregate per record, or one result per key and window."`
}

// Aggregate is a keyed aggregation.
type Aggregate struct {
	Name   string           `yaml:"name" doc:"Names the aggregation's checkpointed state: keep it stable. Default aggregate-N, N the step's index."`
	Window *Window          `yaml:"window" doc:"Aggregate per event-time window (needs event_time); without it every record emits its key's updated aggregate."`
	Values yamlconf.Entries `yaml:"values" required:"true" type:"mapping of name: aggregation" example:"{orders: count(), total: sum(amount)}" doc:"The output's aggregates, in order: count(), sum(e), min(e), max(e) or avg(e) with e a numeric expression. The output record holds key, then window_start and window_end (times) for a window, then these."`
}

// Window is an event-time window.
type Window struct {
	Kind            string        `yaml:"kind" kind:"true" required:"true" enum:"tumbling,sliding,session" doc:"tumbling: back-to-back windows of size. sliding: windows of size starting every slide. session: a key's records less than gap apart."`
	Size            time.Duration `yaml:"size" kinds:"tumbling,sliding" required:"tumbling,sliding" example:"1m" doc:"The window's length."`
	Slide           time.Duration `yaml:"slide" kinds:"sliding" required:"sliding" example:"10s" doc:"The time between the starts of two sliding windows."`
	Gap             time.Duration `yaml:"gap" kinds:"session" required:"session" example:"30s" doc:"The inactivity that ends a session."`
	AllowedLateness time.Duration `yaml:"allowed_lateness" doc:"Keep a window this long after it fired, so late records update it (each update is one more output record)."`
}

// Sink is a sink; its kind selects which fields apply.
type Sink struct {
	Kind               string        `yaml:"kind" kind:"true" required:"true" enum:"kafka,postgres,file,sqlite" doc:"The kind of sink."`
	Brokers            []string      `yaml:"brokers" kinds:"kafka" required:"kafka" example:"[\"localhost:9092\"]" doc:"Bootstrap brokers, host:port."`
	Topic              string        `yaml:"topic" kinds:"kafka" required:"kafka" example:"orders-out" doc:"The topic to write; it must exist."`
	Key                yamlconf.Text `yaml:"key" kinds:"kafka" type:"expression" example:"user" doc:"An expression giving each message's key (its text); default: no key."`
	SASL               *SASL         `yaml:"sasl" kinds:"kafka" doc:"SASL authentication."`
	TLS                *TLS          `yaml:"tls" kinds:"kafka" doc:"TLS to the brokers; absent: plaintext."`
	TransactionTimeout time.Duration `yaml:"transaction_timeout" kinds:"kafka" default:"15m" doc:"The producer's transaction.timeout.ms: the broker aborts a transaction still open this long after it began; at least 3 checkpoint intervals, at most the brokers' transaction.max.timeout.ms. An outage longer than it between a checkpoint and its commit loses the checkpoint's output unless reproduce_aborted is set."`
	ReproduceAborted   bool          `yaml:"reproduce_aborted" kinds:"kafka" doc:"When the broker aborted a completed checkpoint's transaction at its timeout (an outage), write its records again, read back from the topic, and commit them once, each with the header exactly-reproduces; the topic's retention must outlast the outage and it must not be compacted (docs/kafka.md)."`
	DSN                string        `yaml:"dsn" kinds:"postgres" required:"postgres" example:"${DATABASE_URL}" doc:"The connection string; give the password through ${VAR}."`
	Schema             string        `yaml:"schema" kinds:"postgres" default:"public" doc:"The schema of the table."`
	Table              string        `yaml:"table" kinds:"postgres,sqlite" required:"postgres,sqlite" example:"orders" doc:"The target table, created when missing with one column per output field."`
	Mode               string        `yaml:"mode" kinds:"postgres" default:"append" enum:"append,upsert" doc:"append inserts every record; upsert keeps the last record per primary_key."`
	PrimaryKey         []string      `yaml:"primary_key" kinds:"postgres" example:"[key, window_start]" doc:"The output fields identifying a row, for mode upsert."`
	Path               string        `yaml:"path" kinds:"sqlite" required:"sqlite" example:"out/orders.db" doc:"The SQLite database file, created when missing (a relative path is relative to the pipeline file's directory)."`
	Dir                string        `yaml:"dir" kinds:"file" required:"file" example:"out" doc:"The directory of the output files (one per subtask and checkpoint, visible once committed), created when missing; a relative path is relative to the pipeline file's directory."`
	Prefix             string        `yaml:"prefix" kinds:"file" default:"part" doc:"The start of the output files' names."`
	Format             string        `yaml:"format" kinds:"file,kafka" default:"json" enum:"json,csv" doc:"How a record is written: a JSON object, or a CSV line of the fields in order."`
	Parallelism        int           `yaml:"parallelism" doc:"Parallel subtasks of the sink; 0: the pipeline's parallelism."`
}

// Checkpoint configures checkpoints.
type Checkpoint struct {
	Storage         string        `yaml:"storage" default:"{name}-checkpoints" doc:"A local directory (relative to the pipeline file's directory; {name} is replaced by the pipeline's name) or s3://bucket/prefix?endpoint=host:port&region=r (credentials from the AWS environment variables)."`
	Interval        time.Duration `yaml:"interval" default:"1s" doc:"Time between checkpoints; output becomes visible at this pace."`
	Timeout         time.Duration `yaml:"timeout" default:"1m" doc:"A checkpoint not complete this long after it started is aborted."`
	Retained        int           `yaml:"retained" default:"3" doc:"Completed checkpoints kept."`
	DebloatTarget   time.Duration `yaml:"debloat_target" example:"200ms" doc:"Buffer debloating, off by default: each task keeps the records queued at its inputs to about this much of its processing, so that a checkpoint's barrier passes a slow task within about this time instead of waiting behind full queues. It costs throughput on fast jobs; docs/operations.md (Backpressure) says when to set it."`
	RequestTimeout  time.Duration `yaml:"request_timeout" default:"30s" doc:"With s3:// storage: how long a request may take, plus the time its bytes take at min_transfer_rate; a slower one fails and is retried."`
	MinTransferRate int64         `yaml:"min_transfer_rate" default:"1048576" doc:"With s3:// storage: the slowest transfer, in bytes per second, a request moving state may take before it fails."`
}

// Cluster configures a pipeline run on a cluster.
type Cluster struct {
	Group                 string        `yaml:"group" default:"exactly-{name}" doc:"The Kafka consumer group the instances share."`
	SessionTimeout        time.Duration `yaml:"session_timeout" default:"10s" doc:"How long the group waits for an instance that stopped answering (killed, paused, cut off) before it hands its tasks to the others; the broker bounds it (group.min.session.timeout.ms, 6s by default)."`
	GroupProtocol         string        `yaml:"group_protocol" default:"classic" enum:"classic,consumer" doc:"The group's rebalance protocol: classic (cooperative-sticky, assigned by an instance) or consumer (KIP-848, assigned by the broker, Kafka 4.0+; the broker bounds session_timeout with group.consumer.min.session.timeout.ms, 45s by default). docs/scale-out.md compares them."`
	OwnershipLease        time.Duration `yaml:"ownership_lease" default:"10s" doc:"How long a task's checkpoint storage stays owned by an instance that stopped renewing it: the task's next instance waits this long for a paused one."`
	RepartitionPartitions int           `yaml:"repartition_partitions" doc:"Partitions of each repartition topic (the tasks of each stage after the first); default: the most partitions of the input topics. It cannot change once the topics exist."`
	StagePause            time.Duration `yaml:"stage_pause" doc:"A task of a stage after the first checkpoints this long after its last checkpoint once it has read what the stage before committed, so that each stage adds about this to the output's latency; default a tenth of checkpoint.interval."`
}

// Restart configures the restarts of a failed run.
type Restart struct {
	MaxAttempts    int           `yaml:"max_attempts" default:"10" doc:"Restarts allowed without a checkpoint completing in between (a completed checkpoint starts the count again); -1: no restarts, the first failure ends the run."`
	InitialBackoff time.Duration `yaml:"initial_backoff" default:"100ms" doc:"The wait before the first restart; each further restart waits twice as long."`
	MaxBackoff     time.Duration `yaml:"max_backoff" default:"10s" doc:"The longest wait between two restarts."`
}

// State configures the keyed-state backend.
type State struct {
	Backend string `yaml:"backend" kind:"true" default:"heap" enum:"heap,pebble" doc:"heap keeps keyed state in memory; pebble on disk, under dir."`
	Dir     string `yaml:"dir" kinds:"pebble" required:"pebble" example:"exactly-state" doc:"The directory of the Pebble state (a relative path is relative to the pipeline file's directory)."`
	Memory  int    `yaml:"memory_mib" kinds:"pebble" doc:"The memory, in MiB, that the Pebble state of the whole process may use, shared by every keyed step's subtasks: one block cache, the write buffers and the value caches (state.Memory, docs/state.md); at least 4. Default: 256 MiB per keyed subtask."`
}
