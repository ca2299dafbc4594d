package runtime

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The commit, as the loop starts it; commitasync.go has its background tail and eos.go
// the transaction of exactly-once.

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
