package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Exactly-once (v2, KIP-447) runs the group member and its producer in one franz-go
// GroupTransactSession: every output, repartition and changelog record of a commit interval
// goes into one transaction together with the input offsets, which are committed with the
// group's generation so that a member fenced by a rebalance cannot commit. Stores buffer
// their writes (store.Buffer) and apply them, with their new checkpoints, only after the
// transaction commits; an abort drops the buffers and rewinds to the committed offsets. A
// crash therefore leaves every store as of its last checkpoint, and restoration replays only
// the committed changelog tail: no store is wiped.
//
// Rebalances are let through only between transactions (after a commit), so the open
// transaction is always committed before partitions are given up. The periodic commit ends
// its transaction while the tasks go on for the next one (eos_async.go); commitTxnLocked is
// the commit that ends it with the tasks at rest (Config.BlockingCommits, before a
// revocation, at shutdown).

// txnSession is the transactional client of exactly-once: it consumes read_committed and
// produces transactionally, and its End commits the input offsets in the transaction. Under
// the classic protocol it is kgo's GroupTransactSession; under the streams protocol, whose
// group kgo does not speak, a streamsTxnSession (streams_eos.go).
type txnSession interface {
	// Client is the client that consumes and produces.
	Client() *kgo.Client
	// Begin begins a transaction.
	Begin() error
	// End flushes (or, with TryAbort, aborts) the records and ends the transaction; with
	// TryCommit it first commits the offsets that the context's pre-commit function
	// (cutBeforeCommit) sets. It reports whether the transaction committed.
	End(ctx context.Context, try kgo.TransactionEndTry) (bool, error)
}

// newTxnSession creates the transactional session of exactly-once with the consumer and
// producer options opts.
func (r *Runtime) newTxnSession(opts []kgo.Opt) (txnSession, error) {
	if m, ok := r.member.(*streamsMembership); ok {
		return newStreamsTxnSession(r, m, opts)
	}
	return kgo.NewGroupTransactSession(opts...)
}

// preCommitKey holds, in a commit's context, the function that sets the offsets of the
// transaction's TxnOffsetCommit (cutBeforeCommit): kgo's session finds it through
// kgo.PreTxnCommitFnContext, the streams session through this key.
type preCommitKey struct{}

// preCommitFn returns the pre-commit function of ctx, nil if none.
func preCommitFn(ctx context.Context) func(*kmsg.TxnOffsetCommitRequest) error {
	fn, _ := ctx.Value(preCommitKey{}).(func(*kmsg.TxnOffsetCommitRequest) error)
	return fn
}

// Stats are figures about commits.
type Stats struct {
	Commits               int64         // commits (transactions committed, under exactly-once)
	TransactionsAborted   int64         // transactions aborted (exactly-once only)
	CommitLatencyAvg      time.Duration // mean time a commit took
	CommitLatencyP99      time.Duration // 99th percentile over the last 1024 commits
	CommitLatencyMax      time.Duration // longest commit
	LastCommitLatency     time.Duration
	ExactlyOnce           bool
	TransactionalID       string // the producer's transactional id (exactly-once only)
	RecordsInLastCommit   int64  // input records covered by the last commit
	ChangelogRecordsTotal int64  // changelog records written, all stores
	// ProducerFences counts the times the transactional producer was fenced (a transaction
	// outlived TransactionTimeout, or another producer took the transactional id) and the
	// instance dropped its tasks and rejoined with a new producer: Kafka Streams' task
	// migrations.
	ProducerFences int64
	// Restarts counts the restarts of the processing after a fatal error
	// (UncaughtRestart).
	Restarts int64
	// DroppedRecords counts the records that operators skipped because of a null key or a
	// null value (an aggregation, a join or a table source given a record it cannot use),
	// and the input records dropped for a negative timestamp (see TimestampExtractor), all
	// tasks together, since the instance started: Kafka Streams' dropped-records metric for
	// those records. Records processed again after a failure or an aborted transaction are
	// counted again, as in Kafka Streams.
	DroppedRecords int64
	// EnforcedProcessing counts the records that a task with several input partitions
	// processed although one of its partitions had no record buffered, because
	// Config.MaxTaskIdle passed while that partition was caught up (Kafka Streams'
	// enforced-processing metric): their order across partitions may not be the order of
	// their timestamps.
	EnforcedProcessing int64
	// StoreCacheBytes is the heap that the stores' read caches held after the last commit.
	StoreCacheBytes int64
	// ExpiringChangelogRecords counts the changelog records of timestamped stores (time and
	// sliding window aggregations) written with a timestamp that their changelog topic's retention.ms had already passed
	// (see loggedStore.noteExpiring).
	ExpiringChangelogRecords int64
}

// commitStats accumulates Stats.
type commitStats struct {
	mu        sync.Mutex
	commits   int64
	aborted   int64
	sum, max  time.Duration
	last      time.Duration
	ring      [1024]time.Duration
	n         int
	lastCount int64
	txnID     string
	changelog atomic.Int64
	fences    atomic.Int64
	restarts  atomic.Int64
	dropped   atomic.Int64
	enforced  atomic.Int64
	cache     atomic.Int64
	expiring  atomic.Int64
}

func (c *commitStats) observe(d time.Duration, committed bool, records int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !committed {
		c.aborted++
		return
	}
	c.commits++
	c.sum += d
	c.max = max(c.max, d)
	c.last = d
	c.ring[c.n%len(c.ring)] = d
	c.n++
	c.lastCount = records
}

// Stats returns the commit figures of this instance.
func (r *Runtime) Stats() Stats {
	c := &r.stats
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Stats{Commits: c.commits, TransactionsAborted: c.aborted, CommitLatencyMax: c.max, LastCommitLatency: c.last,
		ExactlyOnce: r.cfg.ExactlyOnce, TransactionalID: c.txnID, RecordsInLastCommit: c.lastCount, ChangelogRecordsTotal: c.changelog.Load(),
		ProducerFences: c.fences.Load(), Restarts: c.restarts.Load(), DroppedRecords: c.dropped.Load(), EnforcedProcessing: c.enforced.Load(),
		StoreCacheBytes: c.cache.Load(), ExpiringChangelogRecords: c.expiring.Load()}
	if c.commits > 0 {
		s.CommitLatencyAvg = c.sum / time.Duration(c.commits)
	}
	if n := min(c.n, len(c.ring)); n > 0 {
		lat := slices.Clone(c.ring[:n])
		slices.Sort(lat)
		s.CommitLatencyP99 = lat[(n*99)/100]
	}
	return s
}

// processID returns the id of this instance's state directory, created on first use. The
// transactional id is "<application id>-<process id>", so a restart with the same state
// directory fences its previous incarnation at once (its open transaction is aborted),
// while distinct instances never fence each other.
func processID(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("kstream: creating the state directory %s: %w", dir, err)
	}
	path := filepath.Join(dir, "kstream.process-id")
	if b, err := os.ReadFile(path); err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("kstream: reading %s: %w", path, err)
	}
	id, err := newProcessUUID()
	if err != nil {
		return "", err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(id+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("kstream: writing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("kstream: writing %s: %w", path, err)
	}
	return id, nil
}

// fencePrevious initializes the transactional producer before the instance joins the group.
// With the transactional id of the state directory, this fences the previous incarnation
// of the instance and aborts the transaction it left open when it died, at once. Otherwise
// that transaction would hold the changelogs' last stable offset back until it timed out,
// and restoration, which reads to the high watermark, would wait for it.
func (r *Runtime) fencePrevious(ctx context.Context) error {
	if r.sess == nil {
		return nil
	}
	return r.retry(ctx, fmt.Sprintf("initializing the transactional producer (transactional id %s)", r.txnID), func(ctx context.Context) error {
		_, _, err := r.sess.Client().ProducerID(ctx)
		if fencedError(err) {
			return fencedErr(r.txnID, r.cfg.TransactionTimeout, err)
		}
		return err
	})
}

// beginTxnLocked opens a transaction if none is open.
func (r *Runtime) beginTxnLocked() error {
	if r.sess == nil || r.inTxn {
		return nil
	}
	r.resetSessionLocked(r.prodCtx)
	if err := r.sess.Begin(); err != nil {
		// A transaction whose end failed may still be open in the client: end it, then
		// begin again.
		r.log.Warn("kstream: cannot begin a transaction; aborting the previous one first", "transactional_id", r.txnID, "err", err)
		r.abortUntilEndedLocked(err)
		if err := r.sess.Begin(); err != nil {
			err = fmt.Errorf("kstream: beginning a transaction (transactional id %s): %w", r.txnID, err)
			if producerUnusable(err) {
				r.onFenced(err) // the caller sees the fence and lets the loop migrate the tasks
			}
			return err
		}
	}
	r.inTxn, r.txnBegan = true, time.Now()
	return nil
}

// errTxnTooOld stops a commit that would be issued after txnEndBy.
var errTxnTooOld = errors.New("the transaction is about to outlive the transaction timeout; aborting it instead of committing")

// cutBeforeCommit returns the context of a commit's End: it is canceled at txnEndBy if the
// offsets have not been sent by then (kgo holds them back while the group joins and syncs,
// and the flush may wait for a broker), so that End gives up and the transaction aborts
// before the broker aborts it and fences the producer. Once the offsets are sent it is not
// canceled any more: cutting a commit in flight would leave its outcome unknown.
//
// The offsets committed are offsets, the processed positions (setTxnOffsets).
func (r *Runtime) cutBeforeCommit(ctx context.Context, offsets map[string]map[int32]kgo.EpochOffset) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex
	sent, late := false, false
	preCommit := func(req *kmsg.TxnOffsetCommitRequest) error {
		mu.Lock()
		defer mu.Unlock()
		if late {
			return errTxnTooOld
		}
		setTxnOffsets(req, offsets)
		sent = true
		return nil
	}
	ctx = kgo.PreTxnCommitFnContext(ctx, preCommit)
	ctx = context.WithValue(ctx, preCommitKey{}, preCommit)
	began := r.txnBegan
	timer := time.AfterFunc(time.Until(r.txnEndBy()), func() {
		mu.Lock()
		defer mu.Unlock()
		if !sent {
			late = true
			r.log.Warn("kstream: the transaction cannot commit before it outlives the transaction timeout; aborting it", "transactional_id", r.txnID, "age", time.Since(began).Round(time.Millisecond))
			cancel()
		}
	})
	return ctx, func() {
		timer.Stop()
		cancel()
	}
}

// txnEndBy is when the open transaction must be over: a margin before the broker aborts it
// for outliving TransactionTimeout (which bumps the producer epoch and fences this
// producer). A commit that cannot finish by then (kgo holds the offset commit back while
// the group joins and syncs) gives up and aborts instead.
func (r *Runtime) txnEndBy() time.Time {
	margin := max(r.cfg.TransactionTimeout/5, time.Second)
	return r.txnBegan.Add(max(r.cfg.TransactionTimeout-margin, r.cfg.TransactionTimeout/2))
}

// commitTxnLocked ends the open transaction: changelog records of the buffered store
// changes are written into it, then the session flushes, commits the input offsets with the
// group's generation and commits the transaction. Only then are the buffers applied to the
// stores with their new checkpoints. If the transaction aborts (a rebalance fenced us, a
// record failed), the buffers are dropped and the consumer is back at the committed
// offsets, so the records are processed again.
func (r *Runtime) commitTxnLocked(ctx context.Context) error {
	if !r.inTxn {
		return nil
	}
	// Work the transaction's offsets must cover that the tasks still hold (a batch sink's
	// pending batch) is done before it ends; if it cannot be, the transaction aborts.
	if err := r.preCommitLocked(ctx); err != nil {
		r.txnFailed.Store(true)
	}
	offsets, dirty, records := r.positionsLocked()
	for _, t := range r.tasks {
		for _, ls := range t.stores {
			ls.logPending()
		}
	}
	began := time.Now()
	ectx, cancel := r.cutBeforeCommit(ctx, offsets)
	// Wait for every record of the transaction first: a record can fail after it was
	// handed over (a too-large record fails once kgo knows its partition), and kgo would
	// commit the transaction without it. The decision to commit is made after.
	if err := r.producer.Flush(ectx); err != nil {
		r.txnFailed.Store(true)
	}
	try := kgo.TryCommit
	if r.txnFailed.Load() || r.fatal() != nil {
		try = kgo.TryAbort
	}
	committed, err := r.endTxnLocked(ectx, try)
	cancel()
	if err != nil && !committed {
		err = r.abortUntilEndedLocked(err)
		if try == kgo.TryCommit && len(offsets) > 0 && !errors.Is(err, errTxnTooOld) && !errors.Is(err, context.Canceled) && !fencedProducer(err) && r.fatal() == nil && r.committedOnBroker(offsets) {
			// The commit's outcome was unknown to the client (its EndTxn timed out or the
			// connection broke), but the broker has its offsets: it committed. Carry on as
			// committed, or the records would be processed (and output) twice.
			r.log.Warn("kstream: the transaction's outcome was unknown; the group's committed offsets show that it committed", "transactional_id", r.txnID, "err", err)
			committed, err = true, nil
			r.consumer.SetOffsets(offsets)
			r.rewoundLocked()
		}
	}
	r.inTxn = false
	r.txnFailed.Store(false)
	took := time.Since(began)
	r.stats.observe(took, committed, records)
	if !committed {
		r.abortedLocked()
		if err != nil {
			return fmt.Errorf("kstream: transaction aborted (transactional id %s): %w", r.txnID, err)
		}
		r.log.Warn("kstream: transaction aborted; records since the last commit will be processed again", "app", r.cfg.ApplicationID, "transactional_id", r.txnID)
		return nil
	}
	r.log.Debug("kstream: transaction committed", "records", records, "took", took)
	for _, pos := range dirty {
		pos.dirty = false
		pos.committed = kgo.EpochOffset{Epoch: pos.epoch, Offset: pos.next}
	}
	r.committedLocked()
	if !r.cfg.BlockingCommits {
		// The stores' writes of the committed changes run while the next transaction
		// begins (commitasync.go); an abort of that one drops only its own changes.
		return r.writeStoresAsyncLocked(offsets)
	}
	for _, t := range r.tasks {
		for _, ls := range t.stores {
			if err := ls.checkpoint(offsets); err != nil {
				return err
			}
		}
	}
	if err := r.stores.sync(); err != nil {
		return err
	}
	r.noteStoreCachesLocked()
	r.purgeRepartition(offsets)
	return nil
}

// abortedLocked drops what the aborted transaction did locally: the buffered store changes,
// the processed positions, the records fetched but not processed, and the tasks' stream
// times and punctuation schedules since the last commit (the session has moved the consumer
// back to the committed offsets).
func (r *Runtime) abortedLocked() {
	r.aborts++
	r.held.take() // outputs of the aborted work, never produced
	rewind := map[string]map[int32]kgo.EpochOffset{}
	for _, t := range r.tasks {
		for _, ls := range t.stores {
			if ls.buf != nil {
				ls.buf.Discard()
			}
			ls.written.Store(false)
		}
		for tp, pos := range t.parts {
			pos.next, pos.dirty = -1, false
			at := pos.committed
			if at.Offset < 0 {
				// Nothing committed here: back to the first record fetched, which kgo
				// does not know to go back to when the group has no offset either.
				at = pos.first
			}
			if at.Offset >= 0 {
				if rewind[tp.topic] == nil {
					rewind[tp.topic] = map[int32]kgo.EpochOffset{}
				}
				rewind[tp.topic][tp.partition] = at
			}
		}
		t.group.Restore()
		t.punctuated = false
		if t.task != nil {
			t.task.Aborted()
		}
	}
	r.rewoundLocked()
	// kgo moved the consumer back to the offsets it knows were committed; after a commit
	// whose outcome only the broker knew (see commitTxnLocked), this instance knows later
	// ones.
	if len(rewind) > 0 {
		r.consumer.SetOffsets(rewind)
	}
}

// committedOnBroker reports whether the group's committed offsets, read from the broker
// once no transaction is pending on them (KIP-447's require_stable), are exactly offsets:
// then the transaction that carried them committed. Any doubt (the broker cannot be asked)
// reports false, and the transaction counts as aborted.
func (r *Runtime) committedOnBroker(offsets map[string]map[int32]kgo.EpochOffset) bool {
	ctx, cancel := context.WithTimeout(r.prodCtx, r.cfg.TransactionTimeout+5*time.Second)
	defer cancel()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = r.cfg.ApplicationID
	req.RequireStable = true
	for topic, ps := range offsets {
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic = topic
		for p := range ps {
			rt.Partitions = append(rt.Partitions, p)
		}
		req.Topics = append(req.Topics, rt)
	}
	var match bool
	err := r.retry(ctx, "reading the committed offsets of a transaction whose outcome is unknown", func(ctx context.Context) error {
		resp, err := req.RequestWith(ctx, r.plain)
		if err != nil {
			return err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return err
		}
		match = true
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return err // UNSTABLE_OFFSET_COMMIT: still pending; retried
				}
				if want, ok := offsets[t.Topic][p.Partition]; !ok || p.Offset != want.Offset {
					match = false
				}
			}
		}
		return nil
	})
	if err != nil {
		r.log.Warn("kstream: cannot tell whether the transaction committed; counting it as aborted", "transactional_id", r.txnID, "err", err)
		return false
	}
	return match
}

// setTxnOffsets makes a transaction's offset commit carry the processed positions offsets:
// kgo commits the position after the last record polled of each partition, but a task may
// hold polled records that it has not processed yet (partgroup.go).
func setTxnOffsets(req *kmsg.TxnOffsetCommitRequest, offsets map[string]map[int32]kgo.EpochOffset) {
	set := map[topicPartition]bool{}
	topics := req.Topics[:0]
	for _, t := range req.Topics {
		parts := t.Partitions[:0]
		for _, p := range t.Partitions {
			o, ok := offsets[t.Topic][p.Partition]
			if !ok {
				continue // nothing processed since the last commit
			}
			p.Offset, p.LeaderEpoch = o.Offset, o.Epoch
			parts = append(parts, p)
			set[topicPartition{t.Topic, p.Partition}] = true
		}
		if len(parts) > 0 {
			t.Partitions = parts
			topics = append(topics, t)
		}
	}
	// A processed record was polled, so kgo lists its partition; in case it did not:
	for topic, ps := range offsets {
		for p, o := range ps {
			if set[topicPartition{topic, p}] {
				continue
			}
			rt := kmsg.NewTxnOffsetCommitRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = p, o.Offset, o.Epoch
			rt.Partitions = append(rt.Partitions, rp)
			topics = append(topics, rt)
		}
	}
	req.Topics = topics
}

// rewoundLocked drops the records the tasks hold but have not processed, after the
// consumer was moved back to the processed (committed) positions: they are fetched again.
// Partitions paused for a full buffer are resumed, and what was known of their lags is
// forgotten.
func (r *Runtime) rewoundLocked() {
	resume := map[string][]int32{}
	for _, t := range r.tasks {
		t.group.Clear()
		t.dropInboxLocked(nil)
		clear(t.leftover)
		for tp, pos := range t.parts {
			pos.first = kgo.EpochOffset{Offset: -1}
			if pos.paused.Load() {
				pos.paused.Store(false)
				resume[tp.topic] = append(resume[tp.topic], tp.partition)
			}
		}
	}
	if len(resume) > 0 {
		r.consumer.ResumeFetchPartitions(resume)
	}
	r.forgetLagsLocked()
}

// positionsLocked returns the processed positions not yet committed, the positions
// themselves, and how many records they cover.
func (r *Runtime) positionsLocked() (map[string]map[int32]kgo.EpochOffset, []*partPos, int64) {
	offsets := map[string]map[int32]kgo.EpochOffset{}
	var dirty []*partPos
	var records int64
	for tp, t := range r.tasks {
		_ = tp
		for p, pos := range t.parts {
			if !pos.dirty {
				continue
			}
			if offsets[p.topic] == nil {
				offsets[p.topic] = map[int32]kgo.EpochOffset{}
			}
			offsets[p.topic][p.partition] = kgo.EpochOffset{Epoch: pos.epoch, Offset: pos.next}
			dirty = append(dirty, pos)
			records += pos.count
			pos.count = 0
		}
	}
	return offsets, dirty, records
}

// afterRebalance runs after AllowRebalance let a rebalance through. Under exactly-once, a
// revocation marks the session, which would abort the next transaction; ending the (empty)
// session right away clears the mark, so the next transaction commits.
func (r *Runtime) afterRebalance(ctx context.Context) {
	if r.sess == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resetSessionLocked(ctx)
}

// resetSessionLocked ends the empty session after a revocation between two transactions
// (see afterRebalance). kgo runs the revocation callback after the loop let the rebalance
// through, and it may come only after afterRebalance looked: the loop calls this again
// before it begins the next transaction, which would otherwise abort for nothing.
func (r *Runtime) resetSessionLocked(ctx context.Context) {
	if !r.revoked || r.inTxn || r.txnEndingLocked() {
		return // nothing to reset, or not now: a transaction is open or ends
	}
	r.revoked = false
	r.quiesceLocked()
	cctx, cancel := context.WithTimeout(ctx, r.cfg.CloseTimeout)
	defer cancel()
	if _, err := r.endTxnLocked(cctx, kgo.TryAbort); err != nil && ctx.Err() == nil {
		r.log.Warn("kstream: resetting the transactional session after a rebalance", "err", err)
	}
	r.abortedLocked()
}

// abortUntilEndedLocked makes sure that a transaction whose end failed (the broker went
// away while its records were flushed, the coordinator moved) is over before the next one
// begins: it aborts it, retrying with backoff while the cluster is unreachable, until the
// abort succeeds, the instance shuts down, or the producer was fenced (fatal). kgo moves the
// consumer back to the committed offsets, so the records are processed again.
func (r *Runtime) abortUntilEndedLocked(cause error) error {
	return r.abortUntilEnded(cause, r.endTxnLocked)
}

// abortUntilEnded is abortUntilEndedLocked ending the transaction with end: endTxn, off the
// loop, while r.ending is set (eos_async.go).
func (r *Runtime) abortUntilEnded(cause error, end func(context.Context, kgo.TransactionEndTry) (bool, error)) error {
	backoff := 100 * time.Millisecond
	began := time.Now()
	for attempt := 1; ; attempt++ {
		if fencedProducer(cause) {
			r.onFenced(cause)
			return fencedErr(r.txnID, r.cfg.TransactionTimeout, cause)
		}
		if fencedError(cause) {
			err := fencedErr(r.txnID, r.cfg.TransactionTimeout, cause)
			r.fail(err)
			return err
		}
		ctx, cancel := context.WithTimeout(r.prodCtx, r.cfg.CloseTimeout)
		_, err := end(ctx, kgo.TryAbort)
		cancel()
		if err == nil {
			if attempt > 1 {
				r.log.Info("kstream: the failed transaction is aborted; processing goes on from the committed offsets", "transactional_id", r.txnID, "attempts", attempt, "took", time.Since(began).Round(time.Millisecond))
			}
			return cause
		}
		cause = err
		if r.restoreCtx.Err() != nil || r.closing.Load() || r.migrating.Load() {
			return err
		}
		if producerUnusable(err) && !fencedError(err) {
			// The abort itself says the producer cannot go on: retrying would not change
			// that; a new producer does (fence.go).
			r.onFenced(err)
			return err
		}
		if r.cfg.GiveUpAfter > 0 && time.Since(began) > r.cfg.GiveUpAfter {
			err = fmt.Errorf("kstream: aborting the transaction of transactional id %s: gave up after %s (Config.GiveUpAfter): %w", r.txnID, r.cfg.GiveUpAfter, err)
			r.fail(err)
			return err
		}
		r.warnEvery("txn-abort", "kstream: the transaction could not end; aborting it, retrying while the cluster is unreachable", "transactional_id", r.txnID, "attempts", attempt, "err", err)
		select {
		case <-r.restoreCtx.Done():
			return err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// endGrace is how long an ending transaction may wait for the group before a rebalance
// that waits for the loop is let through (see endTxnLocked).
const endGrace = time.Second

// endTxnLocked ends the session's transaction. The session may wait for the group (its
// commit forces a heartbeat) while the group waits for the loop to allow a rebalance (kgo
// runs the lost and revoked callbacks only between polls): when the group lost the session
// that wait never ends by itself. So while the transaction ends, the group callbacks do not
// take mu but set their partitions aside (deferDrop), which fails the transaction; and if
// the end takes longer than endGrace while a rebalance waits, the rebalance is let
// through. The partitions set aside are dropped here, after the end.
func (r *Runtime) endTxnLocked(ctx context.Context, try kgo.TransactionEndTry) (bool, error) {
	r.endMu.Lock()
	r.ending, r.endBegan = true, time.Now()
	r.endMu.Unlock()
	committed, err := r.endTxn(ctx, try)
	r.endMu.Lock()
	r.ending = false
	r.endMu.Unlock()
	r.dropDeferredLocked()
	return committed, err
}

// endTxn ends the session's transaction while r.ending is set, letting a rebalance that
// waits through after endGrace (see endTxnLocked).
func (r *Runtime) endTxn(ctx context.Context, try kgo.TransactionEndTry) (bool, error) {
	timer := time.AfterFunc(endGrace, func() {
		r.endMu.Lock()
		defer r.endMu.Unlock()
		if r.ending && r.blocked {
			r.log.Info("kstream: a rebalance waits while the transaction ends; letting it through", "transactional_id", r.txnID)
			r.consumer.AllowRebalance()
		}
	})
	committed, err := r.sess.End(ctx, try)
	timer.Stop()
	return committed, err
}

// fencedErr explains a fenced producer: another producer with the same transactional id
// (an instance started on a copy of this state directory), or a transaction the broker
// aborted because it outlived the transaction timeout.
func fencedErr(txnID string, timeout time.Duration, err error) error {
	return fmt.Errorf("kstream: the producer with transactional id %s was fenced: either another instance uses the same id (a copy of this state directory), or a transaction outlived Config.TransactionTimeout (%s) and the broker aborted it: %w", txnID, timeout, err)
}

// txnAbortable reports whether a produce error means only that the transaction must abort
// (a rebalance or a transaction timeout fenced this member), after which processing goes on
// from the committed offsets.
func txnAbortable(err error) bool {
	return errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.TransactionAbortable) ||
		errors.Is(err, kerr.InvalidTxnState) ||
		errors.Is(err, kerr.ConcurrentTransactions) ||
		errors.Is(err, kerr.OperationNotAttempted) ||
		errors.Is(err, kgo.ErrAborting) ||
		errors.Is(err, context.Canceled)
}

// transactionalID implements memberHost.
func (r *Runtime) transactionalID() string {
	if !r.cfg.ExactlyOnce {
		return ""
	}
	return r.txnID
}

// fenceTransactions implements memberHost: it aborts the open transactions of members that
// left the group (crashed, or expired), in the background, by initializing a producer id
// for each of their transactional ids. The broker then aborts the open transaction at once
// instead of at its timeout (plus up to its check interval), and the read_committed
// consumers of the partitions it wrote go on. Should the instance come back with the same
// id meanwhile, it is fenced, and goes on as after any fence (fence.go).
func (r *Runtime) fenceTransactions(ids []string) {
	ctx := r.restoreCtx
	if ctx == nil || r.plain == nil {
		return
	}
	for _, id := range ids {
		r.bg.Go(func() {
			fctx, cancel := context.WithTimeout(ctx, 2*r.cfg.TransactionTimeout)
			defer cancel()
			req := kmsg.NewPtrInitProducerIDRequest()
			req.TransactionalID = &id
			req.TransactionTimeoutMillis = int32(r.cfg.TransactionTimeout.Milliseconds())
			req.ProducerID, req.ProducerEpoch = -1, -1
			err := r.retry(fctx, "aborting the open transaction of a member that left the group", func(ctx context.Context) error {
				resp, err := req.RequestWith(ctx, r.plain)
				if err != nil {
					return err
				}
				return kerr.ErrorForCode(resp.ErrorCode) // CONCURRENT_TRANSACTIONS while it aborts: retried
			})
			if err != nil {
				if ctx.Err() != nil {
					return // shutting down
				}
				r.log.Warn("kstream: could not abort the open transaction of a member that left; the broker aborts it at its timeout", "transactional_id", id, "err", err)
				return
			}
			r.log.Info("kstream: aborted the open transaction of a member that left the group", "transactional_id", id)
		})
	}
}
