// Package runtime executes a compiled topology against Kafka: consumer-group membership with
// whole-task assignment, the poll/process/commit loop, production and its error handling,
// internal topic creation and start-up checks.
//
// The runtime is byte-level: it moves *kgo.Record values between Kafka and tasks. Typed
// processing (deserialization, operators, serialization) lives in the root package, which
// hands the runtime a [Topology] whose sub-topologies know how to create their tasks.
package runtime

import (
	"context"
	"fmt"
	cpebble "github.com/cockroachdb/pebble/v2"
	"log/slog"
	"regexp"
	"time"

	"github.com/kstream-go/kstream/store"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kotel"
	"go.opentelemetry.io/otel/propagation"
)

// Reset says where a source starts when its group has no committed offset.
type Reset int

const (
	// ResetDefault uses the application's default (earliest unless configured).
	ResetDefault Reset = iota
	// ResetEarliest starts at the log start offset.
	ResetEarliest
	// ResetLatest starts at the log end offset.
	ResetLatest
	// ResetByDuration starts at the first record stamped at or after the time of the
	// assignment minus the source's (or the config's) reset duration, or at the end if
	// there is none (Kafka's by_duration, KIP-1106).
	ResetByDuration
)

// String returns "default", "earliest", "latest" or "by_duration".
func (r Reset) String() string {
	switch r {
	case ResetEarliest:
		return "earliest"
	case ResetLatest:
		return "latest"
	case ResetByDuration:
		return "by_duration"
	default:
		return "default"
	}
}

// TaskID names a task: one sub-topology over one partition number of its sources.
type TaskID struct {
	SubTopology int
	Partition   int32
}

// WindowedMemTableBytes is the memtable size of the Pebble database when Config.MemTableBytes
// is 0 and the topology has a persistent segmented store (window, session, stream-join or
// versioned: a store with a changelog codec), instead of Pebble's default 8 MiB. Such a
// store writes data that the range deletion of its expired segment drops soon after; in a
// larger memtable more of it is dropped before it is ever flushed and compacted:
// join-pebble used about 0.85x the CPU, window-pebble 0.85x, window-suppress-pebble 0.95x
// (bench/README.md). A count alone keeps the smaller default, for its resident set.
const WindowedMemTableBytes = 32 << 20

// MemTableBytesFor returns the memtable size that an instance of topo opens Pebble with when
// configured with configured (Config.MemTableBytes): configured if set, else
// WindowedMemTableBytes if topo has a persistent segmented store, else 0 (Pebble's default).
func MemTableBytesFor(configured uint64, topo *Topology) uint64 {
	if configured != 0 || topo == nil {
		return configured
	}
	for _, st := range topo.SubTopologies {
		for _, s := range st.Stores {
			if s.Persistent && s.Codec != nil {
				return WindowedMemTableBytes
			}
		}
	}
	return 0
}

// String returns the id as Kafka Streams prints it: "<sub-topology>_<partition>".
func (id TaskID) String() string { return fmt.Sprintf("%d_%d", id.SubTopology, id.Partition) }

// Topology is the byte-level view of a built topology.
type Topology struct {
	// SubTopologies are the independent pieces of the graph, cut at repartition topics.
	SubTopologies []SubTopology
	// InternalTopics are the repartition topics the application creates at start.
	InternalTopics []InternalTopic
	// SinkTopics are the fixed output topics, which must exist at start.
	SinkTopics []SinkTopic
	// CopartitionGroups are sets of source topics that must have equal partition counts,
	// the groups and their topics in the order Kafka Streams lists them
	// (JavaCopartitionGroups): a streams-group member declares them in this order.
	CopartitionGroups [][]string
	// GlobalStores are bootstrapped before processing starts, then kept up to date.
	GlobalStores []GlobalStoreSpec
}

// SubTopology is one connected piece of the processing graph. Its ID is its index in
// Topology.SubTopologies. A global store's sub-topology has no sources and no stores, so it
// never gets a task; it is listed so that IDs are the numbers Describe prints, where (as in
// Kafka Streams) a global store takes a number too.
type SubTopology struct {
	ID      int
	Sources []Source
	// Stores are the state stores of the sub-topology; every task has its own partition of
	// each, opened and restored by the runtime before the task is created.
	Stores []StoreSpec
	// NewTask creates the processing state for one task of this sub-topology, given its
	// stores by name.
	NewTask func(env TaskEnv, id TaskID, stores map[string]store.Backend) (Task, error)
}

// Source is one topic a sub-topology reads, or a pattern of topics.
type Source struct {
	Topic string
	// Pattern, when Topic is empty, matches the topics of a pattern source
	// (StreamsBuilder.stream(Pattern)): the runtime replaces the source with one per
	// matching topic when it starts (resolvePatterns).
	Pattern *regexp.Regexp
	Reset   Reset
	// ResetDuration is ResetByDuration's duration.
	ResetDuration time.Duration
	Internal      bool // a repartition topic created by the application
}

// InternalTopic is a topic the application creates and owns.
type InternalTopic struct {
	Name string
	// Partitions is the partition count; 0 means "as many as the largest source topic of the
	// sub-topology that writes it".
	Partitions int32
	// Writer is the id of the sub-topology that produces into the topic.
	Writer  int
	Configs map[string]*string
	// PartitionsOf, when Partitions is 0, are the topics whose (largest) partition count the
	// topic takes, instead of its writer's: the topics it is co-partitioned with (Kafka
	// Streams' copartitioning of repartition topics; the foreign-key join's topics).
	PartitionsOf []string
	// KeepPartition says the records written to the topic carry their partition, which the
	// producer keeps instead of hashing the key (the foreign-key join's response topic).
	KeepPartition bool
}

// SinkTopic is a fixed output topic and the operator that writes it.
type SinkTopic struct {
	Topic    string
	Operator string
}

// Task processes the records of one task, one at a time, on one goroutine at a time.
type Task interface {
	// Timestamp extracts the timestamp (ms since the epoch) of an input record, with the
	// timestamp extractor of its source. partitionTime is the largest timestamp taken from
	// the record's partition so far, or UnknownTime. A negative timestamp means the record
	// is dropped; an error means the application must stop.
	Timestamp(r *kgo.Record, partitionTime int64) (int64, error)
	// Process handles one input record whose timestamp is ts, then runs the stream-time
	// punctuators that are due. It returns a non-nil error only when the application must
	// stop; recoverable errors have already gone through the error handlers.
	Process(r *kgo.Record, ts int64) error
	// Punctuate runs the wall-clock punctuators due at now, and reports whether any ran.
	// The error is as Process's.
	Punctuate(now time.Time) (bool, error)
	// NextPunctuation is when the next wall-clock punctuator is due; zero if there is none.
	NextPunctuation() time.Time
	// Cut takes the task's state as of now (its stream time, punctuation schedule and the
	// operators' transactional state) for a commit; Committed tells the task that the
	// commit of the last Cut succeeded, so that this state is what an aborted transaction
	// goes back to (under exactly-once the task goes on processing, for the next
	// transaction, while the transaction of the cut ends; Committed without a Cut since the
	// last one does nothing); Aborted, that what it did since the last commit was rolled back
	// (an aborted transaction), so that it goes back to that state, forgetting a Cut not
	// committed.
	Cut()
	Committed()
	Aborted()
	// PreCommit finishes, before the task's processed offsets are committed (under
	// exactly-once: before the transaction commits), the work that the commit must cover
	// and that the task still holds: a batch sink hands over its pending records. It runs
	// on the loop's goroutine, never while the task processes. ctx bounds it (the commit's
	// deadline). A non-nil error means the commit must not happen: when it is ctx's error
	// (errors.Is(err, ctx.Err()), the work did not finish in time; or ErrUnfinished, the
	// same within a shorter bound of the task's) the commit is skipped
	// (an exactly-once transaction aborts) and the records are processed again; any other
	// error stops the application, as Process's.
	PreCommit(ctx context.Context) error
	// Close releases the task's resources when the task is revoked or the app stops.
	Close() error
}

// Async is implemented by a task whose operators hand work to goroutines of their own and
// take the results back later (the async operators of package kstream, MapValuesAsync and
// friends): the runtime then gives the task a turn when results are waiting even if no
// record arrived, and holds its input back while it takes none.
//
// Commits: under exactly-once, and at a revocation or shutdown, the task finishes every call
// its processed records started in PreCommit (it waits for them and forwards their
// outputs), so an exactly-once transaction holds the outputs of finished calls only and
// the offsets of their records. A periodic at-least-once commit (PeriodicCommit) does not
// wait: the task reports the records it still holds (HeldOffsets), and the commit's offset
// of their partition stays at the first of them. Either way no committed offset passes a
// record whose call is unfinished.
type Async interface {
	// Completed reports whether finished calls are due to be handed back to the task (it
	// may hold fresh ones back briefly, to take them back in batches, and then calls
	// TaskEnv.Wake when they are due). It may be called from any goroutine, also while a
	// turn of the task runs.
	Completed() bool
	// Resume hands the finished calls back to the task, which forwards their outputs (or
	// lets the error handlers decide). It runs in a turn of the task (at its start). The
	// error is as Process's.
	Resume() error
	// Saturated reports that the task takes no record now: one of its operators has as
	// many calls unfinished as it allows. The runtime then processes none of its records
	// (they stay buffered, and its partitions pause once the buffer is full, see
	// flowControlLocked) until Resume has freed room. It is called in a turn of the task or
	// while the task is at rest.
	Saturated() bool
	// HeldOffsets calls fn, for each input partition of which the task holds a record whose
	// async work is not finished (or whose outputs have not been forwarded), with the offset
	// of the first such record. The task is at rest.
	HeldOffsets(fn func(topic string, partition int32, offset int64))
}

// TaskEnv is what a task may ask of the runtime. It is safe for concurrent use.
type TaskEnv interface {
	// Produce sends o.Record asynchronously. The commit that covers o.Source waits until it
	// is acknowledged. The runtime owns o from then on.
	Produce(o *OutRecord)
	// Logger is the application's logger.
	Logger() *slog.Logger
	// GlobalStore returns a read-only backend over the global store named name, for the
	// calling task alone (a backend is used by one goroutine at a time). The runtime's
	// global goroutine writes the store concurrently; each of its batches becomes visible
	// at once and as a whole.
	GlobalStore(name string) (store.Backend, error)
	// RecordDropped counts one record that an operator skipped because of its null key or
	// value (Stats.DroppedRecords).
	RecordDropped()
	// Now is the wall-clock time of the task (the test driver's is its mock clock).
	Now() time.Time
	// Upstream tells, for the repartition topic topic, which sub-topology writes it and how
	// many tasks that sub-topology has, and the topic's partition count; ok is false for
	// any other topic, or before the counts are known (event-time alignment, align.go in
	// package kstream).
	Upstream(topic string) (sub int, tasks, partitions int32, ok bool)
	// CaughtUp reports whether task id has processed every record fetched for it and each
	// of its input partitions is at its end as last seen (the task has no known lag).
	// It is called from the task's own goroutine.
	CaughtUp(id TaskID) bool
	// Holding reports whether what the task produces now is held until the next
	// transaction begins: an exactly-once transaction ends while the tasks go on
	// (eos_async.go). Event-time alignment writes no progress report then: a report held
	// would come out after what other instances wrote meanwhile, and say more than the
	// task knew when it wrote it.
	Holding() bool
	// PartitionCount returns the partition count of topic, for a sink with a stream
	// partitioner: known at start for the topics of the topology, asked of the cluster
	// (once) for another topic, which blocks until the answer or ctx is done.
	PartitionCount(ctx context.Context, topic string) (int32, error)
	// Wake tells the runtime that a task has work for a turn although no record arrived for
	// it: an async call finished (see Async). It may be called from any goroutine; the
	// runtime then looks at the tasks (Async.Completed) at once.
	Wake()
	// Context is done when the instance shuts down: it bounds the work a task does outside
	// Kafka while processing (a batch sink's calls and its waits between retries), so that
	// a shutdown does not wait for it. Work cut short by it is finished in PreCommit.
	Context() context.Context
}

// OutRecord is an output record with what error reports need to know about it. Carrying
// both in one allocation (the record's Context points back at its OutRecord) keeps the
// per-record cost of production to the record itself.
type OutRecord struct {
	Record   kgo.Record
	Operator string      // the sink operator that produced it
	Source   *kgo.Record // the input record whose processing produced it (may be nil)
	// DeadLetter marks a dead-letter record (its acknowledgement is noted for Status).
	DeadLetter bool
	// Partitioned says Record.Partition is the partition a stream partitioner chose, which
	// the producer keeps instead of hashing the key.
	Partitioned bool
	ctx         context.Context

	changelog *loggedStore // set for changelog writes: their acknowledgements move its checkpoint
	acks      *ackGroup    // the records of the commit it was produced before (commitasync.go)
}

// Deadline, Done, Err and Value make an OutRecord the context of its own record, so the
// produce callback finds the OutRecord again without a closure per record.
func (o *OutRecord) Deadline() (time.Time, bool) { return o.ctx.Deadline() }

// Done implements context.Context.
func (o *OutRecord) Done() <-chan struct{} { return o.ctx.Done() }

// Err implements context.Context.
func (o *OutRecord) Err() error { return o.ctx.Err() }

// Value implements context.Context.
func (o *OutRecord) Value(key any) any { return o.ctx.Value(key) }

// ProduceFailure describes an output record that Kafka did not accept.
type ProduceFailure struct {
	Record   *kgo.Record // the record that failed, with its target topic
	Operator string      // the sink operator that produced it
	Source   *kgo.Record // the input record whose processing produced it (may be nil)
	Err      error
}

// Decision is what an error handler wants the runtime to do with a failure.
type Decision struct {
	Continue        bool   // skip and go on; otherwise the application stops
	DeadLetterTopic string // if set, write the failed record there (then continue)
}

// Config is what the runtime needs besides the topology.
type Config struct {
	ApplicationID string
	// StoreEngine, if set, opens the engine of the persistent stores in place of Pebble,
	// in the directory it is given (under StateDir); PebbleOptions, if set, tunes Pebble's
	// options just before it opens (state.go, stores.db).
	StoreEngine   func(dir string) (store.DB, error)
	PebbleOptions func(*cpebble.Options)
	// OnUncaught chooses the action on a fatal error while processing (uncaught.go); nil
	// always stops. RestartBackoff, MaxRestarts and RestartWindow bound UncaughtRestart:
	// zero means 1s, 5 and 10 minutes; MaxRestarts negative means no bound.
	OnUncaught     func(error) UncaughtAction
	RestartBackoff time.Duration
	MaxRestarts    int
	RestartWindow  time.Duration
	// ClientID is the prefix of the Kafka client ids (clientid.go); empty means
	// <ApplicationID>-<process id>, as Kafka Streams' client.id default.
	ClientID     string
	Brokers      []string
	ClientOpts   []kgo.Opt // applied to every client (TLS, SASL, dialer, ...)
	ConsumerOpts []kgo.Opt
	ProducerOpts []kgo.Opt
	// Compression is the producers' batch codec (the zero value is no compression).
	// Linger is the producer's linger: 0 means the default (5ms, or none for the
	// transactional producer), negative none.
	Compression    kgo.CompressionCodec
	Linger         time.Duration
	CommitInterval time.Duration
	// BlockingCommits: commits stop the tasks until they are over (no tail in the
	// background, commitasync.go; no transaction ending while the tasks go on,
	// eos_async.go).
	BlockingCommits bool
	MaxPollRecords  int
	DefaultReset    Reset
	// DefaultResetDuration is the duration of a DefaultReset of ResetByDuration.
	DefaultResetDuration time.Duration
	ReplicationFactor    int16
	SessionTimeout       time.Duration
	HeartbeatInterval    time.Duration
	RebalanceTimeout     time.Duration
	CloseTimeout         time.Duration
	Logger               *slog.Logger
	// OperatorCounts are the application's counts of what its operators dropped or lost,
	// which its tasks add to (nil: none kept); the metrics report them.
	OperatorCounts *OperatorCounts
	// OnState is called on every state change; it must not block.
	OnState func(old, new State)
	// OnProduceError decides what to do with a record Kafka rejected.
	OnProduceError func(ProduceFailure) Decision
	// DeadLetter builds the dead-letter record for a production failure sent to topic.
	DeadLetter func(topic string, f ProduceFailure) *kgo.Record
	// StateDir holds persistent stores (one Pebble database for every task).
	StateDir string
	// RestoreListener, if set, observes restoration.
	RestoreListener RestoreListener
	// NumStandbys is the number of standby replicas of each stateful task (on the group
	// leader, it decides the assignment).
	NumStandbys int
	// StandbyListener, if set, observes standby replicas.
	StandbyListener StandbyListener
	// ApplicationServer is this instance's query endpoint ("host:port"), carried in the
	// group metadata for key discovery; "" if none.
	ApplicationServer string
	// InstanceID makes the consumer a static group member (group.instance.id); LeaveOnClose
	// makes such a member leave the group when the runtime stops (fence.go, leaveAndClose).
	InstanceID   string
	LeaveOnClose bool
	// StreamsProtocol makes the instance a member of a streams group (KIP-1071, Apache
	// Kafka 4.2 and later), whose tasks the broker assigns (streams.go), instead of a
	// classic consumer group with kstream's own balancer.
	StreamsProtocol bool
	// Rack is this instance's rack: carried in the join metadata (standbys go to other
	// racks) and given to the clients for follower fetching.
	Rack string
	// AcceptableRecoveryLag, MaxWarmupReplicas and ProbingInterval are Kafka Streams'
	// acceptable.recovery.lag, max.warmup.replicas and probing.rebalance.interval.ms
	// (member.go, probe.go), resolved: zero MaxWarmupReplicas means none.
	AcceptableRecoveryLag int64
	MaxWarmupReplicas     int
	ProbingInterval       time.Duration
	// ExactlyOnce turns on exactly-once v2 (see eos.go); CommitInterval then defaults to
	// 100ms.
	ExactlyOnce bool
	// MaxTaskIdle is Kafka Streams' max.task.idle.ms (see GroupConfig.MaxTaskIdle); zero
	// is its default.
	MaxTaskIdle time.Duration
	// BufferedRecordsPerPartition bounds a task's buffer of fetched records per partition
	// (Kafka Streams' buffered.records.per.partition, default 1000): a partition whose
	// buffer stays above it after the task processed what it could is paused.
	BufferedRecordsPerPartition int
	// BlockCacheBytes and MemTableBytes size the Pebble database shared by every task
	// (0: Pebble store defaults, 64 MiB and 8 MiB; MemTableBytes 0 is WindowedMemTableBytes
	// for a topology with segmented stores, see MemTableBytesFor).
	BlockCacheBytes int64
	MemTableBytes   uint64
	// StoreCacheBytes bounds the read caches of the instance's stores together, divided
	// among them by their reads (0: 32 MiB; negative: none).
	StoreCacheBytes int
	// Caches is the instance's one cache budget, shared by the read caches and the
	// record caches that the topology's processors report to it (CacheBudget.Hold); nil:
	// a budget of StoreCacheBytes alone.
	Caches *CacheBudget
	// TransactionTimeout is the producer's transaction timeout under exactly-once,
	// overriding the default 10s (Kafka Streams' default under exactly-once).
	TransactionTimeout time.Duration
	// GiveUpAfter bounds how long the runtime retries a condition that heals by waiting
	// (an unreachable broker, a coordinator or leader move) before it stops with an error;
	// zero retries for as long as the condition lasts.
	GiveUpAfter time.Duration
	// DeadLetterTopics are the dead-letter topics the error handlers write to, which must
	// exist at start, like sink topics.
	DeadLetterTopics []DeadLetterTopic
	// StallTimeout bounds how long a turn of the poll loop may outlast its poll's wait
	// before Health reports the instance not live; zero: see Runtime.StallBound.
	StallTimeout time.Duration
	// Metrics, if set, receives the instance's metrics (metrics.go).
	Metrics prometheus.Registerer
	// Collectors are more metrics of the instance, registered and unregistered with the
	// runtime's under Metrics (the async operators' of package kstream).
	Collectors []prometheus.Collector
	// Tracer, if set, starts a span per processed record (tracing.go); Propagator then
	// carries the span's context into the headers of the records produced.
	Tracer     *kotel.Tracer
	Propagator propagation.TextMapPropagator
}

// DeadLetterTopic is a dead-letter topic and the handler (or setting) that names it, for
// the error when it is missing.
type DeadLetterTopic struct {
	Topic   string
	Handler string
}

// State is the life-cycle state of a running application.
type State int

// The states, as in Kafka Streams' KafkaStreams.State.
const (
	StateCreated State = iota
	StateRebalancing
	StateRunning
	StatePendingShutdown
	StateNotRunning
	StateError
)

// String returns the state name.
func (s State) String() string {
	switch s {
	case StateCreated:
		return "CREATED"
	case StateRebalancing:
		return "REBALANCING"
	case StateRunning:
		return "RUNNING"
	case StatePendingShutdown:
		return "PENDING_SHUTDOWN"
	case StateNotRunning:
		return "NOT_RUNNING"
	case StateError:
		return "ERROR"
	}
	return fmt.Sprintf("State(%d)", int(s))
}
