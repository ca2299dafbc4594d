package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	goruntime "runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kstream-go/kstream/store"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kotel"
)

// Runtime runs one application instance: one group member, its tasks, one producer.
type Runtime struct {
	cfg  Config
	topo *Topology
	log  *slog.Logger

	clientID string // the prefix of the clients' ids, set by Run (clientid.go)

	// caches is the instance's cache budget (Config.Caches): its ReadShare is each store
	// read cache's bound (resizeStoreCachesLocked).
	caches *CacheBudget
	// labels is the context Run was given: its pprof labels are the loop's, which a task
	// turn adds its own to and restores after (labels.go).
	labels context.Context

	// src is what the instance reads (sources.go): set by New, by the resolution of the
	// pattern sources and by prepare, replaced when a pattern source picks up a new topic.
	src atomic.Pointer[sourceIndex]

	consumer *kgo.Client
	producer *kgo.Client
	admin    *kadm.Client
	plain    *kgo.Client // the non-transactional client behind admin

	// prodCtx outlives the run context so that shutdown can still flush outputs.
	prodCtx    context.Context
	prodCancel context.CancelFunc
	dlqGen     atomic.Int64 // bumped on every dead-letter write made from a produce callback
	// acks counts the records produced since the last cut of a commit (commitasync.go);
	// inflight is the at-least-once commit whose tail runs, committing is set meanwhile.
	acks       atomic.Pointer[ackGroup]
	inflight   *inflightCommit
	committing atomic.Bool

	noise  noise    // bounds repeated warnings (retry.go)
	replay replays  // handler decisions for records of aborted transactions (produce.go)
	limits sync.Map // topic -> max.message.bytes when below the default (produce.go)
	// Exactly-once commits and the group's callbacks (see commitTxnLocked): while the
	// session ends a transaction, lost or revoked partitions are set aside in deferred and
	// dropped by the loop once the transaction has ended.
	endMu      sync.Mutex
	ending     bool
	endBegan   time.Time
	blocked    bool // a rebalance waits for the loop to allow it
	deferred   []map[string][]int32
	topicCheck chan struct{} // wakes the topic watcher (watch.go)
	// sessionLost is when the group session was lost (zero while a member); see fetchError.
	sessionLost atomic.Int64

	fatalMu  sync.Mutex
	fatalErr error
	stop     context.CancelFunc // cancels the poll loop on a fatal error
	unc      uncaught           // the uncaught-error policy's state (uncaught.go), under fatalMu

	// mu is held while tasks process a batch, while committing, and in the group
	// callbacks, so that the set of tasks never changes under a running batch.
	mu    sync.Mutex
	tasks map[TaskID]*taskRun
	parts map[topicPartition]*taskRun

	closing atomic.Bool
	state   atomic.Int32
	life    lifecycle                // what the state is derived from, since when, why (lifecycle.go)
	promise func(*kgo.Record, error) // r.onProduced, bound once

	internal   map[string]bool // repartition topics, purged up to the committed offsets
	changelogs map[string]bool // changelog topics, written to the task's partition

	// keepPartition are the internal topics whose records carry their partition.
	keepPartition map[string]bool

	stores     *stores
	restorers  map[TaskID]chan struct{} // restorations in flight, closed when done
	restoreCtx context.Context          // ends when the instance shuts down
	purging    atomic.Bool              // a purge is in flight
	bg         sync.WaitGroup           // background work that Run waits for
	global     *globalRunner            // global stores (global.go); nil without any

	// Exactly-once (eos.go). sess is nil under at-least-once; inTxn and revoked are
	// guarded by mu.
	sess      txnSession
	txnID     string
	inTxn     bool
	txnBegan  time.Time // when the open transaction began
	revoked   bool      // partitions were revoked or lost since the session's last End
	txnFailed atomic.Bool
	fence     fenceState  // a fenced producer being handled (fence.go)
	migrating atomic.Bool // the session is being replaced after a fence
	commitNow atomic.Bool // a buffer is full: commit at the end of this poll
	// joins follows the group's joins, so that a periodic commit does not hold every task
	// while the group rejoins (joinwatch.go).
	joins joinWatch
	stats commitStats

	// wake is when the loop must look at the tasks again (wakeLocked); set and read by the
	// loop's goroutine.
	wake time.Time
	// unpause are partitions paused for a full buffer and then revoked: the loop resumes
	// them (flowControlLocked). Guarded by mu.
	unpause map[string][]int32

	// Task turns on their own goroutines (turns.go): turns counts those running (launched
	// under mu, waited for under mu by quiesceLocked), preempt asks them to stop at the next
	// record boundary, kick cuts the loop's poll short when one ends.
	turns   sync.WaitGroup
	preempt atomic.Bool
	kick    kicker
	// holding and holdUntil are the loop's: do not poll (until then), see holdLocked.
	holding   bool
	holdUntil time.Time

	// patterns are the pattern sources (resolvePatterns).
	patterns []patternSource
	// otherCounts are the partition counts of other topics that sinks with a stream
	// partitioner write (PartitionCount), topic to int32.
	otherCounts sync.Map
	standby     *standbys
	wantMu      sync.Mutex
	want        []TaskID // standby and warm-up tasks of the last assignment
	assigned    []TaskID // active tasks of the last assignment
	warmups     []TaskID // warm-up tasks of the last assignment (probe.go)
	targets     []TaskID // tasks the last assignment moves here in a later round (assignedTasks)
	memberID    string   // this member's id, from the last assignment
	// liveID is the member id the broker knows this member by now (kgo's, at the last
	// assignment): a static member that came back without a rebalance has a new id, while
	// the assignment it got back still names it by its previous one (memberID).
	liveID string
	// assignedAt is when the last assignment came; probed is set once this member asked for
	// a rebalance because its warm-ups caught up since then (probe.go).
	assignedAt time.Time
	probed     bool
	member     membership // the membership seam (member.go)

	// Interactive queries (query.go).
	query  queryRuntime
	qindex queryIndex

	met *metrics // Config.Metrics (metrics.go); nil without
	ops opsState // Status and Health (status.go)
}

type topicPartition struct {
	topic     string
	partition int32
}

type taskRun struct {
	id     TaskID
	task   Task // nil while the task's stores restore
	parts  map[topicPartition]*partPos
	stores map[string]*loggedStore
	// group buffers the fetched records of the task's partitions across polls and hands
	// them out in timestamp order (partgroup.go).
	group *PartitionGroup
	// punctuated is set when a wall-clock punctuator ran since the last commit: its writes
	// and outputs need one even if no record was processed.
	punctuated bool
	// ready, idleWake and lagWait are the group's last answer (PartitionGroup.Ready):
	// whether the task may process, when an idle partition stops holding it back, and
	// whether it waits for a lag (see wakeLocked).
	ready    bool
	idleWake time.Time
	lagWait  bool
	// processed counts the records the task processed (Status).
	processed int64
	// met and tracer are set with Config.Metrics and Config.Tracer (metrics.go).
	met    *TaskMetrics
	tracer *kotel.Tracer
	// labels carries the task's pprof labels (labels.go), base those of the loop.
	labels, base context.Context

	// busy is set while a turn of the task runs on its own goroutine (turns.go): only that
	// goroutine touches the task then. The fields below are the loop's, guarded by mu:
	// records fetched while busy wait in inbox (inboxN counts them per partition),
	// launchSize is what the last turn left in the group per partition when the running turn
	// began (see taskRun.buffered), resumed the partitions resumed during the turn, lastStatus
	// the task's status when Status last saw it at rest.
	busy atomic.Bool
	// turnProcessed is processed as of the end of the last turn, for Status during a turn.
	turnProcessed atomic.Int64
	// inboxed is set while the inbox holds records (read by the turn when it ends).
	inboxed    atomic.Bool
	inbox      []inboxed
	inboxN     map[topicPartition]int
	launchSize map[topicPartition]int
	lastStatus *TaskStatus
	resumed    []resumedAt
	// launchedAt is when the running (or last) turn was launched (holdLocked).
	launchedAt time.Time
	// leftover is what the task's partition group held per partition when its last turn
	// ended: written by the turn, read by the loop while the task is idle.
	leftover map[topicPartition]int
}

type partPos struct {
	next  int64 // offset after the last processed record; -1 if none processed yet
	epoch int32
	dirty bool
	count int64 // records processed since the last commit
	// committed is the position this instance last committed (exactly-once), -1 if none:
	// after an abort the consumer goes back there (see rewindLocked).
	committed kgo.EpochOffset
	// first is the offset of the first record fetched since the partition was assigned or
	// the consumer moved back, -1 if none: where an abort moves back to when nothing was
	// committed.
	first kgo.EpochOffset
	// paused is set while the partition's fetching is paused because its buffer is full. The
	// loop sets it while the task's turn may run (turns.go).
	paused atomic.Bool
	// What is known of the partition's lag (lag.go): from the last fetch that returned
	// records, or else from the broker's offsets.
	fetched   bool
	fetchedTo int64 // offset after the last record fetched (control records too)
	end       int64 // the partition's end (last stable offset under exactly-once) then
	fetchedAt time.Time
	probe     *lagProbe
	waitSince time.Time // since when the task waits for this partition's lag
	// staleNoted is the time of the lag last logged as stale (noteStale).
	staleNoted time.Time
	met        *partMetrics // Config.Metrics: the partition's lag (metrics.go); nil without
}

// newPartPos is the position of a partition just assigned.
func newPartPos() *partPos {
	return &partPos{next: -1, committed: kgo.EpochOffset{Offset: -1}, first: kgo.EpochOffset{Offset: -1}}
}

// New validates cfg and topo. It opens no connection.
func New(topo *Topology, cfg Config) (*Runtime, error) {
	if cfg.ApplicationID == "" {
		return nil, errors.New("kstream: Config.ApplicationID is required")
	}
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("kstream: Config.Brokers is empty")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.CommitInterval <= 0 {
		cfg.CommitInterval = 30 * time.Second
		if cfg.ExactlyOnce {
			cfg.CommitInterval = 100 * time.Millisecond
		}
	}
	if cfg.TransactionTimeout <= 0 {
		cfg.TransactionTimeout = 10 * time.Second
	}
	if cfg.MaxPollRecords <= 0 {
		cfg.MaxPollRecords = 10000
	}
	if cfg.BufferedRecordsPerPartition <= 0 {
		cfg.BufferedRecordsPerPartition = 1000
	}
	if cfg.CloseTimeout <= 0 {
		cfg.CloseTimeout = 30 * time.Second
	}
	if cfg.ProbingInterval <= 0 {
		cfg.ProbingInterval = defaultProbingInterval
	}
	if cfg.StateDir == "" {
		cfg.StateDir = filepath.Join(os.TempDir(), "kstream", cfg.ApplicationID)
	}
	if cfg.OnProduceError == nil {
		cfg.OnProduceError = func(ProduceFailure) Decision { return Decision{} }
	}
	r := &Runtime{
		cfg:        cfg,
		topo:       topo,
		log:        cfg.Logger,
		labels:     context.Background(),
		tasks:      map[TaskID]*taskRun{},
		parts:      map[topicPartition]*taskRun{},
		internal:   map[string]bool{},
		changelogs: map[string]bool{},
		stores:     &stores{dir: cfg.StateDir, log: cfg.Logger, cacheBytes: cfg.BlockCacheBytes, memTableBytes: cfg.MemTableBytes, engine: cfg.StoreEngine, tune: cfg.PebbleOptions},
		restorers:  map[TaskID]chan struct{}{},
		unpause:    map[string][]int32{},
	}
	r.caches = cfg.Caches
	if r.caches == nil {
		r.caches = NewCacheBudget(cfg.StoreCacheBytes, 0)
	}
	r.standby = newStandbys(r)
	r.acks.Store(newAckGroup())
	r.member = newClassicMembership(r)
	if cfg.StreamsProtocol {
		r.member = newStreamsMembership(r)
	}
	r.qindex = newQueryIndex(topo)
	if cfg.Metrics != nil {
		r.met = newMetrics(r, cfg.Metrics)
	}
	for _, st := range topo.SubTopologies {
		for _, spec := range st.Stores {
			if spec.Changelog != "" && !spec.SourceTopic {
				r.changelogs[spec.Changelog] = true
			}
		}
	}
	r.promise = r.onProduced
	r.keepPartition = map[string]bool{}
	for _, it := range topo.InternalTopics {
		r.internal[it.Name] = true
		if it.KeepPartition {
			r.keepPartition[it.Name] = true
		}
	}
	if err := sourcesOnce(topo); err != nil {
		return nil, err
	}
	r.src.Store(newSourceIndex(topo, nil))
	return r, nil
}

// fail records the first fatal error and stops the poll loop, and Run unless the
// uncaught-error policy restarts the processing or shuts the application down (uncaught.go).
func (r *Runtime) fail(err error) { r.failAs(err, false) }

// runLoop runs the poll loop under its own context (loopContext).
func (r *Runtime) runLoop(runCtx context.Context) error {
	ctx, cancel := r.loopContext(runCtx)
	defer cancel()
	return r.loop(ctx)
}

// failStop records err as the fatal error, in place of any (err says what became of it: a
// restart that gave up wraps it), and stops Run, whatever the uncaught-error policy.
func (r *Runtime) failStop(err error) {
	r.fatalMu.Lock()
	r.fatalErr = err
	r.log.Error("kstream: fatal error", "app", r.cfg.ApplicationID, "err", err)
	r.unc.action = UncaughtStop
	stop := r.stop
	r.fatalMu.Unlock()
	if stop != nil {
		stop()
	}
}

func (r *Runtime) fatal() error {
	r.fatalMu.Lock()
	defer r.fatalMu.Unlock()
	return r.fatalErr
}

// Run starts the instance and blocks until ctx is done (then it shuts down gracefully and
// returns nil) or a fatal error occurs (then it returns that error).
func (r *Runtime) Run(ctx context.Context) (err error) {
	r.setState(StateCreated, "starting")
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	r.fatalMu.Lock()
	r.stop = stop
	r.fatalMu.Unlock()
	r.prodCtx, r.prodCancel = context.WithCancel(context.WithoutCancel(ctx))
	defer r.prodCancel()
	r.restoreCtx = runCtx
	r.labels = ctx
	if r.met != nil {
		if err := r.met.register(); err != nil {
			r.fail(err)
			r.setState(StateError, "")
			return err
		}
		defer r.met.unregister()
	}

	// Claim the state directory before anything else (statedir.go); released last, after
	// the stores close.
	lock, err := r.claimStateDir()
	if err != nil {
		r.fail(err)
		r.setState(StateError, "")
		return err
	}
	defer func() {
		if lerr := lock.release(); lerr != nil && err == nil {
			err = lerr
		}
	}()

	if err := r.initClientID(); err != nil {
		r.fail(err)
		r.setState(StateError, "")
		return err
	}
	if err := r.openProducer(); err != nil {
		r.fail(err)
		r.setState(StateError, "")
		return err
	}
	defer r.producer.Close()
	if err := r.member.check(runCtx, r.plain); err != nil {
		r.fail(err)
		r.setState(StateError, "")
		return err
	}
	// Status's end-offset questions (status.go) end before the admin client closes.
	defer r.ops.stopProbes()
	defer r.bg.Wait() // before the producer (and its admin client) closes
	defer func() {
		if cerr := r.stores.close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if err := r.prepare(runCtx); err != nil {
		r.fail(err)
		r.setState(StateError, "")
		return err
	}
	r.learnLimits(runCtx, r.outputTopics())
	// Global stores bootstrap before the consumer exists, so no task starts before.
	defer r.stopGlobal() // before the stores close
	if err := r.startGlobal(runCtx); err != nil {
		r.fail(err)
		r.setState(StateError, "")
		return err
	}
	// REBALANCING from here until the instance has started, holds its assignment and has
	// restored its tasks (lifecycle.go): the consumer joins the group at once, and an
	// assignment may arrive while the transactional producer is still being initialized.
	r.rebalancing("joining the group")
	if err := r.openConsumer(); err != nil {
		r.fail(err)
		r.setState(StateError, "")
		return err
	}
	r.member.start()
	if r.sess != nil {
		r.rebalancing(fmt.Sprintf("initializing the transactional producer (transactional id %s) and joining the group", r.txnID))
	}
	if err := r.fencePrevious(runCtx); err != nil {
		// The consumer has joined the group already: leave and close it, or it stays a
		// member that heartbeats for as long as the process lives and holds partitions
		// that nobody processes.
		cctx, cancel := context.WithTimeout(r.prodCtx, r.cfg.CloseTimeout)
		r.leaveAndClose(cctx)
		cancel()
		if runCtx.Err() != nil && r.fatal() == nil {
			// Stopped while starting (the transactional id still being initialized, e.g.
			// while the previous incarnation's transaction aborts): a clean stop.
			r.setState(StateNotRunning, "")
			return nil
		}
		r.fail(err)
		r.setState(StateError, "")
		return err
	}
	r.startedRunning()
	r.watchTopics(runCtx)
	r.watchWarmups(runCtx)

	loopErr := r.runLoop(runCtx)
	for loopErr == nil && runCtx.Err() == nil {
		var err error
		ferr, action := r.loopEnded()
		if ferr != nil && action != UncaughtStop {
			// The uncaught-error policy (uncaught.go): restart, or ask the group to shut
			// the application down.
			err = r.recoverFrom(runCtx, ferr, action)
		} else if ferr == nil && r.fencedCause() != nil {
			// A fenced producer is a task migration (fence.go): rejoin with a new session.
			err = r.rejoinAfterFence(runCtx)
		} else {
			break
		}
		if err != nil {
			r.failStop(err)
			break
		}
		if r.fatal() != nil || runCtx.Err() != nil {
			break
		}
		loopErr = r.runLoop(runCtx)
	}
	r.loopEnded()
	r.shutdown(loopErr)
	if se := r.appShutdown(); se != nil && loopErr == nil {
		r.setState(StateError, "")
		return r.fatal() // the shutdown's error, or a fatal error that came first
	}
	if ferr := r.fatal(); ferr != nil {
		r.setState(StateError, "")
		return ferr
	}
	if loopErr != nil {
		r.setState(StateError, "")
		return loopErr
	}
	r.setState(StateNotRunning, "")
	return nil
}

func (r *Runtime) clientOpts(extra ...kgo.Opt) []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(r.cfg.Brokers...), kgo.WithLogger(slogAdapter{r.log}),
		// A leader or coordinator that moved is looked up again at once, not after kgo's
		// default 5s between metadata refreshes: one retriable error costs a round trip.
		kgo.MetadataMinAge(250 * time.Millisecond),
		// A connection that a broker closes right after a request is written is retried like
		// any other cut connection (kgo does not by default, taking it for a TLS or SASL
		// mismatch): a broker that restarts or drops connections under load does that, and a
		// produce failed so stopped the application (TestFaultsAtLeastOnce, once in CI).
		// Produces are idempotent, so a retry writes nothing twice.
		kgo.AlwaysRetryEOF(),
	}
	if r.cfg.Rack != "" {
		opts = append(opts, kgo.Rack(r.cfg.Rack)) // fetch from a replica in this rack (KIP-392)
	}
	opts = append(opts, r.cfg.ClientOpts...)
	return append(opts, extra...)
}

// linger is the producer's linger: Config.Linger, or def when it is zero (none when
// negative).
func (r *Runtime) linger(def time.Duration) time.Duration {
	switch {
	case r.cfg.Linger < 0:
		return 0
	case r.cfg.Linger > 0:
		return r.cfg.Linger
	}
	return def
}

// compression is the producer option of Config.Compression (its zero value is
// kgo.NoCompression()).
func (r *Runtime) compression() []kgo.Opt {
	return []kgo.Opt{kgo.ProducerBatchCompression(r.cfg.Compression)}
}

func (r *Runtime) openProducer() error {
	opts := r.clientOpts(
		// Java producers hash keyed records with murmur2; so does this partitioner, so Go
		// and Java applications place equal keys on equal partitions.
		kgo.RecordPartitioner(partitioner{sticky: kgo.StickyKeyPartitioner(nil), manual: kgo.ManualPartitioner(), changelogs: r.changelogs, keep: r.keepPartition}),
		kgo.ProducerLinger(r.linger(5*time.Millisecond)),
		kgo.UnknownTopicRetries(3),
		kgo.ProducerBatchMaxBytesFn(r.batchLimit),
		// At most two polls' worth of records buffered (20,000; kgo's default is 50,000):
		// every record waiting for its acknowledgement holds its kgo.Record and encoding on
		// the heap, and a commit's changelog burst (a record per key changed) on top of the
		// outputs filled the buffer far enough to be several MiB of a count's peak RSS;
		// Produce waits for room instead. One poll's worth (10,000) cost a fifth of the
		// passthrough's throughput (a poll's outputs waited for the previous poll's
		// acknowledgements); two cost nothing measurable (bench/README.md, memory).
		kgo.MaxBufferedRecords(r.producerMaxBufferedRecords()),
		r.clientIDOpt(roleProducer),
	)
	opts = append(opts, r.compression()...)
	opts = append(opts, r.clientMetrics("producer", "")...)
	opts = append(opts, r.cfg.ProducerOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kstream: creating producer: %w", err)
	}
	r.producer = cl
	r.admin = kadm.NewClient(cl)
	r.plain = cl
	return nil
}

// fetchMaxPartitionBytes is the consumer's FetchMaxPartitionBytes (max.partition.fetch.bytes):
// see openConsumer. Config.ConsumerOptions may override it.
const fetchMaxPartitionBytes = 256 << 10

// producerMaxBufferedRecords is the producer's MaxBufferedRecords, twice the records of a
// poll (20,000 by default): see openProducer. Config.ProducerOptions may override it.
func (r *Runtime) producerMaxBufferedRecords() int { return 2 * r.cfg.MaxPollRecords }

// sourceTopics returns the topics the tasks consume, sorted.
func (r *Runtime) sourceTopics() []string {
	var topics []string
	for t := range r.sources().topicSub {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	return topics
}

func (r *Runtime) openConsumer() error {
	reset := kgo.NewOffset().AtStart()
	if r.cfg.DefaultReset == ResetLatest {
		reset = kgo.NewOffset().AtEnd()
	}
	opts := r.clientOpts(
		kgo.ConsumeResetOffset(reset),
		// Java's fetch.max.wait.ms (500 ms), not kgo's 5 s. A fetch waits that long when none
		// of its partitions has data, and a partition resumed meanwhile (flowControlLocked) is
		// only in the next request: its task, waiting for it (PartitionGroup.Ready), could wait
		// as long as staleLag and then run ahead of it, which made a stream-stream left join
		// emit non-matches before their match arrived (a CI rehearsal on Apache Kafka).
		kgo.FetchMaxWait(500*time.Millisecond),
		// 256 KiB of each partition per fetch, not kgo's (and Java's) 1 MiB: a task holds
		// records of several fetches at once (its partition group and inbox), and each
		// record keeps its whole fetch response and decoded batch alive, so with 1 MiB per
		// partition the records in flight were the largest part of the Go heap (about 35 MB
		// of a count over 6 partitions, twice that in RSS with the GC's headroom); at 256 KiB
		// they take 5 MB, at the same throughput (bench/README.md, memory). A batch larger
		// than this still comes whole (bench/compare's input batches are about 370 KiB: a
		// fetch then returns one batch of each partition, and a smaller limit changes
		// nothing).
		kgo.FetchMaxPartitionBytes(fetchMaxPartitionBytes),
		kgo.WithHooks(&r.joins),
		kgo.AdjustFetchOffsetsFn(r.adjustOffsets),
		// Control records (transaction markers) come too, so that the position after the
		// last fetched record is the consumer's, which the lag of a partition needs (lag.go);
		// processLocked drops them.
		kgo.KeepControlRecords(),
		r.clientIDOpt(roleConsumer),
	)
	opts = append(opts, r.member.groupOpts()...)
	opts = append(opts, r.clientMetrics("consumer", "")...)
	opts = append(opts, r.traceOpts()...)
	opts = append(opts, r.cfg.ConsumerOpts...)
	if r.cfg.ExactlyOnce {
		return r.openSession(opts)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kstream: creating consumer: %w", err)
	}
	r.consumer = cl
	return nil
}

// openSession creates the transactional group member of exactly-once: one client that
// consumes read_committed and produces transactionally. The non-transactional client made
// by openProducer stays the admin client.
func (r *Runtime) openSession(consumerOpts []kgo.Opt) error {
	pid, err := processID(r.cfg.StateDir)
	if err != nil {
		return err
	}
	if r.txnID == "" { // the same id again after a fence (fence.go)
		r.txnID = r.cfg.ApplicationID + "-" + pid
		r.stats.mu.Lock()
		r.stats.txnID = r.txnID // Stats reads it from other goroutines
		r.stats.mu.Unlock()
	}
	opts := append(consumerOpts,
		kgo.TransactionalID(r.txnID),
		kgo.TransactionTimeout(r.cfg.TransactionTimeout),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.RecordPartitioner(partitioner{sticky: kgo.StickyKeyPartitioner(nil), manual: kgo.ManualPartitioner(), changelogs: r.changelogs, keep: r.keepPartition}),
		kgo.ProducerLinger(r.linger(0)),
		kgo.UnknownTopicRetries(3),
		kgo.ProducerBatchMaxBytesFn(r.batchLimit),
		kgo.MaxBufferedRecords(r.producerMaxBufferedRecords()), // see openProducer
	)
	opts = append(opts, r.compression()...)
	opts = append(opts, r.cfg.ProducerOpts...)
	sess, err := r.newTxnSession(opts)
	if err != nil {
		return fmt.Errorf("kstream: creating the transactional consumer and producer (transactional id %s): %w", r.txnID, err)
	}
	r.sess = sess
	r.consumer, r.producer = sess.Client(), sess.Client()
	r.log.Info("kstream: exactly-once", "app", r.cfg.ApplicationID, "transactional_id", r.txnID)
	return nil
}

// adjustOffsets applies per-source reset policies to partitions that have no committed
// offset (kgo reports those with the client-wide reset offset, which is negative): the
// client-wide reset is the earliest offset, or the latest with a DefaultReset of
// ResetLatest; a source whose policy differs starts where its own says, a by-duration one
// at the first record stamped at or after now minus its duration (the end if none).
func (r *Runtime) adjustOffsets(_ context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	clientWide := ResetEarliest
	if r.cfg.DefaultReset == ResetLatest {
		clientWide = ResetLatest
	}
	now := time.Now()
	for _, srcs := range r.sources().subs {
		for _, src := range srcs {
			policy, d := r.sourceReset(src)
			if policy == clientWide {
				continue // the client-wide reset already applies
			}
			for p, o := range offsets[src.Topic] {
				if o.EpochOffset().Offset >= 0 {
					continue
				}
				switch policy {
				case ResetLatest:
					offsets[src.Topic][p] = kgo.NewOffset().AtEnd()
				case ResetByDuration:
					offsets[src.Topic][p] = kgo.NewOffset().AfterMilli(now.Add(-d).UnixMilli())
				default:
					offsets[src.Topic][p] = kgo.NewOffset().AtStart()
				}
			}
		}
	}
	return offsets, nil
}

// sourceReset is the reset policy of src, and its duration for ResetByDuration: its own,
// else the config's, else ResetEarliest. A repartition topic, which the application
// writes itself, does not start by duration: it starts at its earliest record, as in
// Kafka Streams, which resets internal topics to the earliest offset.
func (r *Runtime) sourceReset(src Source) (Reset, time.Duration) {
	policy, d := src.Reset, src.ResetDuration
	if policy == ResetDefault {
		policy, d = r.cfg.DefaultReset, r.cfg.DefaultResetDuration
	}
	if policy == ResetDefault || policy == ResetByDuration && src.Internal {
		policy = ResetEarliest
	}
	return policy, d
}

// loop polls and processes until ctx is done or a fatal error. It returns a non-nil error
// only for failures of the loop itself.
func (r *Runtime) loop(ctx context.Context) error {
	lastCommit := time.Now()
	defer r.ops.loopEnded()
	for {
		// Wake up when the next commit is due even if no record arrives, so that an idle
		// instance still commits what it processed; and when a task must be looked at again
		// (a wall-clock punctuation, the end of an idle wait).
		wait := max(time.Until(lastCommit.Add(r.cfg.CommitInterval)), 5*time.Millisecond)
		if r.committing.Load() {
			// A commit's tail runs, and the next commit waits for it: the tail kicks the
			// loop when it ends (commitasync.go).
			wait = max(wait, r.cfg.CommitInterval)
		}
		if !r.wake.IsZero() {
			wait = min(wait, max(time.Until(r.wake), time.Millisecond))
		}
		if r.holding {
			wait = min(wait, max(time.Until(r.holdUntil), time.Millisecond))
		}
		r.ops.turn(wait) // Health: a loop that stops turning is not live (status.go)
		// A task's turn that ends cuts the poll short (turns.go).
		pctx, cancel := r.kick.pollContext(ctx, wait)
		var fetches kgo.Fetches
		if r.holding {
			// A task that keeps up has a buffer's worth waiting already: poll again once its
			// turn has ended (it kicks), as the loop did when it waited for every turn.
			<-pctx.Done()
		} else {
			var polled time.Time
			if r.met != nil {
				polled = time.Now()
			}
			fetches = r.consumer.PollRecords(pctx, r.cfg.MaxPollRecords)
			if r.met != nil {
				r.met.polled(time.Since(polled), fetches.NumRecords())
			}
		}
		cancel()
		if fetches.IsClientClosed() || ctx.Err() != nil {
			r.consumer.AllowRebalance()
			return nil
		}
		errs := 0
		fetches.EachError(func(topic string, p int32, err error) {
			if r.fetchError(topic, p, err) {
				errs++
			}
		})
		if r.fatal() != nil || r.fencedCause() != nil {
			r.consumer.AllowRebalance()
			return nil
		}
		if errs > 0 && fetches.NumRecords() == 0 {
			// Only errors (an unreachable broker, a deleted topic): do not spin; let a
			// rebalance through meanwhile.
			r.mu.Lock()
			allow := r.sess == nil || !r.inTxn
			r.mu.Unlock()
			if allow {
				r.allowRebalance()
				r.afterRebalance(ctx)
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}

		r.mu.Lock()
		// A commit due now stops the running turns (quiesceLocked): no new turn is launched
		// just before it, or a turn launched when the loop wakes for the commit would be
		// stopped before it did anything, every time (a wall-clock punctuator of an idle task
		// would never run). Those tasks are launched on the next turn of the loop, at once.
		commit := time.Since(lastCommit) >= r.cfg.CommitInterval || r.commitNow.Load()
		if commit && r.inflight != nil && !r.commitOverLocked() {
			// The previous commit's tail still runs: the tasks go on, and the loop commits
			// once it is over (the tail kicks it; commitasync.go).
			commit = false
		}
		if commit && r.joins.putOff(lastCommit) {
			commit = false // the group is joining: see joinWatch
		}
		if errs == 0 && fetches.NumRecords() > 0 && State(r.state.Load()) == StateRebalancing {
			// Records fetched without an error: the group session is whole again. A session
			// error noted after the rejoin it caused (its fetch was polled late) left the
			// state REBALANCING with nothing after it to end it (lifecycle.go).
			r.maybeRunningLocked()
		}
		if r.commitOverLocked() {
			r.quiesceLocked()
			r.endCommitLocked()
		}
		r.processLocked(fetches, !commit)
		if r.fatal() == nil && r.fencedCause() == nil && commit {
			r.commitNow.Store(false)
			// The interval counts from the start of a commit, as Kafka Streams' lastCommitMs:
			// a record that arrives as a commit begins waits one interval plus one commit,
			// not one interval plus two.
			started := time.Now()
			cctx, cancel := context.WithTimeout(r.prodCtx, r.cfg.CloseTimeout)
			if r.sess == nil {
				cctx = context.WithValue(cctx, periodicKey{}, true) // see PeriodicCommit
			}
			var err error
			if r.sess == nil && !r.cfg.BlockingCommits {
				err = r.commitAsyncLocked(cctx)
			} else {
				err = r.commitLocked(cctx)
			}
			cancel()
			switch {
			case errors.Is(err, errCommitInFlight):
				// Not reached (a commit in flight is not due, above); the loop tries again.
			case errors.Is(err, errJoining):
				// Not a commit: the next turn of the loop tries again (see joinWatch).
				r.log.Debug("kstream: commit put off while the group joins", "app", r.cfg.ApplicationID)
			default:
				if err != nil {
					r.log.Warn("kstream: commit failed; records since the last commit will be processed again", "app", r.cfg.ApplicationID, "err", err)
				}
				lastCommit = started
			}
		}
		r.holding, r.holdUntil = r.holdLocked()
		// Under exactly-once, rebalances go through only between transactions, so that
		// partitions are given up with everything processed committed.
		allow := r.sess == nil || !r.inTxn
		r.mu.Unlock()
		if allow {
			r.allowRebalance()
			r.afterRebalance(ctx)
		}
		if r.fatal() != nil || r.fencedCause() != nil {
			return nil
		}
	}
}

// fetchError decides what a poll's error means. Conditions that heal by waiting (an
// unreachable broker, a leader or coordinator that moved, a group session that kgo is
// rejoining) are logged at warn, at most once per interval, and waited out; only an
// authorization failure, or Config.GiveUpAfter passing, stops the application. A deleted
// source topic is decided by the topic watcher (watch.go), which this wakes. It reports
// whether err is an error at all (a poll that only timed out is not).
func (r *Runtime) fetchError(topic string, p int32, err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var dl *kgo.ErrDataLoss
	if errors.As(err, &dl) {
		r.log.Warn("kstream: data loss detected, consuming from the reset offset", "topic", topic, "partition", p, "err", err)
		return true
	}
	if authError(err) {
		where := fmt.Sprintf("topic %q partition %d", topic, p)
		if topic == "" {
			where = fmt.Sprintf("group %q", r.cfg.ApplicationID)
		}
		r.fail(fmt.Errorf("kstream: consuming %s: not authorized: %w", where, err))
		return true
	}
	var gs *kgo.ErrGroupSession
	if errors.As(err, &gs) || topic == "" {
		// kgo reports a lost group session (a broker that went away, a heartbeat that
		// failed, a generation that moved on) and rejoins by itself, with backoff. The
		// partitions were given up in onLost; they come back with the next assignment.
		now := time.Now().UnixNano()
		r.sessionLost.CompareAndSwap(0, now)
		if errors.As(err, &gs) {
			// Not leftGroup: kgo rejoins by itself, and the partitions it gives up go through
			// onLost; the error may also be polled after the rejoin it caused.
			r.rebalancing(fmt.Sprintf("not a member of the group (%v): rejoining", err))
		}
		since := time.Duration(now - r.sessionLost.Load())
		if r.cfg.GiveUpAfter > 0 && since > r.cfg.GiveUpAfter {
			r.fail(fmt.Errorf("kstream: group %q: not a member for %s (Config.GiveUpAfter %s): %w", r.cfg.ApplicationID, since.Round(time.Millisecond), r.cfg.GiveUpAfter, err))
			return true
		}
		r.warnEvery("group", "kstream: not a member of the group; waiting for the cluster and rejoining", "group", r.cfg.ApplicationID, "waited", since.Round(time.Millisecond), "err", err)
		return true
	}
	if errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, kerr.UnknownTopicID) {
		r.checkTopicsSoon()
	}
	r.warnEvery("fetch "+topic, "kstream: fetch error; retrying", "topic", topic, "partition", p, "err", err)
	return true
}

// authError reports whether err is an authorization or authentication failure: it does not
// heal by waiting.
func authError(err error) bool {
	return errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.GroupAuthorizationFailed) ||
		errors.Is(err, kerr.ClusterAuthorizationFailed) || errors.Is(err, kerr.SaslAuthenticationFailed) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed)
}

// allowRebalance lets a waiting rebalance through (the loop holds no records and, under
// exactly-once, no open transaction).
func (r *Runtime) allowRebalance() {
	r.endMu.Lock()
	r.blocked = false
	r.endMu.Unlock()
	r.consumer.AllowRebalance()
}

// onBlocked is called (on its own goroutine) when kgo wants to run a rebalance callback but
// the loop has not allowed rebalances. While an exactly-once commit has been ending its
// transaction for endGrace, the rebalance is let through: the session may be waiting for the
// group (a heartbeat that the lost session will never answer), and the group for the loop.
// The callbacks then only set their partitions aside (deferDrop), and the transaction
// aborts (see endTxnLocked).
func (r *Runtime) onBlocked(_ context.Context, cl *kgo.Client) {
	r.endMu.Lock()
	defer r.endMu.Unlock()
	r.blocked = true
	if r.ending && time.Since(r.endBegan) >= endGrace {
		r.log.Info("kstream: a rebalance waits while the transaction ends; letting it through", "transactional_id", r.txnID)
		cl.AllowRebalance()
	}
}

// processLocked buffers one poll's records in their tasks' partition groups (or, for a task
// whose turn runs, in its inbox), then (with launch) launches a turn of every idle task that
// may process a record or has a wall-clock punctuator due, each on its own goroutine,
// without waiting for them (turns.go), and pauses or resumes the partitions whose buffers
// are full or no longer so.
func (r *Runtime) processLocked(fetches kgo.Fetches, launch bool) {
	now := time.Now()
	fetches.EachPartition(func(p kgo.FetchTopicPartition) {
		if len(p.Records) == 0 || r.fatal() != nil {
			return
		}
		tp := topicPartition{p.Topic, p.Partition}
		t := r.parts[tp]
		if t == nil {
			// Not ours any more (revoked between fetch and poll); kgo drops it too.
			return
		}
		if t.task == nil {
			// Still restoring: its partitions are paused before fetching starts, so this
			// should not happen; if it does, fetch these records again later.
			first := p.Records[0]
			r.consumer.SetOffsets(map[string]map[int32]kgo.EpochOffset{p.Topic: {p.Partition: {Epoch: first.LeaderEpoch, Offset: first.Offset}}})
			r.consumer.PauseFetchPartitions(map[string][]int32{p.Topic: {p.Partition}})
			return
		}
		r.addFetchedLocked(t, p, now)
	})
	if r.fatal() != nil {
		return
	}
	var batch []*taskRun
	for _, t := range r.tasks {
		if t.task == nil || t.busy.Load() {
			continue
		}
		r.drainInboxLocked(t)
		t.ready, t.idleWake, t.lagWait = t.groupReady(now)
		if launch && (t.ready || due(t.task.NextPunctuation(), now) || t.asyncCompleted()) {
			batch = append(batch, t)
		}
	}
	if r.fatal() != nil {
		return
	}
	if len(batch) > 0 && r.sess != nil && !r.inTxn {
		// No turn runs outside a transaction (turns.go); this only drains inboxes.
		r.quiesceLocked()
		if err := r.beginTxnLocked(); err != nil {
			if r.fencedCause() != nil {
				// The producer was fenced while this turn began (the fence was noted by a
				// produce or commit callback after the loop checked): the session cannot
				// begin any more, and the loop's next check migrates the tasks (fence.go).
				r.log.Info("kstream: not beginning a transaction: the producer was fenced", "transactional_id", r.txnID, "err", err)
				return
			}
			r.fail(err)
			return
		}
	}
	budget := r.turnBudget()
	r.launchLocked(batch, now, budget)
	r.flowControlLocked()
	r.wake = r.wakeLocked(now)
	r.publishStatusLocked(now)
}

func isControl(r *kgo.Record) bool { return r.Attrs.IsControl() }

// due reports whether a punctuation due at at (zero: none) is due at now.
func due(at, now time.Time) bool { return !at.IsZero() && !at.After(now) }

// turnBudget bounds how long a task processes buffered records in one turn of the loop:
// the commit interval, at most a second and at least 10 ms. Kafka Streams bounds a turn the
// same way (its StreamThread processes a number of records per task that it halves when a
// turn outlasts the commit interval). Without the bound, a turn over a full buffer of slow
// records (a slow operator, a loaded machine) can outlast the transaction timeout under
// exactly-once: the broker aborts the transaction, the producer is fenced, and the same
// records are processed again in a turn just as long, for ever.
func (r *Runtime) turnBudget() time.Duration {
	return min(max(r.cfg.CommitInterval, 10*time.Millisecond), time.Second)
}

// run processes the task's buffered records in the order of its partition group while the
// group is ready, for about budget at most (the rest stays buffered for the next turn, and
// t.ready stays set: see wakeLocked), then runs its wall-clock punctuators that are due.
// The group was ready (or not) at now when the task was picked. Once preempt is set (a
// commit, a rebalance or shutdown waits for the turn: quiesceLocked), it stops at the next
// record boundary and leaves its punctuators for the next turn.
func (t *taskRun) run(now time.Time, budget time.Duration, preempt *atomic.Bool) error {
	pprof.SetGoroutineLabels(t.labels)
	defer pprof.SetGoroutineLabels(t.base)
	// Finished async calls first: handing them back frees the room that lets the task take
	// records again (Async).
	if err := t.resumeAsync(now); err != nil {
		return err
	}
	for n := 1; t.ready; n++ {
		if preempt.Load() {
			return t.maybeFlush()
		}
		if n%32 == 0 && time.Since(now) > budget {
			break
		}
		rec, ts, err := t.group.Next()
		if err != nil {
			return err
		}
		if rec == nil {
			break
		}
		if err := t.process(rec, ts, now); err != nil {
			return err
		}
		pos := t.parts[topicPartition{rec.Topic, rec.Partition}]
		pos.next, pos.epoch, pos.dirty = rec.Offset+1, rec.LeaderEpoch, true
		pos.count++
		if pos.met != nil {
			pos.met.pos.Store(pos.next)
		}
		t.processed++
		t.ready, t.idleWake, t.lagWait = t.groupReady(now)
	}
	if due(t.task.NextPunctuation(), now) && !preempt.Load() {
		var began time.Time
		if t.met != nil {
			began = time.Now()
		}
		ran, err := t.task.Punctuate(now)
		if err != nil {
			return err
		}
		if ran && t.met != nil {
			t.met.m.punctuations.Add(1)
			t.met.m.punctLatency.Observe(time.Since(began).Seconds())
		}
		t.punctuated = t.punctuated || ran
	}
	return t.maybeFlush()
}

// flowControlLocked pauses fetching the partitions whose buffer holds more than
// BufferedRecordsPerPartition records after their task processed what it could (Kafka
// Streams' buffered.records.per.partition), and resumes those whose buffer went back to
// it. A task that keeps up never pauses: only one that waits (for another partition, see
// PartitionGroup.Ready) does.
func (r *Runtime) flowControlLocked() {
	limit := r.cfg.BufferedRecordsPerPartition
	var pause, resume map[string][]int32
	if len(r.unpause) > 0 {
		resume, r.unpause = r.unpause, map[string][]int32{}
	}
	for _, t := range r.tasks {
		if t.task == nil {
			continue
		}
		// While a turn of t runs, its group is its own: see taskRun.buffered.
		busy := t.busy.Load()
		for tp, pos := range t.parts {
			n := t.buffered(tp, busy, limit)
			switch {
			case !pos.paused.Load() && n > limit:
				pos.paused.Store(true)
				if pause == nil {
					pause = map[string][]int32{}
				}
				pause[tp.topic] = append(pause[tp.topic], tp.partition)
			case pos.paused.Load() && n <= limit:
				pos.paused.Store(false)
				if busy {
					t.resumed = append(t.resumed, resumedAt{tp, time.Now()}) // applied once at rest
				} else if pos.fetched {
					// Nothing was fetched while paused: the lag known from the last fetch
					// is as fresh as now, not as old as the pause (lagOf would otherwise
					// take it for stale once the buffer drains, and let the task run
					// ahead of this partition before its next fetch arrives).
					pos.fetchedAt = time.Now()
				}
				if resume == nil {
					resume = map[string][]int32{}
				}
				resume[tp.topic] = append(resume[tp.topic], tp.partition)
			}
		}
	}
	if pause != nil {
		r.consumer.PauseFetchPartitions(pause)
	}
	if resume != nil {
		r.consumer.ResumeFetchPartitions(resume)
	}
}

// lagRecheck is how soon the loop looks again at a task that waits for the lag of an
// empty partition (a lag probe in flight, see lag.go).
const lagRecheck = 50 * time.Millisecond

// wakeLocked is when the loop must look at the tasks again even if no record arrives: the
// next wall-clock punctuation, the end of an idle wait, or soon when a task waits for a
// lag. Zero means only the commit interval matters.
func (r *Runtime) wakeLocked(now time.Time) time.Time {
	var wake time.Time
	earlier := func(at time.Time) {
		if !at.IsZero() && (wake.IsZero() || at.Before(wake)) {
			wake = at
		}
	}
	for _, t := range r.tasks {
		if t.task == nil || t.busy.Load() {
			continue // a turn that ends kicks the loop (turns.go)
		}
		if t.ready || t.asyncCompleted() {
			earlier(now) // its turn ended with records left to process (turnBudget), or async results wait
		}
		earlier(t.task.NextPunctuation())
		earlier(t.idleWake)
		if t.lagWait {
			earlier(now.Add(lagRecheck))
		}
	}
	return wake
}

// groupReady is the task's partition group's Ready at now, except that a task whose async
// operators take no record now (Async.Saturated) is not ready: its records stay buffered
// until a finished call frees room (the call's completion wakes the loop, see
// Runtime.Wake), and its partitions pause once the buffer is full (flowControlLocked).
func (t *taskRun) groupReady(now time.Time) (ready bool, idleWake time.Time, lagWait bool) {
	ready, idleWake, lagWait = t.group.Ready(now)
	if ready {
		if a, ok := t.task.(Async); ok && a.Saturated() {
			ready = false
		}
	}
	return ready, idleWake, lagWait
}

// asyncCompleted reports whether the task has finished async calls to take back (Async).
func (t *taskRun) asyncCompleted() bool {
	a, ok := t.task.(Async)
	return ok && a.Completed()
}

// resumeAsync hands the task's finished async calls back to it (Async.Resume), in its turn,
// and then asks its group again whether it may process.
func (t *taskRun) resumeAsync(now time.Time) error {
	a, ok := t.task.(Async)
	if !ok || !a.Completed() {
		return nil
	}
	if err := a.Resume(); err != nil {
		return err
	}
	t.ready, t.idleWake, t.lagWait = t.groupReady(now)
	return nil
}

// maybeFlush writes large buffered store changes to the engine early.
func (t *taskRun) maybeFlush() error {
	for _, s := range t.stores {
		if err := s.maybeFlush(); err != nil {
			return fmt.Errorf("kstream: task %s: %w", t.id, err)
		}
	}
	return nil
}

// storesLocked returns the stores of every task.
func (r *Runtime) storesLocked() []*loggedStore {
	var out []*loggedStore
	for _, t := range r.tasks {
		for _, ls := range t.stores {
			out = append(out, ls)
		}
	}
	return out
}

// eachStore calls fn for every store of a commit, on up to GOMAXPROCS goroutines (each
// store on one), and returns the first error in the order of stores. The tasks are at
// rest, and the stores are independent: their logging (each store's changelog records in
// order) and their flushes to the engine, the bulk of a commit of a stateful topology,
// then use every core instead of the loop's alone.
func eachStore(stores []*loggedStore, fn func(*loggedStore) error) error {
	workers := min(len(stores), goruntime.GOMAXPROCS(0))
	if workers <= 1 {
		for _, ls := range stores {
			if err := fn(ls); err != nil {
				return err
			}
		}
		return nil
	}
	errs := make([]error, len(stores))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(stores); i = int(next.Add(1) - 1) {
				errs[i] = fn(stores[i])
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// commitLocked waits until every produced record is acknowledged and then commits the
// processed positions: an offset is committed only after all outputs it covers are durable.
func (r *Runtime) commitLocked(ctx context.Context) error {
	r.quiesceLocked() // every task at rest: its positions cover only what it finished
	if err := r.awaitCommitLocked(ctx); err != nil {
		return err
	}
	if r.sess != nil {
		return r.commitTxnLocked(ctx)
	}
	began := time.Now()
	offsets, _ := r.dirtyOffsetsLocked()
	if len(offsets) == 0 && !r.punctuatedLocked() {
		return nil
	}
	// Work the offsets must cover that the tasks still hold (a batch sink's pending
	// batch) is done first; its dead-letter records, if any, are flushed below.
	if err := r.preCommitLocked(ctx); err != nil {
		return err
	}
	// The pre-commit step may have finished work that held offsets back (Async).
	offsets, dirty := r.dirtyOffsetsLocked()
	stores := r.storesLocked()
	_ = eachStore(stores, func(ls *loggedStore) error { ls.logPending(); return nil })
	if err := r.flush(ctx); err != nil {
		return err
	}
	if err := r.fatal(); err != nil {
		return err
	}
	if err := r.commitOffsets(ctx, offsets); err != nil {
		return err
	}
	var records int64
	for _, pos := range dirty {
		pos.dirty = false
		records += pos.count
		pos.count = 0
	}
	r.committedLocked()
	if err := eachStore(stores, func(ls *loggedStore) error { return ls.checkpoint(offsets) }); err != nil {
		return err
	}
	if err := r.stores.sync(); err != nil {
		return err
	}
	r.noteStoreCachesLocked()
	r.stats.observe(time.Since(began), true, records)
	r.purgeRepartition(offsets)
	return nil
}

// purgeRepartition deletes repartition records below the committed offsets, as Kafka
// Streams does, so that repartition topics do not grow without bound. It runs in the
// background, one purge at a time; a failure only delays the next purge.
func (r *Runtime) purgeRepartition(committed map[string]map[int32]kgo.EpochOffset) {
	purge := kadm.Offsets{}
	for topic, ps := range committed {
		if !r.internal[topic] {
			continue
		}
		for p, o := range ps {
			purge.AddOffset(topic, p, o.Offset, -1)
		}
	}
	if len(purge) == 0 || !r.purging.CompareAndSwap(false, true) {
		return
	}
	r.bg.Go(func() {
		defer r.purging.Store(false)
		ctx, cancel := context.WithTimeout(r.prodCtx, 10*time.Second)
		defer cancel()
		resp, err := r.admin.DeleteRecords(ctx, purge)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			r.log.Debug("kstream: purging repartition topics", "err", err)
		}
	})
}

// flush waits for every record produced so far, including dead-letter records written from
// produce callbacks while flushing.
func (r *Runtime) flush(ctx context.Context) error {
	for {
		gen := r.dlqGen.Load()
		if err := r.producer.Flush(ctx); err != nil {
			return fmt.Errorf("kstream: waiting for produced records to be acknowledged: %w", err)
		}
		if r.dlqGen.Load() == gen {
			return nil
		}
	}
}

func (r *Runtime) onAssigned(_ context.Context, cl *kgo.Client, assigned map[string][]int32) {
	if r.sessionLost.Swap(0) != 0 {
		r.log.Info("kstream: member of the group again", "app", r.cfg.ApplicationID)
	}
	if id, _ := cl.GroupMetadata(); id != "" {
		r.wantMu.Lock()
		r.liveID = id
		r.wantMu.Unlock()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.life.member.Store(true)
	r.quiesceLocked()
	var created []string
	var restoring []*taskRun
	refused := map[string][]int32{}
	for topic, parts := range assigned {
		sub, ok := r.subOf(topic)
		if !ok {
			continue
		}
		for _, p := range parts {
			if n, ok := r.fixedCount(topic); ok && p >= n {
				// A new partition of a source of keyed state (a balancer of another version
				// assigned it): no task, no record of it processed; the topic watcher
				// stops the application (watch.go).
				refused[topic] = append(refused[topic], p)
				continue
			}
			id := TaskID{sub, p}
			t := r.tasks[id]
			if t == nil {
				st := r.topo.SubTopologies[sub]
				t = &taskRun{id: id, parts: map[topicPartition]*partPos{}, met: r.TaskMetrics(id), tracer: r.cfg.Tracer,
					labels: TaskLabels(r.labels, id), base: r.labels}
				t.group = NewPartitionGroup(r.groupConfig(t))
				r.tasks[id] = t
				created = append(created, id.String())
				if len(st.Stores) == 0 {
					task, err := st.NewTask(r, id, nil)
					if err != nil {
						r.fail(fmt.Errorf("kstream: creating task %s: %w", id, err))
						return
					}
					t.task = task
				} else {
					if r.standby.has(id) {
						// Stop following before restoring: the active task restores only
						// the tail written since the standby's last batch.
						r.standby.remove(id, SuspendPromoted)
					}
					restoring = append(restoring, t)
				}
			}
			tp := topicPartition{topic, p}
			t.parts[tp] = newPartPos()
			if r.met != nil {
				t.parts[tp].met = r.met.partition(id, tp)
			}
			t.group.AddPartition(topic, p)
			r.parts[tp] = t
		}
	}
	if len(refused) > 0 {
		cl.PauseFetchPartitions(refused)
		r.log.Warn("kstream: assigned new partitions of a source topic of keyed state; not processing them", "partitions", refused)
		r.checkTopicsSoon()
	}
	// Tasks with stores restore in the background, their input paused meanwhile, so that
	// the other tasks go on processing.
	for _, t := range restoring {
		cl.PauseFetchPartitions(t.partitionMap())
		prev := r.restorers[t.id]
		done := make(chan struct{})
		r.restorers[t.id] = done
		r.bg.Go(func() {
			if prev != nil {
				<-prev // a previous owner of the same stores is still restoring
			}
			r.startTask(t, cl)
			close(done)
			r.reconcileStandbys() // the task may have been revoked and be a standby now
		})
	}
	r.publishQueryLocked()
	r.publishTasksLocked()
	slices.Sort(created)
	r.log.Info("kstream: partitions assigned", "app", r.cfg.ApplicationID, "new_tasks", created, "restoring", len(restoring), "tasks", len(r.tasks))
	if len(restoring) > 0 {
		// As Kafka Streams: REBALANCING until the new active tasks are restored (StateInfo
		// names them).
		r.rebalancing("restoring active tasks")
	}
	r.maybeRunningLocked()
}

// startTask restores the stores of t and creates its task, then resumes its input on cl, the
// consumer that was assigned it (r.consumer may not be set yet when the first assignment
// comes, and is replaced after a fence). It runs on its own goroutine; if t was revoked
// meanwhile, it gives up quietly.
func (r *Runtime) startTask(t *taskRun, cl *kgo.Client) {
	st := r.topo.SubTopologies[t.id.SubTopology]
	ls, err := r.openStores(r.restoreCtx, t.id, st.Stores)
	if err != nil {
		if r.restoreCtx.Err() == nil && r.current(t) {
			r.fail(fmt.Errorf("kstream: task %s: %w", t.id, err))
			return
		}
		r.log.Info("kstream: restoration stopped (task revoked or shutting down)", "task", t.id.String(), "err", err)
		return
	}
	backends := make(map[string]store.Backend, len(ls))
	for name, s := range ls {
		backends[name] = s.Backend()
		if r.met != nil {
			backends[name] = &meteredBackend{b: backends[name], m: r.met.store(t.id, name)}
		}
	}
	task, err := st.NewTask(r, t.id, backends)
	if err != nil {
		r.fail(fmt.Errorf("kstream: creating task %s: %w", t.id, err))
		return
	}
	r.mu.Lock()
	if r.tasks[t.id] != t {
		r.mu.Unlock()
		if err := task.Close(); err != nil {
			r.log.Warn("kstream: closing a task revoked while restoring", "task", t.id.String(), "err", err)
		}
		return
	}
	t.task, t.stores = task, ls
	r.resizeStoreCachesLocked()
	parts := t.partitionMap()
	r.publishQueryLocked()
	r.publishTasksLocked()
	r.maybeRunningLocked()
	r.mu.Unlock()
	cl.ResumeFetchPartitions(parts)
	r.log.Info("kstream: task restored and running", "task", t.id.String())
}

// current reports whether t is still one of this instance's tasks.
func (r *Runtime) current(t *taskRun) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tasks[t.id] == t
}

func (t *taskRun) partitionMap() map[string][]int32 {
	m := map[string][]int32{}
	for tp := range t.parts {
		m[tp.topic] = append(m[tp.topic], tp.partition)
	}
	return m
}

func (r *Runtime) onRevoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	if len(revoked) == 0 {
		return
	}
	r.leftGroup("partitions revoked: waiting for the group's new assignment")
	if !r.lockOrDefer(revoked) {
		return
	}
	defer r.mu.Unlock()
	r.quiesceLocked()
	if r.fatal() == nil && r.fencedCause() == nil && !r.migrating.Load() {
		cctx, cancel := context.WithTimeout(r.prodCtx, r.cfg.CloseTimeout)
		if err := r.commitLocked(cctx); err != nil {
			r.log.Warn("kstream: commit before revocation failed; the new owner will reprocess", "app", r.cfg.ApplicationID, "err", err)
		}
		cancel()
	}
	r.dropLocked(revoked)
	r.revoked = true
	r.reconcileStandbysLocked()
}

func (r *Runtime) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	if len(lost) == 0 {
		return
	}
	r.log.Warn("kstream: partitions lost without a chance to commit; they are processed again from the last commit", "app", r.cfg.ApplicationID, "partitions", lost)
	r.leftGroup("partitions lost: rejoining the group")
	if !r.lockOrDefer(lost) {
		return
	}
	defer r.mu.Unlock()
	r.quiesceLocked()
	if r.sess != nil && r.inTxn {
		// The open transaction cannot commit any more; End aborts it.
		r.txnFailed.Store(true)
	}
	r.dropLocked(lost)
	r.revoked = true
	r.reconcileStandbysLocked()
}

// lockOrDefer takes mu for a revocation or loss of parts, unless an exactly-once commit
// ends its transaction meanwhile: then it sets parts aside (deferDrop) and reports false.
// Waiting for mu alone could deadlock: kgo's GroupTransactSession calls the revocation
// callbacks holding a lock that its End takes too, and the loop calls End holding mu; so
// the callback must not wait for mu once End may be running. It polls for mu instead, and
// gives up on it as soon as a transaction is ending.
func (r *Runtime) lockOrDefer(parts map[string][]int32) bool {
	for {
		if r.deferDrop(parts) {
			return false
		}
		if r.mu.TryLock() {
			return true
		}
		time.Sleep(time.Millisecond)
	}
}

// deferDrop sets partitions aside when an exactly-once commit is ending its transaction
// (the loop holds mu, and may wait for the group): the transaction then aborts, and the loop
// drops them once it has ended. It reports whether it did.
func (r *Runtime) deferDrop(parts map[string][]int32) bool {
	r.endMu.Lock()
	defer r.endMu.Unlock()
	if !r.ending {
		return false
	}
	r.txnFailed.Store(true)
	r.deferred = append(r.deferred, parts)
	return true
}

// dropDeferredLocked drops the partitions set aside while a transaction ended.
func (r *Runtime) dropDeferredLocked() {
	r.endMu.Lock()
	deferred := r.deferred
	r.deferred = nil
	r.endMu.Unlock()
	for _, parts := range deferred {
		r.dropLocked(parts)
		r.revoked = true
	}
	if len(deferred) > 0 {
		r.reconcileStandbysLocked()
	}
}

// dropLocked forgets partitions and closes the tasks left without any.
func (r *Runtime) dropLocked(parts map[string][]int32) {
	r.awaitCommitNowLocked() // its tail may write the stores of the tasks closed here
	var closed []string
	for topic, ps := range parts {
		for _, p := range ps {
			tp := topicPartition{topic, p}
			t := r.parts[tp]
			if t == nil {
				continue
			}
			if pos := t.parts[tp]; pos.paused.Load() {
				// kgo keeps a partition paused until it is resumed, also when it comes back
				// with a later assignment.
				r.unpause[tp.topic] = append(r.unpause[tp.topic], tp.partition)
			}
			if pos := t.parts[tp]; pos.met != nil {
				r.met.dropPartition(tp, pos.met)
			}
			delete(r.parts, tp)
			delete(t.parts, tp)
			t.dropInboxLocked(map[topicPartition]bool{tp: true})
			t.group.RemovePartition(tp.topic, tp.partition)
			if len(t.parts) == 0 {
				if t.task == nil {
					// Still restoring: startTask sees the task is gone and stops.
				} else if err := t.task.Close(); err != nil {
					r.log.Warn("kstream: closing task", "task", t.id.String(), "err", err)
				}
				r.taskClosedLocked(t)
				delete(r.tasks, t.id)
				closed = append(closed, t.id.String())
			}
		}
	}
	r.resizeStoreCachesLocked()
	r.publishQueryLocked()
	r.publishTasksLocked()
	slices.Sort(closed)
	r.log.Info("kstream: partitions revoked", "app", r.cfg.ApplicationID, "closed_tasks", closed, "tasks", len(r.tasks))
}

// shutdown commits what was processed (unless a fatal error makes that unsafe), closes the
// tasks and leaves the group.
func (r *Runtime) shutdown(loopErr error) {
	r.closing.Store(true)
	r.setState(StatePendingShutdown, "shutting down")
	r.stopGlobal() // its dead-letter writes, if any, are flushed below
	ctx, cancel := context.WithTimeout(r.prodCtx, r.cfg.CloseTimeout)
	defer cancel()
	r.mu.Lock()
	r.quiesceLocked()
	if r.fatal() == nil && loopErr == nil && r.fencedCause() == nil {
		if err := r.commitLocked(ctx); err != nil {
			r.log.Warn("kstream: final commit failed; records since the last commit will be processed again", "app", r.cfg.ApplicationID, "err", err)
		}
	}
	if r.sess != nil && r.inTxn {
		// A fatal error left the transaction open: abort it now rather than let it block
		// read_committed readers until it times out.
		actx, acancel := context.WithTimeout(ctx, 5*time.Second)
		if _, err := r.endTxnLocked(actx, kgo.TryAbort); err != nil {
			r.log.Warn("kstream: aborting the open transaction at shutdown", "transactional_id", r.txnID, "err", err)
		}
		acancel()
		r.inTxn = false
		r.abortedLocked()
	}
	all := map[string][]int32{}
	for tp := range r.parts {
		all[tp.topic] = append(all[tp.topic], tp.partition)
	}
	r.dropLocked(all)
	r.mu.Unlock()
	r.standby.close()
	// Nothing is processed any more: let a waiting rebalance (and leaving) through, leave
	// the group now so the remaining members take over at once, and close.
	r.leaveAndCloseAs(ctx, true)
	if r.fatal() == nil && r.sess == nil {
		if err := r.flush(ctx); err != nil {
			r.log.Warn("kstream: flushing at shutdown", "err", err)
		}
	}
}

// Produce implements TaskEnv.
func (r *Runtime) Produce(o *OutRecord) {
	if r.replayed(o) {
		return
	}
	if r.cfg.Propagator != nil {
		r.injectTrace(o)
	}
	o.ctx = r.prodCtx
	o.Record.Context = o
	if g := r.acks.Load(); g != nil {
		o.acks = g
		g.add()
	}
	r.producer.Produce(r.prodCtx, &o.Record, r.promise)
}

// onProduced is the produce callback of every output record.
func (r *Runtime) onProduced(rec *kgo.Record, err error) {
	if o, ok := rec.Context.(*OutRecord); ok && o.acks != nil {
		defer o.acks.ack() // after a dead letter of the record is produced
	}
	if err == nil {
		if o, ok := rec.Context.(*OutRecord); ok && o.DeadLetter {
			r.noteDeadLetter(rec)
		} else if ok && o.changelog != nil {
			for next := rec.Offset + 1; ; {
				cur := o.changelog.acked.Load()
				if cur >= next || o.changelog.acked.CompareAndSwap(cur, next) {
					break
				}
			}
		}
		return
	}
	f := ProduceFailure{Record: rec, Err: err}
	if o, ok := rec.Context.(*OutRecord); ok {
		f.Operator, f.Source = o.Operator, o.Source
	}
	if r.sess != nil {
		// A failed record fails its transaction, which then aborts; its records are
		// processed again from the committed offsets.
		r.txnFailed.Store(true)
		switch {
		case fencedProducer(err):
			r.onFenced(err)
		case fencedError(err):
			r.fail(fencedErr(r.txnID, r.cfg.TransactionTimeout, err))
		case recordError(err):
			r.failedInTxn(f)
		default:
			// A coordinator or leader that moved, a timeout, a transaction the broker
			// aborted: kgo recovers when the transaction ends.
			r.warnEvery("txn-produce", "kstream: a record of the open transaction failed; the transaction will abort and its records are processed again", "topic", rec.Topic, "partition", rec.Partition, "transactional_id", r.txnID, "err", err)
		}
		return
	}
	r.produceFailed(f)
}

// Tasks returns the ids of the tasks this instance runs now, sorted.
func (r *Runtime) Tasks() []TaskID {
	r.mu.Lock()
	ids := make([]TaskID, 0, len(r.tasks))
	for id := range r.tasks {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	slices.SortFunc(ids, func(a, b TaskID) int {
		if a.SubTopology != b.SubTopology {
			return a.SubTopology - b.SubTopology
		}
		return int(a.Partition - b.Partition)
	})
	return ids
}

// Logger implements TaskEnv.
func (r *Runtime) Logger() *slog.Logger { return r.log }

// Now implements TaskEnv.
func (r *Runtime) Now() time.Time { return time.Now() }

// groupConfig is the configuration of the partition group of task t.
func (r *Runtime) groupConfig(t *taskRun) GroupConfig {
	return GroupConfig{
		MaxTaskIdle: r.cfg.MaxTaskIdle,
		Extract: func(rec *kgo.Record, partitionTime int64) (int64, error) {
			ts, err := t.task.Timestamp(rec, partitionTime)
			if err != nil {
				return 0, fmt.Errorf("kstream: task %s: extracting the timestamp of the record at topic %q partition %d offset %d: %w", t.id, rec.Topic, rec.Partition, rec.Offset, err)
			}
			return ts, nil
		},
		Dropped: func(rec *kgo.Record, ts int64) {
			// As Kafka Streams' RecordQueue: logged, counted as dropped, and passed over
			// (its offset is processed: the record is not read again).
			r.log.Warn("kstream: skipping a record with a negative timestamp", "task", t.id.String(), "topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset, "timestamp", ts)
			r.stats.dropped.Add(1)
			if t.met != nil {
				t.met.Dropped(DropNegativeTimestamp)
			}
			if pos := t.parts[topicPartition{rec.Topic, rec.Partition}]; pos != nil {
				pos.next, pos.epoch, pos.dirty = rec.Offset+1, rec.LeaderEpoch, true
				pos.count++
				if pos.met != nil {
					pos.met.pos.Store(pos.next)
				}
			}
		},
		Lag: func(topic string, partition int32, now time.Time) (int64, bool) {
			return r.lagOf(t, topicPartition{topic, partition}, now)
		},
		Enforced: func() { r.stats.enforced.Add(1) },
	}
}

// RecordDropped implements TaskEnv.
func (r *Runtime) RecordDropped() { r.stats.dropped.Add(1) }

func (r *Runtime) produceFailed(f ProduceFailure) {
	if r.fatal() != nil {
		return // already stopping; the first error is the one reported
	}
	err := produceError(f)
	d := r.cfg.OnProduceError(f)
	switch {
	case d.DeadLetterTopic != "":
		r.log.Warn("kstream: production error; writing to the dead-letter topic", "dead_letter_topic", d.DeadLetterTopic, "err", err)
		r.dlqGen.Add(1)
		if r.met != nil {
			r.met.deadLetter("production")
		}
		dl := r.cfg.DeadLetter(d.DeadLetterTopic, f)
		r.producer.TryProduce(r.prodCtx, dl, r.onDeadLetterProduced)
	case d.Continue:
		r.log.Warn("kstream: production error; skipping the record", "err", err)
	default:
		r.fail(err)
	}
}

// partitioner places changelog records on the partition the task set (the task's own), and
// the records of KeepPartition topics on the partition they carry, and every other record by
// the murmur2 hash of its key, as Java producers do.
type partitioner struct {
	sticky, manual kgo.Partitioner
	changelogs     map[string]bool

	keep map[string]bool // topics whose records carry their partition
}

func (p partitioner) ForTopic(topic string) kgo.TopicPartitioner {
	if p.changelogs[topic] || p.keep[topic] {
		return p.manual.ForTopic(topic)
	}
	return chosenOrDefault{p.sticky.ForTopic(topic)}
}

// chosenOrDefault keeps the partition of a record whose stream partitioner chose it
// (OutRecord.Partitioned), and partitions every other record as def does.
type chosenOrDefault struct{ def kgo.TopicPartitioner }

func chosen(r *kgo.Record) bool {
	o, ok := r.Context.(*OutRecord)
	return ok && o.Partitioned
}

// RequiresConsistency implements kgo.TopicPartitioner.
func (c chosenOrDefault) RequiresConsistency(r *kgo.Record) bool {
	return chosen(r) || c.def.RequiresConsistency(r)
}

// Partition implements kgo.TopicPartitioner.
func (c chosenOrDefault) Partition(r *kgo.Record, n int) int {
	if chosen(r) {
		return int(r.Partition)
	}
	return c.def.Partition(r, n)
}

// OnNewBatch implements kgo.TopicPartitionerOnNewBatch (the sticky partitioning of
// records with a null key).
func (c chosenOrDefault) OnNewBatch() {
	if nb, ok := c.def.(kgo.TopicPartitionerOnNewBatch); ok {
		nb.OnNewBatch()
	}
}
