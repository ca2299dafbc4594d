package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/kstream-go/kstream/store"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// GlobalStoreSpec is a global store: a full copy of every partition of Topic, kept by every
// instance. The runtime alone writes it, from its own consumer; tasks read it through
// [TaskEnv.GlobalStore].
//
// Storage layout. The data of every partition is in one namespace, (Name, -1), of the
// memory or Pebble DB, so that a lookup needs no partition. The position reached in
// partition p (the next offset to read) is the checkpoint of the namespace
// (Name+[GlobalOffsetsSuffix], p), which holds no data. A poll's records are committed as
// one data batch first, then the positions they reach: data may be ahead of a position
// after a crash, never behind it. Replaying from a position is idempotent, because a key
// lives in one partition and the replay applies that partition's writes again in order.
type GlobalStoreSpec struct {
	Name       string // the store's name (unique in the topology)
	Topic      string // the topic it copies
	Persistent bool   // Pebble (true) or memory (false)
	// SubTopology is the number of the store's sub-topology in Describe. It has an entry
	// in Topology.SubTopologies with no sources, so it never gets tasks.
	SubTopology int
	// Accept is called for every record with a key before it is applied, from the
	// runtime's global goroutine: it decodes the record (applying the deserialization
	// error handler, which may write to a dead-letter topic through env) and reports
	// whether to apply it. A non-nil error stops the application. Nil accepts everything.
	Accept func(env TaskEnv, rec *kgo.Record) (bool, error)
}

// GlobalOffsetsSuffix ends the names of the namespaces that hold a global store's
// positions (see [GlobalStoreSpec]). '#' cannot occur in a Kafka topic name, so no logged
// store can be named like this by accident; the builder rejects store names that would
// collide.
const GlobalOffsetsSuffix = "#offsets"

// GlobalDataPartition is the partition number of the namespace holding a global store's
// data.
const GlobalDataPartition int32 = -1

// globalRunner keeps the global stores of the instance up to date: it bootstraps them to
// the end offsets measured at start, then follows their topics until stopped.
type globalRunner struct {
	stores  []*globalStore
	byTopic map[string]*globalStore
	boot    chan struct{} // closed when every global store has reached its start-time end
	done    chan struct{} // closed when the follower goroutine has returned
	cancel  context.CancelFunc
	stop    sync.Once
}

type globalStore struct {
	spec  GlobalStoreSpec
	data  store.Backend // the follower's own backend of the data namespace
	batch store.Batch   // reused for every poll
	parts map[int32]*globalPart
	order []int32 // partitions in order, for logs
}

// globalPart is one partition of a global store's topic. Only the follower goroutine uses
// it (after startGlobal hands it over).
type globalPart struct {
	partition    int32
	offsets      store.Backend // its checkpoint is the position
	from, end    int64         // bootstrap range: the position at start, the end offset then
	logStart     int64         // the log start offset at start
	pos          int64         // next offset to read
	checkpointed int64         // the position last written
	restored     int64         // records below end applied during bootstrap
	listened     bool          // OnRestoreStart was called
	bootstrapped bool
}

// startGlobal opens the global stores, starts the goroutine that reads their topics, and
// waits until every store holds its topic up to the end offsets measured now. It returns
// nil without waiting further when ctx ends first (the caller then shuts down); an error if
// a topic does not exist, a store cannot be opened, or a record failed fatally.
func (r *Runtime) startGlobal(ctx context.Context) error {
	if len(r.topo.GlobalStores) == 0 {
		return nil
	}
	// As Kafka Streams does, the instance is REBALANCING while global stores bootstrap.
	r.rebalancing("bootstrapping the global stores")
	g := &globalRunner{byTopic: map[string]*globalStore{}, boot: make(chan struct{}), done: make(chan struct{})}
	offsets, err := r.openGlobal(ctx, g)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(append(r.clientOpts(
		kgo.ConsumePartitions(offsets),
		kgo.KeepControlRecords(),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxBytes(64<<20),
		kgo.FetchMaxPartitionBytes(32<<20),
		r.clientIDOpt(roleGlobalConsumer),
	), r.clientMetrics("global", "")...)...)
	if err != nil {
		return fmt.Errorf("kstream: creating the consumer of the global stores: %w", err)
	}
	fctx, cancel := context.WithCancel(ctx)
	g.cancel = cancel
	r.global = g
	go func() {
		defer close(g.done)
		defer cl.Close()
		r.followGlobal(fctx, cl, g)
	}()
	select {
	case <-g.boot:
		return nil
	case <-g.done:
	case <-ctx.Done():
	}
	// The follower stopped, or is stopping, before the bootstrap ended.
	if err := r.fatal(); err != nil {
		return err
	}
	return nil
}

// stopGlobal stops the follower and waits for it. It is idempotent.
func (r *Runtime) stopGlobal() {
	g := r.global
	if g == nil {
		return
	}
	g.stop.Do(func() {
		g.cancel()
		<-g.done
	})
}

// openGlobal opens every global store with its positions, and returns the offsets to
// consume from.
func (r *Runtime) openGlobal(ctx context.Context, g *globalRunner) (map[string]map[int32]kgo.Offset, error) {
	var topics []string
	for _, spec := range r.topo.GlobalStores {
		topics = append(topics, spec.Topic)
	}
	// Reads are read_committed, so the end is the last stable offset. The log start and
	// high watermark tell whether a checkpoint still fits the topic. A partition without a
	// leader yet, or a broker down, is waited out; a missing topic is fatal at once.
	var (
		details            kadm.TopicDetails
		starts, lsos, hwms kadm.ListedOffsets
	)
	lookup := func(lo kadm.ListedOffsets, what, topic string, p int32) (int64, error) {
		o, ok := lo.Lookup(topic, p)
		if !ok {
			return 0, fmt.Errorf("kstream: %s offset of global topic %q partition %d: not listed: %w", what, topic, p, kerr.UnknownTopicOrPartition)
		}
		if o.Err != nil {
			return 0, fmt.Errorf("kstream: %s offset of global topic %q partition %d: %w", what, topic, p, o.Err)
		}
		return o.Offset, nil
	}
	err := r.retry(ctx, fmt.Sprintf("reading the metadata and offsets of the global topics %v", topics), func(ctx context.Context) error {
		var err error
		if details, err = r.admin.ListTopics(ctx, topics...); err != nil {
			return fmt.Errorf("reading metadata of the global topics %v: %w", topics, err)
		}
		for _, spec := range r.topo.GlobalStores {
			d, ok := details[spec.Topic]
			if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
				return topicMissing("kstream: topic %q of global store %s does not exist", spec.Topic, spec.Name)
			}
			if d.Err != nil {
				return fmt.Errorf("kstream: reading metadata of topic %q of global store %s: %w", spec.Topic, spec.Name, d.Err)
			}
		}
		for _, l := range []struct {
			what string
			fn   func(context.Context, ...string) (kadm.ListedOffsets, error)
			into *kadm.ListedOffsets
		}{
			{"start", r.admin.ListStartOffsets, &starts},
			{"last stable", r.admin.ListCommittedOffsets, &lsos},
			{"end", r.admin.ListEndOffsets, &hwms},
		} {
			if *l.into, err = l.fn(ctx, topics...); err != nil {
				return fmt.Errorf("kstream: listing the %s offsets of the global topics %v: %w", l.what, topics, err)
			}
			for _, spec := range r.topo.GlobalStores {
				for p := range details[spec.Topic].Partitions {
					if _, err := lookup(*l.into, l.what, spec.Topic, p); err != nil {
						return err
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, asMissing(err)
	}

	offsets := map[string]map[int32]kgo.Offset{}
	for _, spec := range r.topo.GlobalStores {
		db, err := r.stores.db(spec.Persistent)
		if err != nil {
			return nil, err
		}
		data, err := db.Open(spec.Name, GlobalDataPartition)
		if err != nil {
			return nil, fmt.Errorf("kstream: opening global store %s: %w", spec.Name, err)
		}
		gs := &globalStore{spec: spec, data: data, batch: data.NewBatch(), parts: map[int32]*globalPart{}}
		stale := ""
		idb, recorded, haveID, err := recordedTopicID(db, spec.Name, GlobalDataPartition)
		if err != nil {
			return nil, err
		}
		topicID := details[spec.Topic].ID
		if haveID && topicID != (kadm.TopicID{}) && recorded != topicID {
			stale = fmt.Sprintf("topic %q was deleted and recreated: its topic id is %s, the store was built from topic id %s", spec.Topic, topicID, recorded)
		}
		for _, pd := range details[spec.Topic].Partitions.Sorted() {
			p := pd.Partition
			ob, err := db.Open(spec.Name+GlobalOffsetsSuffix, p)
			if err != nil {
				return nil, fmt.Errorf("kstream: opening the positions of global store %s partition %d: %w", spec.Name, p, err)
			}
			cp, err := ob.Checkpoint()
			if err != nil {
				return nil, fmt.Errorf("kstream: reading the position of global store %s partition %d: %w", spec.Name, p, err)
			}
			start, err := lookup(starts, "start", spec.Topic, p)
			if err != nil {
				return nil, err
			}
			end, err := lookup(lsos, "last stable", spec.Topic, p)
			if err != nil {
				return nil, err
			}
			hwm, err := lookup(hwms, "end", spec.Topic, p)
			if err != nil {
				return nil, err
			}
			if cp != store.NoCheckpoint && (cp < start || cp > hwm) && stale == "" {
				stale = fmt.Sprintf("partition %d: position %d is outside the topic's offsets [%d, %d]", p, cp, start, hwm)
			}
			gs.parts[p] = &globalPart{partition: p, offsets: ob, from: cp, end: end, logStart: start, checkpointed: cp}
			gs.order = append(gs.order, p)
		}
		if stale != "" {
			// Records were deleted before this instance read them, or the topic was
			// recreated: keys it has may be gone from the topic. Rebuild from scratch, as
			// Kafka Streams wipes a global store whose offsets are invalid.
			r.log.Warn("kstream: global store does not match its topic any more; rebuilding it from the start",
				"store", spec.Name, "topic", spec.Topic, "reason", stale)
			if err := db.Drop(spec.Name, GlobalDataPartition); err != nil {
				return nil, fmt.Errorf("kstream: wiping global store %s: %w", spec.Name, err)
			}
			for _, part := range gs.parts {
				if err := db.Drop(spec.Name+GlobalOffsetsSuffix, part.partition); err != nil {
					return nil, fmt.Errorf("kstream: wiping the positions of global store %s: %w", spec.Name, err)
				}
				part.from, part.checkpointed = store.NoCheckpoint, store.NoCheckpoint
			}
		}
		if topicID != (kadm.TopicID{}) && (!haveID || recorded != topicID) {
			if err := idb.Set(topicIDKey, topicID[:]); err != nil {
				return nil, fmt.Errorf("kstream: recording the topic id of %q for global store %s: %w", spec.Topic, spec.Name, err)
			}
		}
		offsets[spec.Topic] = map[int32]kgo.Offset{}
		for _, part := range gs.parts {
			part.from = max(part.from, part.logStart, 0)
			part.pos = part.from
			part.bootstrapped = part.pos >= part.end
			offsets[spec.Topic][part.partition] = kgo.NewOffset().At(part.from)
		}
		g.stores = append(g.stores, gs)
		g.byTopic[spec.Topic] = gs
	}
	return offsets, nil
}

func errIf(cond bool, msg string) error {
	if cond {
		return errors.New(msg)
	}
	return nil
}

// followGlobal is the global goroutine: it applies every polled record to its store until
// ctx ends or a fatal error, and closes g.boot once every partition has reached the end
// measured at start.
func (r *Runtime) followGlobal(ctx context.Context, cl *kgo.Client, g *globalRunner) {
	began := time.Now()
	lastLog := began
	var total, done, restored int64
	for _, gs := range g.stores {
		for _, p := range gs.order {
			part := gs.parts[p]
			total += max(part.end-part.from, 0)
			if !part.bootstrapped && r.cfg.RestoreListener != nil {
				r.cfg.RestoreListener.OnRestoreStart(gs.spec.Name, gs.spec.Topic, p, part.from, part.end)
				part.listened = true
			}
		}
	}
	r.log.Info("kstream: bootstrapping global stores", "stores", len(g.stores), "offsets_to_read", total)
	booting := true
	checkBoot := func() {
		if !booting {
			return
		}
		for _, gs := range g.stores {
			for _, part := range gs.parts {
				if !part.bootstrapped {
					return
				}
			}
		}
		booting = false
		el := time.Since(began)
		r.log.Info("kstream: global stores bootstrapped", "records", restored, "took", el.Round(time.Millisecond),
			"records_per_s", rate(restored, el))
		close(g.boot)
	}
	checkBoot()
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return
		}
		var ferr error
		fetches.EachError(func(topic string, p int32, err error) {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return
			}
			var dl *kgo.ErrDataLoss
			switch {
			case errors.As(err, &dl):
				r.log.Warn("kstream: data loss detected in a global topic, consuming from the reset offset", "topic", topic, "partition", p, "err", err)
			case retriable(err):
				// kgo retries the fetch by itself.
				r.warnEvery(fmt.Sprintf("global-fetch %s %d", topic, p), "kstream: global store: fetch error; retrying", "topic", topic, "partition", p, "err", err)
			default:
				if ferr == nil {
					ferr = fmt.Errorf("kstream: global store: fetching topic %q partition %d: %w", topic, p, err)
				}
			}
		})
		if ferr != nil {
			r.failAs(ferr, true)
			return
		}
		n, fatal := r.applyGlobal(fetches, g, booting)
		if err := g.commit(); err != nil {
			r.failAs(err, true)
			return
		}
		if fatal != nil {
			r.failAs(fatal, true)
			return
		}
		if booting {
			restored += n
			var at int64
			for _, gs := range g.stores {
				for _, p := range gs.order {
					part := gs.parts[p]
					at += min(part.pos, part.end) - min(part.from, part.end)
					if !part.bootstrapped && part.pos >= part.end {
						part.bootstrapped = true
						if part.listened {
							r.cfg.RestoreListener.OnRestoreEnd(gs.spec.Name, gs.spec.Topic, p, part.restored)
						}
					}
				}
			}
			done = at
			if time.Since(lastLog) > 10*time.Second {
				lastLog = time.Now()
				r.log.Info("kstream: bootstrapping global stores", "offsets_read", done, "offsets_to_read", total,
					"progress", progress(done, total), "records_per_s", rate(restored, time.Since(began)))
			}
			checkBoot()
		}
	}
}

// applyGlobal writes one poll's records into the stores' batches and moves the positions.
// It returns how many records below the bootstrap end it applied, and a fatal record error,
// if any: records from the failed one on are then not applied (the position stays there).
func (r *Runtime) applyGlobal(fetches kgo.Fetches, g *globalRunner, booting bool) (int64, error) {
	var applied int64
	var fatal error
	fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
		if fatal != nil {
			return
		}
		gs := g.byTopic[fp.Topic]
		if gs == nil {
			return
		}
		part := gs.parts[fp.Partition]
		if part == nil {
			return
		}
		var n int
		for _, rec := range fp.Records {
			if rec.Offset < part.pos {
				continue // already applied (a fetch may repeat after an error)
			}
			if !rec.Attrs.IsControl() && rec.Key != nil {
				ok := true
				if gs.spec.Accept != nil {
					var err error
					if ok, err = gs.spec.Accept(r, rec); err != nil {
						fatal = err
						return
					}
				}
				if ok {
					if rec.Value == nil {
						gs.batch.Delete(rec.Key)
					} else {
						gs.batch.Set(rec.Key, rec.Value)
					}
					if rec.Offset < part.end {
						n++
					}
				}
			} else if rec.Key == nil && !rec.Attrs.IsControl() {
				// As Kafka Streams: skipped silently while bootstrapping (restoring), and
				// with a warning and a dropped record after (the global KTableSource).
				attrs := []any{"store", gs.spec.Name, "topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset}
				if rec.Offset < part.end {
					r.log.Debug("kstream: skipping a record with a null key in a global topic", attrs...)
				} else {
					r.RecordDropped()
					if r.met != nil {
						r.met.globalDropped.Add(1)
					}
					r.log.Warn("kstream: skipping a record with a null key in a global topic", attrs...)
				}
			}
			part.pos = rec.Offset + 1
		}
		// Offsets removed by retention: the fetch may start past the position.
		if fp.LogStartOffset > part.pos {
			part.pos = fp.LogStartOffset
		}
		if n > 0 && booting && !part.bootstrapped {
			part.restored += int64(n)
			applied += int64(n)
			if r.cfg.RestoreListener != nil {
				r.cfg.RestoreListener.OnBatchRestored(gs.spec.Name, gs.spec.Topic, part.partition, min(part.pos, part.end), n)
			}
		}
	})
	return applied, fatal
}

// commit applies every store's batch, then records the positions that moved: the data
// is never behind a recorded position.
func (g *globalRunner) commit() error {
	for _, gs := range g.stores {
		if err := gs.batch.Commit(); err != nil {
			return fmt.Errorf("kstream: writing global store %s: %w", gs.spec.Name, err)
		}
	}
	for _, gs := range g.stores {
		for _, p := range gs.order {
			part := gs.parts[p]
			if part.pos == part.checkpointed {
				continue
			}
			b := part.offsets.NewBatch()
			b.SetCheckpoint(part.pos)
			if err := b.Commit(); err != nil {
				return fmt.Errorf("kstream: recording the position %d of global store %s partition %d: %w", part.pos, gs.spec.Name, p, err)
			}
			part.checkpointed = part.pos
		}
	}
	return nil
}

// GlobalStore implements [TaskEnv]: a new read-only backend over the global store named
// name, for one task. Each task gets its own backend (a backend is used by one goroutine
// at a time); the follower writes through another, and both engines make a committed batch
// visible to readers at once and as a whole.
func (r *Runtime) GlobalStore(name string) (store.Backend, error) {
	i := slices.IndexFunc(r.topo.GlobalStores, func(s GlobalStoreSpec) bool { return s.Name == name })
	if i < 0 {
		return nil, fmt.Errorf("kstream: no global store named %q", name)
	}
	db, err := r.stores.db(r.topo.GlobalStores[i].Persistent)
	if err != nil {
		return nil, err
	}
	b, err := db.Open(name, GlobalDataPartition)
	if err != nil {
		return nil, fmt.Errorf("kstream: opening global store %s: %w", name, err)
	}
	return ReadOnly(name, b), nil
}

// ReadOnly wraps b so that writes fail: global stores are written by the runtime only.
func ReadOnly(name string, b store.Backend) store.Backend { return readOnly{b, name} }

type readOnly struct {
	store.Backend
	name string
}

func (ro readOnly) err() error {
	return fmt.Errorf("kstream: global store %s is read-only: it is written from its topic only", ro.name)
}
func (ro readOnly) Set(_, _ []byte) error { return ro.err() }
func (ro readOnly) Delete(_ []byte) error { return ro.err() }
func (ro readOnly) NewBatch() store.Batch { return readOnlyBatch{ro.Backend.NewBatch(), ro} }

// DeleteRange fails like every write.
func (ro readOnly) DeleteRange(_, _ []byte) error { return ro.err() }

type readOnlyBatch struct {
	store.Batch
	ro readOnly
}

func (b readOnlyBatch) Commit() error { b.Reset(); return b.ro.err() }
