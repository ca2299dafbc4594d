package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kstream-go/kstream/store"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Commits that do not stop processing (at-least-once).
//
// A commit has a cut and a tail. The cut runs on the loop with every task at rest, as the
// whole commit did before: the tasks finish what the commit must cover (preCommitLocked),
// the stores' buffered changes go to their changelogs (logPending), the processed positions
// are noted, and each store's buffer freezes its changes (store.Buffer.Freeze). The tasks
// then go on at once, on the next generation of their buffers, and the tail runs on its own
// goroutine: it waits for the acknowledgement of every record produced before the cut (and
// only those: records produced since belong to the next commit), commits the noted offsets,
// writes each frozen generation to its store with the changelog position it is complete up
// to, and syncs the stores. Reads of the tasks meanwhile see the frozen changes, whether or
// not they have reached the store yet (see store.Frozen).
//
// At most one commit is in flight: the next cut, a revocation, a loss, a shutdown and an
// early flush of a large buffer all wait for it first. Once it is over, the loop ends it at
// its next turn with the tasks at rest (endCommitLocked): the stores release their frozen
// generations, or, if the tail failed, take them back as pending changes for the next commit,
// whose offsets then cover the failed one's again. An offset is thus committed only once
// every output of the records below it is acknowledged, as before; the stores' checkpoints
// never claim a changelog position whose changes they do not hold.
//
// Under exactly-once the cut also takes the tasks' state that the transaction commits, and
// the tail ends the transaction while the tasks go on for the next one, their outputs held
// until it begins (eos_async.go); once it has committed, the tail writes its store changes
// to the stores: if the next transaction aborts, the stores' Discard drops only its own
// changes, not the frozen ones, which are committed. With Config.BlockingCommits, and for
// the commits before a revocation or at shutdown, the transaction ends with the tasks at
// rest and only the store writes are the tail (writeStoresAsyncLocked).

// errCommitInFlight puts a commit off: the previous one's tail still runs.
var errCommitInFlight = errors.New("kstream: the previous commit is still in flight")

// ackGroup counts the records produced since a cut that are not acknowledged yet.
type ackGroup struct {
	n    atomic.Int64 // unacknowledged records, plus 1 until sealed
	once sync.Once
	done chan struct{} // closed when sealed and every record is acknowledged
}

func newAckGroup() *ackGroup {
	g := &ackGroup{done: make(chan struct{})}
	g.n.Store(1)
	return g
}

func (g *ackGroup) add() { g.n.Add(1) }

// ack notes one acknowledgement (or failure: the produce callback ran).
func (g *ackGroup) ack() {
	if g.n.Add(-1) == 0 {
		g.once.Do(func() { close(g.done) })
	}
}

// seal closes the group: done closes once the records already in it are acknowledged.
func (g *ackGroup) seal() { g.ack() }

// inflightCommit is an at-least-once commit whose tail runs.
type inflightCommit struct {
	done    chan struct{} // closed when the tail is over
	err     error         // the tail's error, once done
	offsets map[string]map[int32]kgo.EpochOffset
	dirty   []*partPos
	records int64
	began   time.Time
	took    time.Duration // from the cut's start to the tail's end
	cuts    []*storeCut
	// eos: the stores' writes after a committed transaction (writeStoresAsyncLocked),
	// whose commit Stats already counted.
	eos bool
	// end is the end of the transaction itself, when it runs while the tasks go on
	// (commitTxnAsyncLocked); nil for a commit whose transaction had ended before.
	end *txnEnd
}

// storeCut is a store's part of a commit.
type storeCut struct {
	ls *loggedStore
	f  *store.Frozen // the frozen changes of its buffer; nil without one
	// logged: changelog records were written for the cut, whose last acknowledged offset
	// is the checkpoint; source: the checkpoint of a store whose changelog is its source
	// topic (the committed offset), or -1.
	logged bool
	source int64
	at     int64 // the checkpoint written, or -1
	// settled: source is the checkpoint of a logged cut, fixed when its transaction
	// committed (settle, eos_async.go).
	settled bool
}

// cutStore cuts s for a commit of offsets. It runs with every task at rest, after
// logPending.
func (s *loggedStore) cutStore(offsets map[string]map[int32]kgo.EpochOffset) (*storeCut, error) {
	c := &storeCut{ls: s, source: -1, at: -1}
	switch {
	case s.spec.Changelog == "":
	case s.spec.SourceTopic:
		if o, ok := offsets[s.spec.Changelog][s.partition]; ok {
			c.source = o.Offset
		}
	default:
		c.logged = s.written.Swap(false)
	}
	if s.buf != nil {
		f, err := s.buf.Freeze()
		if err != nil {
			c.restore()
			return nil, fmt.Errorf("kstream: store %s partition %d: %w", s.spec.Name, s.partition, err)
		}
		c.f = f
	}
	return c, nil
}

// cutStores cuts stores for the commit of c.offsets (cutStore); if one cannot be cut, those
// cut are taken back, and nothing is cut.
func (c *inflightCommit) cutStores(stores []*loggedStore) error {
	for _, ls := range stores {
		sc, err := ls.cutStore(c.offsets)
		if err != nil {
			for _, prev := range c.cuts {
				prev.end(false)
			}
			c.cuts = nil
			return err
		}
		c.cuts = append(c.cuts, sc)
	}
	return nil
}

// write writes the cut's changes and checkpoint to the store. It runs on the commit's tail,
// after every record produced before the cut is acknowledged.
func (c *storeCut) write() error {
	s := c.ls
	at := c.source
	if c.logged && !c.settled {
		at = s.acked.Load() // no changelog record of s was produced since the cut
	}
	if c.f != nil {
		if err := c.f.Write(at); err != nil {
			return fmt.Errorf("kstream: checkpointing store %s partition %d at %d: %w", s.spec.Name, s.partition, at, err)
		}
		c.at = at
		return nil
	}
	if at < 0 {
		return nil
	}
	b := s.raw.NewBatch()
	b.SetCheckpoint(at)
	if err := b.Commit(); err != nil {
		return fmt.Errorf("kstream: checkpointing store %s partition %d at %d: %w", s.spec.Name, s.partition, at, err)
	}
	c.at = at
	return nil
}

// end ends the cut on the loop, the tasks at rest: its changes are the store's (ok), or
// pending again.
func (c *storeCut) end(ok bool) {
	s := c.ls
	if c.f != nil {
		if ok {
			s.buf.Release(c.f)
		} else {
			s.buf.Unfreeze(c.f)
		}
	}
	if !ok {
		c.restore()
		return
	}
	if c.at >= 0 {
		s.position.Store(c.at)
	}
}

// restore undoes what the cut took from the store: its changelog records are still to be
// covered by a checkpoint.
func (c *storeCut) restore() {
	if c.logged {
		c.ls.written.Store(true)
	}
}

// commitAsyncLocked is the loop's periodic commit under at-least-once: the cut now, the tail
// in the background. It returns once the tail is started (or the commit turned out to have
// nothing to do), or errCommitInFlight at once while the previous commit's tail runs.
func (r *Runtime) commitAsyncLocked(ctx context.Context) error {
	if r.inflight != nil && !r.commitOverLocked() {
		// The tasks go on; the loop commits as soon as the tail is over.
		return errCommitInFlight
	}
	r.quiesceLocked()
	if r.inflight != nil {
		r.endCommitLocked()
	}
	began := time.Now()
	offsets, _ := r.dirtyOffsetsLocked()
	if len(offsets) == 0 && !r.punctuatedLocked() {
		return nil
	}
	if err := r.preCommitLocked(ctx); err != nil {
		return err
	}
	// The pre-commit step may have finished work that held offsets back (Async).
	offsets, dirty := r.dirtyOffsetsLocked()
	stores := r.storesLocked()
	_ = eachStore(stores, func(ls *loggedStore) error { ls.logPending(); return nil })
	if err := r.fatal(); err != nil {
		return err
	}
	c := &inflightCommit{done: make(chan struct{}), offsets: offsets, dirty: dirty, began: began}
	if err := c.cutStores(stores); err != nil {
		return err
	}
	for _, pos := range dirty {
		pos.dirty = false
		c.records += pos.count
		pos.count = 0
	}
	r.committedLocked()
	acks := r.acks.Swap(newAckGroup())
	acks.seal()
	dlq := r.dlqGen.Load()
	r.inflight = c
	r.committing.Store(true)
	tctx, cancel := context.WithTimeout(r.prodCtx, r.cfg.CloseTimeout)
	go func() {
		c.err = r.commitTail(tctx, c, acks, dlq)
		c.took = time.Since(c.began)
		cancel()
		close(c.done)
		r.kick.kick() // the loop ends the commit, and may begin the next
	}()
	return nil
}

// writeStoresAsyncLocked cuts the stores after a transaction committed its offsets and
// starts the tail that writes their frozen changes with their checkpoints (exactly-once).
func (r *Runtime) writeStoresAsyncLocked(offsets map[string]map[int32]kgo.EpochOffset) error {
	c := &inflightCommit{done: make(chan struct{}), offsets: offsets, began: time.Now(), eos: true}
	if err := c.cutStores(r.storesLocked()); err != nil {
		return err
	}
	r.inflight = c
	r.committing.Store(true)
	go func() {
		for _, sc := range c.cuts {
			if c.err = sc.write(); c.err != nil {
				break
			}
		}
		if c.err == nil {
			c.err = r.stores.sync()
		}
		c.took = time.Since(c.began)
		close(c.done)
		r.kick.kick()
	}()
	return nil
}

// commitTail is the part of a commit that runs while the tasks go on.
func (r *Runtime) commitTail(ctx context.Context, c *inflightCommit, acks *ackGroup, dlq int64) error {
	select {
	case <-acks.done:
	case <-ctx.Done():
		return fmt.Errorf("kstream: waiting for produced records to be acknowledged: %w", ctx.Err())
	}
	if r.dlqGen.Load() != dlq {
		// A failed record's dead letter was written from its callback, into the next
		// commit's records: wait for everything.
		if err := r.flush(ctx); err != nil {
			return err
		}
	}
	if err := r.fatal(); err != nil {
		return err
	}
	if err := r.commitOffsets(ctx, c.offsets); err != nil {
		return err
	}
	for _, sc := range c.cuts {
		if err := sc.write(); err != nil {
			return err
		}
	}
	return r.stores.sync()
}

// dirtyOffsetsLocked returns the offsets to commit, those of the partitions processed
// since the last commit (and of those held back before), and the positions it commits in
// full.
//
// Under at-least-once a task with async operators (Async.HeldOffsets) may still hold
// records of a partition whose calls have not finished: the partition's offset is then
// that of the first such record, not its processed position, so that no committed offset
// passes an unfinished call; the partition stays dirty (it is left out of the positions
// returned), and the next commit goes on from there. The tasks are at rest.
func (r *Runtime) dirtyOffsetsLocked() (map[string]map[int32]kgo.EpochOffset, []*partPos) {
	offsets := map[string]map[int32]kgo.EpochOffset{}
	var dirty []*partPos
	var held map[topicPartition]int64
	for _, t := range r.tasks {
		if a, ok := t.task.(Async); ok {
			a.HeldOffsets(func(topic string, partition int32, offset int64) {
				if held == nil {
					held = map[topicPartition]int64{}
				}
				tp := topicPartition{topic, partition}
				if o, ok := held[tp]; !ok || offset < o {
					held[tp] = offset
				}
			})
		}
	}
	for tp, t := range r.parts {
		pos := t.parts[tp]
		if !pos.dirty {
			continue
		}
		if offsets[tp.topic] == nil {
			offsets[tp.topic] = map[int32]kgo.EpochOffset{}
		}
		next := pos.next
		if h, ok := held[tp]; ok && h < next {
			offsets[tp.topic][tp.partition] = kgo.EpochOffset{Epoch: pos.epoch, Offset: h}
			continue
		}
		offsets[tp.topic][tp.partition] = kgo.EpochOffset{Epoch: pos.epoch, Offset: next}
		dirty = append(dirty, pos)
	}
	return offsets, dirty
}

// commitOffsets commits offsets to the group through the membership (nothing to do for
// none: only punctuators wrote). A commit that the group's join put off returns an error
// matching errJoining.
func (r *Runtime) commitOffsets(ctx context.Context, offsets map[string]map[int32]kgo.EpochOffset) error {
	if len(offsets) == 0 {
		return nil
	}
	var commitErr error
	cctx, joined := r.joins.commitContext(ctx)
	r.member.commit(cctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			commitErr = fmt.Errorf("kstream: committing offsets: %w", err)
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if e := kerr.ErrorForCode(p.ErrorCode); e != nil && commitErr == nil {
					commitErr = fmt.Errorf("kstream: committing offset of topic %q partition %d: %w", t.Topic, p.Partition, e)
				}
			}
		}
	})
	if joined() {
		return fmt.Errorf("kstream: committing offsets: %w", errJoining)
	}
	return commitErr
}

// awaitCommitLocked waits for the commit in flight, if any, and ends it. The tasks must be at
// rest. If ctx ends first, the commit stays in flight and ctx's error is returned.
func (r *Runtime) awaitCommitLocked(ctx context.Context) error {
	c := r.inflight
	if c == nil {
		return nil
	}
	select {
	case <-c.done:
	case <-ctx.Done():
		return fmt.Errorf("kstream: waiting for the commit in flight: %w", ctx.Err())
	}
	r.endCommitLocked()
	return nil
}

// awaitCommitNowLocked is awaitCommitLocked without a deadline but the tail's own (its
// context ends after Config.CloseTimeout): for a revocation, a loss or a shutdown, which
// must not close stores that the tail writes.
func (r *Runtime) awaitCommitNowLocked() {
	if c := r.inflight; c != nil {
		<-c.done
		r.endCommitLocked()
	}
}

// commitOverLocked reports whether a commit is in flight whose tail is over: the loop then
// ends it (endCommitLocked) with the tasks at rest.
func (r *Runtime) commitOverLocked() bool {
	c := r.inflight
	if c == nil {
		return false
	}
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// endCommitLocked ends the commit whose tail is over, with the tasks at rest.
func (r *Runtime) endCommitLocked() {
	c := r.inflight
	if c.end != nil && !c.end.handled {
		r.txnEndedLocked(c)
		if r.inflight != c {
			return // ended meanwhile (a partition set aside was dropped, which waits for it)
		}
	}
	r.inflight = nil
	r.committing.Store(false)
	ok := c.err == nil
	for _, sc := range c.cuts {
		sc.end(ok)
	}
	if !ok && c.eos {
		// The transaction committed these changes: a store that cannot hold them must not
		// go on (an abort of the next transaction would drop them with its own). The
		// changelog has them; a restart restores them.
		r.fail(fmt.Errorf("kstream: writing the committed changes to the stores: %w", c.err))
		return
	}
	if !ok {
		for _, pos := range c.dirty {
			pos.dirty = true // the next commit covers these offsets again
		}
		if errors.Is(c.err, errJoining) {
			r.log.Debug("kstream: commit put off while the group joins", "app", r.cfg.ApplicationID)
		} else {
			r.log.Warn("kstream: commit failed; records since the last commit will be processed again", "app", r.cfg.ApplicationID, "err", c.err)
		}
		return
	}
	if c.end != nil && !c.end.committed {
		return // the transaction aborted: nothing was written
	}
	r.noteStoreCachesLocked()
	if !c.eos {
		r.stats.observe(c.took, true, c.records)
	}
	r.purgeRepartition(c.offsets)
}
