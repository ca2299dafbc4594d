package kstream

import (
	"crypto/tls"
	"errors"
	"fmt"
	"github.com/cockroachdb/pebble/v2"
	"github.com/kstream-go/kstream/store"
	"log/slog"
	"time"

	"github.com/kstream-go/kstream/internal/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Config configures an application instance. Only ApplicationID and Brokers are required;
// every other zero value means the documented default.
type Config struct {
	// ApplicationID names the application: it is the consumer group id and the prefix of
	// every internal topic. Instances with the same id share the work. This corresponds to
	// Kafka Streams' application.id.
	ApplicationID string
	// Brokers are the bootstrap brokers, "host:port". This corresponds to bootstrap.servers.
	Brokers []string
	// TLS, if set, connects to the brokers with TLS using this configuration.
	TLS *tls.Config
	// SASL, if set, authenticates with this franz-go mechanism (plain, scram, oauth, aws).
	SASL sasl.Mechanism
	// EventTimeAlignment, when positive, carries event time through repartition topics so
	// that reprocessing and failovers give the results of a live run (see docs/eventtime.md,
	// "Reprocessing with aligned event time"): each upstream task writes its progress into
	// the repartition topics it writes (control records, which no operator sees), and a
	// windowed operator behind them (time, sliding and session windows, Suppress of window
	// results) judges lateness and closes windows by the slowest upstream task that is not
	// caught up with its input, not by the largest timestamp it has seen. Its value is how
	// far the fastest upstream task may run ahead of the slowest: the retention of those
	// operators' window stores grows by it, so that windows put ahead of the time that
	// closes them are kept. Zero (the default) is Kafka Streams' rule. It costs a control
	// record per upstream task and downstream partition every 100 ms while progress
	// changes (every 250 ms when it does not and the task is caught up, every 2 s
	// otherwise), and windows close only once every upstream task has reported.
	EventTimeAlignment time.Duration
	// ProfileOperators runs each operator under the pprof label operator=<its name>, on
	// top of the labels task=<task id> and subtopology=<n> that processing always carries,
	// so that a CPU profile shows which operator costs what (go tool pprof -tagfocus
	// operator=KSTREAM-MAPVALUES-0000000001, or -tags). It is off by default: switching
	// labels on every record, twice per operator, costs a few percent of throughput on
	// light pipelines (see bench/README.md).
	ProfileOperators bool
	// ClientID is the prefix of the Kafka client ids of the instance's clients, overriding
	// the default <ApplicationID>-<process id> (the process id is a UUID, kept in StateDir
	// when the instance has persistent stores or runs exactly-once). Each client adds its
	// role, as Kafka Streams does: <ClientID>-StreamThread-1-consumer, -StreamThread-1-producer,
	// -StreamThread-1-restore-consumer and <ClientID>-global-consumer. This corresponds to
	// Kafka Streams' client.id.
	ClientID string

	// Guarantee is the processing guarantee, overriding the default AtLeastOnce. This
	// corresponds to Kafka Streams' processing.guarantee.
	Guarantee Guarantee
	// TransactionTimeout is the producer's transaction timeout under ExactlyOnce,
	// overriding the default 10s (Kafka Streams' default under exactly-once). A crashed
	// instance's open transaction blocks read_committed readers of its partitions at most
	// this long, unless the instance restarts with the same state directory first.
	TransactionTimeout time.Duration

	// CommitInterval is how often processed offsets are committed, overriding the default
	// 30s (100ms under ExactlyOnce), counted from the start of one commit to the start of
	// the next. A commit first waits until every output record is acknowledged. This
	// corresponds to Kafka Streams' commit.interval.ms.
	//
	// Under AtLeastOnce the tasks stop only for the commit's cut (their buffered store
	// changes go to the changelogs and freeze, their positions are noted) and go on while
	// the rest of it runs: the wait for acknowledgements, the offset commit and the writes
	// of the frozen changes to the stores. At most one commit is in flight; a commit due
	// meanwhile starts once it is over. Under ExactlyOnce (without BlockingCommits), the
	// transaction begun for the outputs held while the last one ended stays open one
	// interval from its beginning before it is committed, so that its first produce
	// requests are acknowledged before its end waits for them.
	CommitInterval time.Duration
	// BlockingCommits makes every commit stop the tasks until it is over, as Kafka Streams'
	// commits do: the offsets and stores are then written before any record after them is
	// processed. Without it, a commit stops the tasks only for its cut (see CommitInterval):
	// under AtLeastOnce the acknowledgements, the offset commit and the store writes run
	// while the tasks go on; under ExactlyOnce the transaction ends (its records flushed,
	// its offsets committed in it, its EndTxn) while the tasks go on for the next
	// transaction, their outputs held in memory until it begins, and the committed changes
	// are then written to the stores. Commits before a revocation and at shutdown always
	// stop the tasks.
	BlockingCommits bool
	// StateDir is the directory of local state (one Pebble database for all persistent
	// stores), overriding the default $TMPDIR/kstream/<application id>. Two instances must not
	// share one. This corresponds to state.dir.
	StateDir string
	// BlockCacheBytes is the size of the block cache of the one Pebble database that holds
	// every persistent store of the process, overriding the default 64 MiB; MemTableBytes is
	// the size of its memtables, overriding the default 8 MiB (32 MiB when the topology has a
	// persistent window, session, stream-join or versioned store, whose expired segments'
	// data a larger memtable drops before flushing it). However many tasks run, this
	// is the engine's memory budget (Kafka Streams' rocksdb.config.setter with a shared cache).
	BlockCacheBytes int64
	MemTableBytes   uint64
	// PebbleOptions, if set, tunes the options of that Pebble database: it is called with
	// them once kstream has set its own (the block cache sized from BlockCacheBytes and
	// MemTableBytes, bloom filters on every level, the format version, the logger) and
	// just before the database opens, as Kafka Streams' rocksdb.config.setter. See
	// [github.com/kstream-go/kstream/store/pebble.Options].Tune for what it must not change.
	// Unused with StoreEngine.
	PebbleOptions func(*pebble.Options)
	// StoreEngine, if set, replaces Pebble as the engine of the persistent stores (every
	// store without [InMemory]): Run calls it once, before the first task starts, with the
	// directory <StateDir>/store-engine (not created), and closes the DB it returns when Run
	// ends. The DB holds every persistent store partition of the instance, each in its own
	// namespace; it must pass the conformance suite of package store/storetest, and keep
	// its data and checkpoints across Close for a restart to restore only what it misses
	// (an engine that keeps nothing is restored in full from the changelogs, as in-memory
	// stores are). The engine must stay the same for a state directory: switching engines
	// leaves the old one's data unused, and the new one restores from the changelogs.
	// Kafka Streams plugs engines per store (Materialized.as(KeyValueBytesStoreSupplier));
	// see docs/semantics.md. store/examples/filedb is an example engine.
	StoreEngine func(dir string) (store.DB, error)
	// StoreCacheBytes bounds the read caches that persistent store partitions, and logged
	// (or exactly-once) in-memory ones, keep of recently read and written keys: all the
	// store partitions of the instance together, divided among the stores by how often each
	// is read and among each store's partitions equally, and again as tasks come and go (so
	// 1,000 partitions take no more than 6; docs/caching.md), overriding the default
	// 32 MiB; negative disables them. The bound is on heap: keys, values and about 110
	// bytes of bookkeeping per entry. The read caches and the record caches
	// (CacheMaxBytes) have one budget, StoreCacheBytes + CacheMaxBytes: the read caches
	// get what the record caches do not hold at the moment, so never less than
	// StoreCacheBytes. Kafka Streams' statestore.cache.max.bytes is likewise one budget
	// for the entries read and the updates held back (docs/caching.md).
	StoreCacheBytes int
	// AsyncMaxInFlight caps the calls of the async operators ([MapValuesAsync],
	// [FlatMapValuesAsync]) running at once in the instance, over all its tasks (each task
	// has its own cap, [WithConcurrency]); a call beyond it waits for one to finish. 0 (the
	// default) sets no cap beyond the tasks'.
	AsyncMaxInFlight int
	// CacheMaxBytes is the budget of the record caches, Kafka Streams'
	// statestore.cache.max.bytes, overriding the default [DefaultCacheMaxBytes] (10 MiB,
	// Kafka Streams' default); negative disables the caches, so that every update is
	// forwarded. A table kept in a key-value or time-window store (Count, Reduce,
	// Aggregate, their table, cogroup and windowed forms, source tables, materialized
	// filters, mapValues and joins) forwards each key's latest update once per commit
	// (every CommitInterval), or when its cache is full, instead of every update, as Kafka
	// Streams' caching stores do. The budget is the instance's, shared equally by the store
	// partitions with a cache, and one with the read caches': what the record caches do
	// not hold, the read caches may use (StoreCacheBytes). [WithoutCaching] disables a
	// store's cache (Java's withCachingDisabled). The test driver flushes the caches after
	// every input record, as TopologyTestDriver commits after every input. See
	// docs/caching.md.
	CacheMaxBytes int64
	// GoMemoryLimit, when not MemoryLimitOff (the default, which sets nothing
	// process-wide), makes Run set the Go runtime's soft memory limit
	// (runtime/debug.SetMemoryLimit, what GOMEMLIMIT sets) from this instance's heap
	// budgets, log it, and restore the previous limit when Run returns. The limit is
	// StoreCacheBytes and CacheMaxBytes (each unless disabled), plus BlockCacheBytes + MemTableBytes when the
	// topology has persistent stores and the binary is built without cgo (with cgo,
	// Pebble's cache and memtables live outside the Go heap, which the limit does not
	// cover), plus GoMemoryLimitHeadroom (default 48 MiB, at least 16 MiB) for records
	// in flight, buffered store writes and the Go runtime itself: with the defaults and
	// cgo, 90 MiB. The garbage collector then collects more often as the heap nears the
	// limit instead of letting it grow to twice what is live, so the resident set stays
	// near the budgets (docs/operations-guide.md, "Memory"). In-memory stores are not
	// in the budgets: add their size to the headroom. MemoryLimitFromBudgets keeps a
	// limit the process already has (GOMEMLIMIT, or one the program set), since whoever
	// set it knows the whole process; MemoryLimitOverride replaces it for the run. Apps
	// of one process that run at once with it set share a limit: the sum of theirs.
	// Kafka Streams has no equivalent (the JVM's -Xmx).
	GoMemoryLimit         MemoryLimitMode
	GoMemoryLimitHeadroom int64
	// EnsureExplicitInternalResourceNaming makes New (and the test driver) fail when the
	// topology has a state store, changelog topic or repartition topic whose name was
	// generated ("KSTREAM-AGGREGATE-STATE-STORE-0000000003"), naming each with its operator
	// and the option that names it. Generated names hold a counter of the operators built
	// before, so adding an operator upstream renames them, and an upgrade then loses the
	// state and the records in flight under the old names. Off by default, as in Kafka
	// Streams; it is ensure.explicit.internal.resource.naming (KIP-1111).
	EnsureExplicitInternalResourceNaming bool
	// OffsetReset is where sources start without a committed offset, overriding the default
	// ResetEarliest (as Kafka Streams does): ResetEarliest, ResetLatest or
	// ResetByDuration(d), the first record of the last d. Sources can override it with
	// WithOffsetReset. This corresponds to auto.offset.reset.
	OffsetReset OffsetReset
	// ReplicationFactor of the internal topics the application creates, overriding the
	// default -1 (the broker's default.replication.factor). This corresponds to
	// replication.factor.
	ReplicationFactor int16
	// MaxPollRecords caps the records taken from the consumer per poll, overriding the
	// default 10000.
	MaxPollRecords int
	// Compression is the codec of the record batches the application produces (outputs,
	// changelogs, repartition topics, dead letters), overriding the default
	// CompressionNone, which is the producer default of Kafka and Kafka Streams. A codec
	// trades CPU for network and disk: worth it for compressible values on a busy network;
	// on incompressible values (random 100-byte values, `go run ./bench -only
	// passthrough,passthrough-snappy`) snappy took 18% more CPU and gave 0.66x the
	// passthrough's throughput. This corresponds to compression.type.
	Compression Compression
	// Linger is how long the producer waits for more records before it sends a batch that
	// is not full, overriding the default 5ms (0 under ExactlyOnce, where each commit
	// flushes anyway). NoLinger sends at once: the lowest latency, at the cost of more and
	// smaller requests (docs/operations-guide.md, "Producer: compression and linger"). This
	// corresponds to linger.ms (Kafka Streams' default is 100ms).
	Linger time.Duration

	// DefaultTimestampExtractor gives input records their timestamps (event time), unless
	// their source has its own ([WithTimestampExtractor], [TableTimestampExtractor]). The
	// default is [FailOnInvalidTimestamp]: the timestamp stored with the record, and a
	// record without one stops the application. This corresponds to Kafka Streams'
	// default.timestamp.extractor.
	DefaultTimestampExtractor TimestampExtractor
	// MaxTaskIdle is how long a task with several input partitions (co-partitioned
	// sources, or a source and a repartition topic) waits, when one of its partitions has
	// no record buffered but is caught up with its end, before it processes the others
	// although a record with a lower timestamp could still arrive there ("enforced
	// processing", counted in [Stats].EnforcedProcessing). Zero (Kafka Streams' default)
	// does not wait for a caught-up partition, but still waits while an empty partition
	// is known to have records on the broker not fetched yet, or while its lag is not
	// known; a negative value never waits. This corresponds to max.task.idle.ms (negative:
	// -1, disabled).
	MaxTaskIdle time.Duration
	// BufferedRecordsPerPartition bounds the records a task holds fetched but not yet
	// processed per input partition, overriding the default 1000: a partition whose buffer
	// is fuller than that after its task processed what it could (a task waiting for
	// another partition, see MaxTaskIdle, or a slow task falling behind) stops being fetched
	// until it drains, so that the other tasks go on. This corresponds to
	// buffered.records.per.partition.
	BufferedRecordsPerPartition int

	// SessionTimeout, HeartbeatInterval and RebalanceTimeout tune group membership,
	// overriding franz-go's defaults (45s, 3s, 60s). These correspond to the consumer's
	// session.timeout.ms, heartbeat.interval.ms and max.poll.interval.ms.
	SessionTimeout    time.Duration
	HeartbeatInterval time.Duration
	RebalanceTimeout  time.Duration
	// CloseTimeout bounds the final flush and commit at shutdown, overriding the default 30s.
	CloseTimeout time.Duration
	// GiveUpAfter bounds how long the application waits out a condition that heals by
	// itself (an unreachable broker, a coordinator or partition leader that moved, a group
	// that cannot be rejoined for a while) before Run stops with an error. The zero value
	// waits for as long as the condition lasts, logging at warn what it waits for. This
	// plays the part of Kafka Streams' task.timeout.ms.
	GiveUpAfter time.Duration
	// UncaughtErrorPolicy is what the instance does when processing fails with an error
	// that nothing handled (a handler's fail decision, a production error that cannot be
	// skipped, a store that fails...), as Kafka Streams' StreamsUncaughtExceptionHandler:
	// [StopInstance] (the default, SHUTDOWN_CLIENT) stops this instance and Run returns the
	// error; [ShutdownApplication] (SHUTDOWN_APPLICATION) stops every instance of the
	// application, each Run returning an error that wraps [ErrApplicationShutdown] and names
	// the instance that asked and its error; [RestartProcessing] (REPLACE_THREAD) closes the
	// tasks without committing, keeps the stores, leaves the group, and joins it again after
	// RestartBackoff, logging the error. Errors at start (before the instance processes)
	// always stop it; an error of a global store's consumer under RestartProcessing stops it
	// too, as in Kafka Streams. See docs/operations.md, "When processing fails".
	UncaughtErrorPolicy UncaughtErrorPolicy
	// UncaughtErrorHandler, if set, chooses the policy for each such error, in place of
	// UncaughtErrorPolicy (Kafka Streams' handler is a function of the exception too). It is
	// called once per error, from the goroutine that failed; it must not block.
	UncaughtErrorHandler func(err error) UncaughtErrorPolicy
	// RestartBackoff is how long RestartProcessing waits before it joins the group again,
	// overriding the default 1s. MaxRestarts bounds the restarts within RestartWindow,
	// overriding the defaults 5 and 10 minutes: one more restart within the window stops
	// the instance with an error that wraps the last cause. A negative MaxRestarts means no
	// bound (Kafka Streams' REPLACE_THREAD has none).
	RestartBackoff time.Duration
	MaxRestarts    int
	RestartWindow  time.Duration
	// StallTimeout bounds how long a turn of the poll loop may outlast its poll's own wait
	// (at most CommitInterval) before [App.Health] reports the instance not live: a
	// processor stuck in a call, a commit that never returns. Zero means CloseTimeout plus
	// RebalanceTimeout (60s when unset), at least 60s: a commit waits at most a close
	// timeout, and a member that does not come back to its loop within the rebalance
	// timeout drops out of the group anyway. Kafka Streams has no liveness probe; its
	// nearest bound is max.poll.interval.ms.
	StallTimeout time.Duration

	// RestoreListener, if set, is told when a store's restoration from its changelog starts,
	// progresses and ends, and likewise for each partition of a global table's topic while
	// the global store bootstraps at start. This corresponds to Kafka Streams'
	// StateRestoreListener (and its global restore listener).
	RestoreListener RestoreListener
	// NumStandbys is the number of standby replicas of each stateful task, overriding the
	// default 0. A standby is a copy of a task's stores on another instance, kept up to date
	// from the changelogs; when the task's owner fails, the standby's instance takes the task
	// over and restores only what was written since its last update. This corresponds to
	// Kafka Streams' num.standby.replicas.
	NumStandbys int
	// ApplicationServer is this instance's query endpoint, "host:port", as other instances
	// and clients reach it: it travels in the group's metadata so that every instance knows
	// which one hosts which key ([App.KeyMetadata], [App.Metadata]), and package query
	// forwards requests to it. Kafka Streams' application.server. Optional.
	ApplicationServer string
	// InstanceID, if set, makes this instance a static member of the group (Kafka Streams'
	// group.instance.id, KIP-345): it must be unique in the application and the same
	// across restarts of the instance (a Kubernetes StatefulSet's pod name, a host name).
	// A static member that stops does not leave the group unless LeaveGroupOnClose is set:
	// started again within SessionTimeout, it gets its tasks back without a rebalance, and
	// restores nothing beyond its local checkpoint; the others keep processing meanwhile,
	// and its tasks wait for it. One that does not come back within SessionTimeout is
	// removed, and its tasks move, as a dynamic member's do at once. See
	// docs/operations-guide.md.
	InstanceID string
	// LeaveGroupOnClose makes a static member (InstanceID) leave the group when it stops,
	// so that its tasks move at once (scaling in) rather than wait SessionTimeout for it
	// (restarting). Kafka Streams' CloseOptions.leaveGroup. A dynamic member always leaves.
	LeaveGroupOnClose bool
	// GroupProtocol is the rebalance protocol of the application's group: GroupProtocolClassic
	// (the default: a classic consumer group whose tasks kstream's own balancer assigns) or
	// GroupProtocolStreams (a streams group, KIP-1071, Apache Kafka 4.2 and later: the broker
	// assigns the tasks, knows the topology, and shows the application as a streams group).
	// Kafka Streams' group.protocol. Under GroupProtocolStreams the group's session timeout,
	// heartbeat interval and standby replicas are the group's configs on the broker, not
	// SessionTimeout, HeartbeatInterval and NumStandbys. Kafka Streams (Java) instances with
	// group.protocol=streams and the same topology can share the group with kstream instances.
	// See docs/streams-protocol.md.
	GroupProtocol GroupProtocol
	// AcceptableRecoveryLag is how many changelog records an instance may be behind on a
	// task's state and still count as caught up with it, overriding the default 10,000
	// (Kafka Streams' acceptable.recovery.lag); negative means none at all. A stateful task
	// moves (to a new instance, to rebalance) only to an instance caught up with it: until
	// then it keeps running where it is while a warm-up replica restores it on its target,
	// and a probing rebalance moves it once the warm-up caught up. So the task pauses for a
	// rebalance and the last few records, not for a whole restore. A task whose owner is gone
	// goes to the instance with the most of its state, caught up or not.
	AcceptableRecoveryLag int64
	// MaxWarmupReplicas bounds the warm-up replicas of the whole application at any time,
	// overriding the default 2 (Kafka Streams' max.warmup.replicas): a larger value moves
	// more tasks at each probing rebalance, and restores more at once. Negative means none:
	// a stateful task moves at once to its target and restores there, as kstream did before
	// warm-up replicas.
	MaxWarmupReplicas int
	// ProbingRebalanceInterval is how often an instance that holds warm-up replicas asks the
	// group for a rebalance, overriding the default 10 minutes (Kafka Streams'
	// probing.rebalance.interval.ms). An instance whose warm-ups are all caught up asks at
	// once, without waiting for the interval (Kafka Streams waits; docs/semantics.md).
	ProbingRebalanceInterval time.Duration
	// Rack is the rack (zone, data centre) this instance runs in, as its brokers name theirs
	// (broker.rack): the consumers fetch from a replica in the same rack when the brokers
	// allow it (KIP-392, franz-go's Rack option), and standbys are placed on other racks
	// than their active's when possible (Kafka Streams' rack.aware.assignment.tags with one
	// tag). Optional.
	Rack string
	// StandbyListener, if set, is told when a standby starts following a changelog, applies
	// a batch, and stops. This corresponds to Kafka Streams' StandbyUpdateListener.
	StandbyListener StandbyListener

	// Logger receives the application's logs, overriding the default slog.Default().
	Logger *slog.Logger
	// StateListener, if set, is called on every state change, from the goroutine that made
	// it. It must not block.
	StateListener func(old, new State)

	// DeserializationErrorHandler handles input records whose key or value cannot be
	// decoded, overriding the default LogAndFail. This corresponds to Kafka Streams'
	// deserialization.exception.handler.
	DeserializationErrorHandler ErrorHandler
	// ProcessingErrorHandler handles operators that return an error or panic, overriding the
	// default LogAndFail. This corresponds to processing.exception.handler.
	ProcessingErrorHandler ErrorHandler
	// ProductionErrorHandler handles output records that cannot be serialized or that Kafka
	// rejects, overriding the default LogAndFail. This corresponds to
	// production.exception.handler.
	ProductionErrorHandler ErrorHandler
	// DeadLetterTopics are dead-letter topics that custom error handlers may write to with
	// DeadLetter(topic). Run checks at start that they exist, as it checks sink topics and
	// the topics of DeadLetterQueue handlers, so that a missing one fails the start rather
	// than the first bad record.
	DeadLetterTopics []string

	// ClientOptions are franz-go options applied to every client the application creates
	// (the escape hatch for dialers, timeouts, metrics hooks). ConsumerOptions and
	// ProducerOptions apply to one kind only and come last, so they win.
	ClientOptions   []kgo.Opt
	ConsumerOptions []kgo.Opt
	ProducerOptions []kgo.Opt

	// Metrics, if set, receives the instance's metrics (docs/metrics.md), the Kafka
	// clients' included (franz-go's kprom), each labeled application_id; nil has none and
	// costs nothing. Nothing is registered globally: serve the registry with promhttp. The
	// metrics are registered when Run starts and unregistered when it returns; two
	// instances of one application in one process need a registry each (or one wrapped
	// with prometheus.WrapRegistererWith and an instance label), else the second fails to
	// start. This plays the part of Kafka Streams' metrics.reporters with JMX.
	Metrics prometheus.Registerer
	// TracerProvider, if set, traces processing with OpenTelemetry through franz-go's kotel
	// plugin: a span per processed record, a child of the span its headers carry (its
	// producer's), and the records it produces carry the process span in their headers
	// (see tracing.go). TracePropagator carries span contexts in headers, overriding the
	// default W3C trace context and baggage.
	TracerProvider  trace.TracerProvider
	TracePropagator propagation.TextMapPropagator
}

// RestoreListener observes the restoration of stores from their changelogs, and the
// bootstrap of global stores. Its methods are called from the goroutine restoring a task (or
// the global goroutine) and must be safe for concurrent use.
type RestoreListener interface {
	// OnRestoreStart: restoring store's partition from offset from up to (excluding) to.
	OnRestoreStart(store, topic string, partition int32, from, to int64)
	// OnBatchRestored: records applied, up to offset batchEnd (excluding).
	OnBatchRestored(store, topic string, partition int32, batchEnd int64, records int)
	// OnRestoreEnd: restoration done, restored records applied in all.
	OnRestoreEnd(store, topic string, partition int32, restored int64)
}

// GroupProtocol is the rebalance protocol of an application's group (Config.GroupProtocol).
type GroupProtocol int

const (
	// GroupProtocolClassic is the classic consumer group protocol, with kstream's task
	// balancer run by the group's leader.
	GroupProtocolClassic GroupProtocol = iota
	// GroupProtocolStreams is the streams rebalance protocol (KIP-1071): the broker assigns
	// the tasks. It needs Apache Kafka 4.2 or later.
	GroupProtocolStreams
)

// String returns "classic" or "streams", Kafka Streams' names (group.protocol).
func (p GroupProtocol) String() string {
	switch p {
	case GroupProtocolClassic:
		return "classic"
	case GroupProtocolStreams:
		return "streams"
	}
	return fmt.Sprintf("GroupProtocol(%d)", int(p))
}

// Guarantee is a processing guarantee.
type Guarantee int

const (
	// AtLeastOnce: every input record is processed, and after a crash, records processed
	// since the last commit are processed again (their outputs may appear twice).
	AtLeastOnce Guarantee = iota
	// ExactlyOnce (v2, as Kafka Streams' exactly_once_v2): each commit interval's outputs,
	// repartition and changelog records and input offsets are one Kafka transaction, so a
	// read_committed consumer sees every input's effects exactly once, across crashes and
	// rebalances. Consumers and restoration read read_committed. Stores keep their writes in
	// a buffer applied only after the transaction commits, so after a crash they restore
	// only the committed changelog tail: local state is never wiped. The transactional id
	// is "<application id>-<id kept in the state directory>".
	ExactlyOnce
)

// String returns "at_least_once" or "exactly_once_v2", Kafka Streams' names.
func (g Guarantee) String() string {
	if g == ExactlyOnce {
		return "exactly_once_v2"
	}
	return "at_least_once"
}

// Stats are an instance's commit figures: commits (transactions committed under
// ExactlyOnce), transactions aborted, commit latency; and the records its operators
// dropped for a null key or value (DroppedRecords; see docs/semantics.md). They are
// counted since the instance started; [App.Stats] returns them.
type Stats struct {
	// Commits counts the commits (the transactions committed, under ExactlyOnce).
	Commits int64
	// TransactionsAborted counts the transactions aborted (ExactlyOnce only).
	TransactionsAborted int64
	// CommitLatencyAvg is the mean time a commit took.
	CommitLatencyAvg time.Duration
	// CommitLatencyP99 is the 99th percentile of the last 1024 commits' latencies.
	CommitLatencyP99 time.Duration
	// CommitLatencyMax is the longest commit.
	CommitLatencyMax time.Duration
	// LastCommitLatency is the time the last commit took.
	LastCommitLatency time.Duration
	// ExactlyOnce reports whether the instance runs under ExactlyOnce.
	ExactlyOnce bool
	// TransactionalID is the producer's transactional id (ExactlyOnce only).
	TransactionalID string
	// RecordsInLastCommit counts the input records the last commit covered.
	RecordsInLastCommit int64
	// ChangelogRecordsTotal counts the changelog records written, all stores together.
	ChangelogRecordsTotal int64
	// ProducerFences counts the times the transactional producer was fenced (a transaction
	// outlived TransactionTimeout, or another producer took the transactional id) and the
	// instance dropped its tasks and rejoined with a new producer: Kafka Streams' task
	// migrations.
	ProducerFences int64
	// Restarts counts the restarts of the processing after an uncaught error
	// ([RestartProcessing]).
	Restarts int64
	// DroppedRecords counts the records that operators skipped because of a null key or a
	// null value (an aggregation, a join or a table source given a record it cannot use) or
	// dropped as late (a closed window, an expired join window or versioned-table history),
	// and the input records dropped for a negative timestamp (see TimestampExtractor), all
	// tasks together: Kafka Streams' dropped-records metric for those records. Losses has
	// them by operator and reason. Records
	// processed again after a failure or an aborted transaction are counted again, as in
	// Kafka Streams.
	DroppedRecords int64
	// EnforcedProcessing counts the records that a task with several input partitions
	// processed although one of its partitions had no record buffered, because
	// Config.MaxTaskIdle passed while that partition was caught up (Kafka Streams'
	// enforced-processing metric): their order across partitions may not be the order of
	// their timestamps.
	EnforcedProcessing int64
	// StoreCacheBytes is the heap that the read caches of the instance's stores held
	// after the last commit, all stores together: within Config.StoreCacheBytes +
	// Config.CacheMaxBytes, the caches' one budget (the record caches are empty after a
	// commit).
	StoreCacheBytes int64
	// ExpiringChangelogRecords counts the changelog records of the stores of time and sliding
	// window aggregations (logged with their windows' timestamps) written with a timestamp
	// older than their changelog topic's retention.ms allows: the broker deletes them at its
	// next retention check, so that a restore of the store (a failover, a new instance) lacks
	// their windows. Input older than the retention of such a changelog (the store's
	// retention plus a day by default) does this; a warning says which store, and
	// docs/windows.md how to keep such records.
	ExpiringChangelogRecords int64
	// LostResults counts the final results that operators never emitted, all together: the
	// windows of an aggregation with EmitOnWindowClose that expired from their store before
	// they closed (see docs/windows.md, "Final results only").
	LostResults int64
	// Losses are the records that operators dropped and the final results they lost, by
	// operator and reason, all tasks together, sorted by operator, then dropped records
	// before lost results, then reason. The records error handlers skipped or sent to a
	// dead-letter topic are in it, at the operator that failed on them, with the reasons
	// skipped_deserialization_error, skipped_processing_error and skipped_production_error
	// (not in DroppedRecords); records dropped before they reached an operator (a negative
	// timestamp) are not.
	Losses []OperatorLoss
	// Async are the counters of the async operators ([MapValuesAsync],
	// [FlatMapValuesAsync]), by operator, sorted by name; none without one.
	Async []AsyncOperatorStats
}

// The values above are the runtime's, so that conversions keep their meaning: each line
// fails to compile if one differs.
var (
	_ = [1]int{}[SuspendMigrated-SuspendReason(runtime.SuspendMigrated)]
	_ = [1]int{}[SuspendPromoted-SuspendReason(runtime.SuspendPromoted)]
	_ = [1]int{}[StateCreated-State(runtime.StateCreated)]
	_ = [1]int{}[StateRebalancing-State(runtime.StateRebalancing)]
	_ = [1]int{}[StateRunning-State(runtime.StateRunning)]
	_ = [1]int{}[StatePendingShutdown-State(runtime.StatePendingShutdown)]
	_ = [1]int{}[StateNotRunning-State(runtime.StateNotRunning)]
	_ = [1]int{}[StateError-State(runtime.StateError)]
)

// standbyListener passes the runtime's standby events to a [StandbyListener].
type standbyListener struct{ l StandbyListener }

func (s standbyListener) OnUpdateStart(store, topic string, partition int32, startOffset int64) {
	s.l.OnUpdateStart(store, topic, partition, startOffset)
}

func (s standbyListener) OnBatchLoaded(store, topic string, partition int32, batchEnd int64, records int, currentEnd int64) {
	s.l.OnBatchLoaded(store, topic, partition, batchEnd, records, currentEnd)
}

func (s standbyListener) OnUpdateSuspended(store, topic string, partition int32, storeOffset int64, reason runtime.SuspendReason) {
	s.l.OnUpdateSuspended(store, topic, partition, storeOffset, SuspendReason(reason))
}

// statsOf converts the runtime's figures.
func statsOf(s runtime.Stats) Stats {
	return Stats{
		Commits:               s.Commits,
		TransactionsAborted:   s.TransactionsAborted,
		CommitLatencyAvg:      s.CommitLatencyAvg,
		CommitLatencyP99:      s.CommitLatencyP99,
		CommitLatencyMax:      s.CommitLatencyMax,
		LastCommitLatency:     s.LastCommitLatency,
		ExactlyOnce:           s.ExactlyOnce,
		TransactionalID:       s.TransactionalID,
		RecordsInLastCommit:   s.RecordsInLastCommit,
		ChangelogRecordsTotal: s.ChangelogRecordsTotal,
		ProducerFences:        s.ProducerFences,
		Restarts:              s.Restarts,
		DroppedRecords:        s.DroppedRecords,
		EnforcedProcessing:    s.EnforcedProcessing,
		StoreCacheBytes:       s.StoreCacheBytes,

		ExpiringChangelogRecords: s.ExpiringChangelogRecords,
	}
}

// StandbyListener observes standby replicas. Its methods are called from the goroutine
// that updates the standbys and must not block for long.
type StandbyListener interface {
	// OnUpdateStart: the standby of store's partition starts following topic at startOffset.
	OnUpdateStart(store, topic string, partition int32, startOffset int64)
	// OnBatchLoaded: records applied, up to batchEnd (excluding); currentEnd is the
	// changelog's last stable offset when the batch was fetched.
	OnBatchLoaded(store, topic string, partition int32, batchEnd int64, records int, currentEnd int64)
	// OnUpdateSuspended: the standby stopped with its store checkpointed at storeOffset.
	OnUpdateSuspended(store, topic string, partition int32, storeOffset int64, reason SuspendReason)
}

// SuspendReason says why a standby stopped: it was promoted to the active task here, or
// migrated (moved to another instance, or the instance stops).
type SuspendReason int

// The reasons a standby stops.
const (
	// SuspendMigrated: the standby was assigned to another instance (or the instance
	// stops).
	SuspendMigrated SuspendReason = iota
	// SuspendPromoted: this instance became the task's active owner.
	SuspendPromoted
)

// String returns "migrated" or "promoted".
func (s SuspendReason) String() string { return runtime.SuspendReason(s).String() }

// State is the life-cycle state of an application instance, as in Kafka Streams'
// KafkaStreams.State.
type State int

// The states an instance goes through: Created, then Rebalancing and Running in turn, then
// PendingShutdown and NotRunning; Error if a fatal error stopped it.
const (
	StateCreated State = iota
	StateRebalancing
	StateRunning
	StatePendingShutdown
	StateNotRunning
	StateError
)

// String returns the state's name as Kafka Streams prints it: "CREATED", "REBALANCING",
// "RUNNING", "PENDING_SHUTDOWN", "NOT_RUNNING" or "ERROR".
func (s State) String() string { return runtime.State(s).String() }

// NoLinger, as Config.Linger, makes the producer send each batch as soon as it has a
// record (linger.ms=0).
const NoLinger time.Duration = -1

// Compression is a codec for produced record batches ([Config.Compression]).
type Compression int8

// The codecs Kafka supports.
const (
	CompressionNone Compression = iota
	CompressionGzip
	CompressionSnappy
	CompressionLZ4
	CompressionZstd
)

// String returns the codec's name as Kafka's compression.type spells it: "none", "gzip",
// "snappy", "lz4" or "zstd".
func (c Compression) String() string {
	switch c {
	case CompressionNone:
		return "none"
	case CompressionGzip:
		return "gzip"
	case CompressionSnappy:
		return "snappy"
	case CompressionLZ4:
		return "lz4"
	case CompressionZstd:
		return "zstd"
	}
	return fmt.Sprintf("Compression(%d)", int8(c))
}

// codec is c as a franz-go codec; ok is false for a value that is not a codec.
func (c Compression) codec() (kgo.CompressionCodec, bool) {
	switch c {
	case CompressionNone:
		return kgo.NoCompression(), true
	case CompressionGzip:
		return kgo.GzipCompression(), true
	case CompressionSnappy:
		return kgo.SnappyCompression(), true
	case CompressionLZ4:
		return kgo.Lz4Compression(), true
	case CompressionZstd:
		return kgo.ZstdCompression(), true
	}
	return kgo.CompressionCodec{}, false
}

func (c Config) runtimeConfig() runtime.Config {
	reset, resetD := c.OffsetReset.runtime()
	rc := runtime.Config{
		ApplicationID:        c.ApplicationID,
		InstanceID:           c.InstanceID,
		LeaveOnClose:         c.LeaveGroupOnClose,
		ClientID:             c.ClientID,
		Brokers:              c.Brokers,
		ClientOpts:           append([]kgo.Opt(nil), c.ClientOptions...),
		ConsumerOpts:         c.ConsumerOptions,
		ProducerOpts:         c.ProducerOptions,
		CommitInterval:       c.CommitInterval,
		BlockingCommits:      c.BlockingCommits,
		MaxPollRecords:       c.MaxPollRecords,
		MaxTaskIdle:          c.MaxTaskIdle,
		DefaultReset:         reset,
		DefaultResetDuration: resetD,
		ReplicationFactor:    c.ReplicationFactor,
		SessionTimeout:       c.SessionTimeout,
		HeartbeatInterval:    c.HeartbeatInterval,
		RebalanceTimeout:     c.RebalanceTimeout,
		CloseTimeout:         c.CloseTimeout,
		GiveUpAfter:          c.GiveUpAfter,
		Logger:               c.Logger,
		StateDir:             c.StateDir,
	}
	if c.RestoreListener != nil {
		rc.RestoreListener = c.RestoreListener
	}
	rc.BufferedRecordsPerPartition = c.BufferedRecordsPerPartition
	rc.NumStandbys = c.NumStandbys
	rc.Rack = c.Rack
	rc.AcceptableRecoveryLag = c.AcceptableRecoveryLag
	switch {
	case c.AcceptableRecoveryLag == 0:
		rc.AcceptableRecoveryLag = 10000
	case c.AcceptableRecoveryLag < 0:
		rc.AcceptableRecoveryLag = 0
	}
	rc.MaxWarmupReplicas = c.MaxWarmupReplicas
	switch {
	case c.MaxWarmupReplicas == 0:
		rc.MaxWarmupReplicas = 2
	case c.MaxWarmupReplicas < 0:
		rc.MaxWarmupReplicas = 0
	}
	rc.ProbingInterval = c.ProbingRebalanceInterval
	rc.ApplicationServer = c.ApplicationServer
	rc.BlockCacheBytes, rc.MemTableBytes, rc.StoreCacheBytes = c.BlockCacheBytes, c.MemTableBytes, c.StoreCacheBytes
	rc.PebbleOptions, rc.StoreEngine = c.PebbleOptions, c.StoreEngine
	rc.OnUncaught = c.uncaughtAction()
	rc.RestartBackoff, rc.MaxRestarts, rc.RestartWindow = c.RestartBackoff, c.MaxRestarts, c.RestartWindow
	rc.ExactlyOnce = c.Guarantee == ExactlyOnce
	rc.StreamsProtocol = c.GroupProtocol == GroupProtocolStreams
	rc.TransactionTimeout = c.TransactionTimeout
	rc.StallTimeout = c.StallTimeout
	rc.Compression, _ = c.Compression.codec() // validated by compile
	rc.Linger = c.Linger
	if c.StateListener != nil {
		l := c.StateListener
		rc.OnState = func(old, new runtime.State) { l(State(old), State(new)) }
	}
	if c.StandbyListener != nil {
		rc.StandbyListener = standbyListener{c.StandbyListener}
	}
	if rc.ReplicationFactor == 0 {
		rc.ReplicationFactor = -1
	}
	c.observability(&rc)
	if c.TLS != nil {
		rc.ClientOpts = append([]kgo.Opt{kgo.DialTLSConfig(c.TLS)}, rc.ClientOpts...)
	}
	if c.SASL != nil {
		rc.ClientOpts = append([]kgo.Opt{kgo.SASL(c.SASL)}, rc.ClientOpts...)
	}
	return rc
}

// UncaughtErrorPolicy is what an instance does when processing fails with an error nothing
// handled ([Config.UncaughtErrorPolicy]), Kafka Streams' StreamThreadExceptionResponse.
type UncaughtErrorPolicy int

const (
	// StopInstance stops this instance: Run returns the error. Kafka Streams'
	// SHUTDOWN_CLIENT; the default.
	StopInstance UncaughtErrorPolicy = iota
	// ShutdownApplication stops every instance of the application: this one asks the
	// group (a flag in its join metadata, which the group's leader passes to every member
	// in its assignment), and each instance's Run returns an error wrapping
	// [ErrApplicationShutdown]. Kafka Streams' SHUTDOWN_APPLICATION.
	ShutdownApplication
	// RestartProcessing closes this instance's tasks, keeps its stores, and joins the
	// group again after [Config.RestartBackoff], within [Config.MaxRestarts]. Kafka
	// Streams' REPLACE_THREAD.
	RestartProcessing
)

// String returns the policy's name.
func (p UncaughtErrorPolicy) String() string {
	switch p {
	case StopInstance:
		return "StopInstance"
	case ShutdownApplication:
		return "ShutdownApplication"
	case RestartProcessing:
		return "RestartProcessing"
	}
	return fmt.Sprintf("UncaughtErrorPolicy(%d)", int(p))
}

// ErrApplicationShutdown is wrapped by the error [App.Run] returns on every instance when one
// instance asked for the application to shut down ([ShutdownApplication]); that error is an
// [*ApplicationShutdownError].
var ErrApplicationShutdown = runtime.ErrApplicationShutdown

// ApplicationShutdownError is the error [App.Run] returns when the application was shut down
// at an instance's request ([ShutdownApplication]). It wraps [ErrApplicationShutdown] and,
// on the instance that asked, that instance's own error (errors.Is and errors.As find it).
type ApplicationShutdownError struct {
	// App is the application id.
	App string
	// Instance names the instance that asked: its client id, quoted (Config.ClientID, or
	// <ApplicationID>-<process id>), and its Config.ApplicationServer endpoint if it has one.
	Instance string
	// Cause is the text of the error that made it ask.
	Cause string
	// Err is that error on the instance that asked; nil on the others.
	Err error
}

// Error names the application, the instance that asked and its error.
func (e *ApplicationShutdownError) Error() string {
	return (&runtime.ApplicationShutdownError{App: e.App, Instance: e.Instance, Cause: e.Cause}).Error()
}

// Unwrap returns ErrApplicationShutdown and, on the instance that asked, its error.
func (e *ApplicationShutdownError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrApplicationShutdown, e.Err}
	}
	return []error{ErrApplicationShutdown}
}

// publicRunError turns the runtime's ApplicationShutdownError into the public one.
func publicRunError(err error) error {
	var se *runtime.ApplicationShutdownError
	if errors.As(err, &se) && err == error(se) {
		return &ApplicationShutdownError{App: se.App, Instance: se.Instance, Cause: se.Cause, Err: se.Err}
	}
	return err
}

// uncaughtAction maps the uncaught-error settings to the runtime's; nil means stop always.
func (c Config) uncaughtAction() func(error) runtime.UncaughtAction {
	if c.UncaughtErrorHandler == nil && c.UncaughtErrorPolicy == StopInstance {
		return nil
	}
	toAction := func(p UncaughtErrorPolicy) runtime.UncaughtAction {
		switch p {
		case ShutdownApplication:
			return runtime.UncaughtShutdownApplication
		case RestartProcessing:
			return runtime.UncaughtRestart
		}
		return runtime.UncaughtStop
	}
	if h := c.UncaughtErrorHandler; h != nil {
		return func(err error) runtime.UncaughtAction { return toAction(h(err)) }
	}
	p := c.UncaughtErrorPolicy
	return func(error) runtime.UncaughtAction { return toAction(p) }
}
