package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
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
	// read cache's bound (resizeStoreCachesLocked) before its weight (weighStoreCachesLocked).
	caches *CacheBudget
	// cacheDemands are the read caches' demands by store (weighStoreCachesLocked).
	cacheDemands map[string]*cacheDemand
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
	sess     txnSession
	txnID    string
	inTxn    bool
	txnBegan time.Time // when the open transaction began
	// carried is when the loop began a transaction for the outputs held while the last one
	// ended (txnEndedLocked); the next cut waits one commit interval from then
	// (txnOpenUntilLocked). Guarded by mu.
	carried   time.Time
	revoked   bool // partitions were revoked or lost since the session's last End
	txnFailed atomic.Bool
	// held are the outputs produced while a transaction ends (eos_async.go); aborts counts
	// the calls of abortedLocked.
	held   heldOutputs
	aborts uint64
	// yieldToRebalance: a transaction ended while a rebalance waited; the loop ends the next
	// one at once and lets the rebalance through before it launches a turn
	// (txnEndedLocked); the loop's.
	yieldToRebalance bool
	fence            fenceState  // a fenced producer being handled (fence.go)
	migrating        atomic.Bool // the session is being replaced after a fence
	commitNow        atomic.Bool // a buffer is full: commit at the end of this poll
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
		stores:     &stores{dir: cfg.StateDir, log: cfg.Logger, cacheBytes: cfg.BlockCacheBytes, memTableBytes: MemTableBytesFor(cfg.MemTableBytes, topo), engine: cfg.StoreEngine, tune: cfg.PebbleOptions},
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

// fetchMaxPartitionBytes is the consumer's FetchMaxPartitionBytes (max.partition.fetch.bytes):
// see openConsumer. Config.ConsumerOptions may override it.
const fetchMaxPartitionBytes = 256 << 10

// lagRecheck is how soon the loop looks again at a task that waits for the lag of an
// empty partition (a lag probe in flight, see lag.go).
const lagRecheck = 50 * time.Millisecond

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

// RecordDropped implements TaskEnv.
func (r *Runtime) RecordDropped() { r.stats.dropped.Add(1) }
