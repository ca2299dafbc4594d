package kstream

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"sync"
	"time"

	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/store"
)

// streamJoinOpts are the options of a stream-stream join that Kafka Streams gives with
// StreamJoined (its name is the [Named] option).
type streamJoinOpts struct {
	storeName  string
	serdes     any // a joinSerdes[K, V1, V2]
	noLog      bool
	javaTiming bool // JoinJavaNonMatchTiming
}

type joinSerdes[K, V1, V2 any] struct {
	ks  serde.Serde[K]
	v1s serde.Serde[V1]
	v2s serde.Serde[V2]
}

// JoinStoreName sets the base name of a stream-stream join's stores, as Kafka Streams'
// StreamJoined.withStoreName does: "<name>-this-join-store" and "<name>-other-join-store"
// (the outer side's get "-outer-this-join"/"-outer-other-join"), and the non-match store
// "<name>-left-shared-join-store" (outer join: "<name>-outer-shared-join-store"). Without
// it, the stores are named after the join's generated processor names whatever [Named]
// says. Applies to [JoinWindowed], [LeftJoinWindowed] and [OuterJoinWindowed].
func JoinStoreName(name string) Option {
	return optFunc{"JoinStoreName", func(c *opConfig) { c.sj.storeName = name }}
}

// JoinSerdes sets the serdes of a stream-stream join's stores (and of the repartition of a
// re-keyed side): the key's and each side's values, as Kafka Streams' StreamJoined.with.
// Without it, each side's serdes are those its stream carries. Applies to [JoinWindowed],
// [LeftJoinWindowed] and [OuterJoinWindowed]; the types must be the join's.
func JoinSerdes[K, V1, V2 any](ks serde.Serde[K], left serde.Serde[V1], right serde.Serde[V2]) Option {
	return optFunc{"JoinSerdes", func(c *opConfig) { c.sj.serdes = joinSerdes[K, V1, V2]{ks, left, right} }}
}

// JoinWithoutChangelog disables the changelogs of a stream-stream join's stores (Kafka
// Streams' StreamJoined.withLoggingDisabled): they are not restored after a restart or on
// another instance. Applies to [JoinWindowed], [LeftJoinWindowed] and [OuterJoinWindowed].
func JoinWithoutChangelog() Option {
	return optFunc{"JoinWithoutChangelog", func(c *opConfig) { c.sj.noLog = true }}
}

// JoinJavaNonMatchTiming makes a left or outer stream-stream join emit its non-matches when
// Kafka Streams 4.4 does, instead of each as soon as its own window closes (the default).
// Kafka Streams reads its non-match store only once stream time is past minTime + after +
// grace (+ before instead of after when a right record is processed), and each time it
// reads the store it sets minTime to the timestamp of the last record it read: while
// several records wait, that is a later one than the first still waiting (or one matched
// since), so that the first one's non-match waits for the later one's window to close, up
// to another after + grace of stream time. With this option kstream does the same, so that
// its output equals Java's record for record (the conformance test uses it); it does not
// copy Kafka Streams' wall-clock throttle (at most one read of the store per second), as if
// its interval were 0. See docs/joins.md. Applies to [LeftJoinWindowed] and
// [OuterJoinWindowed]; an inner join ([JoinWindowed]) has no non-matches and ignores it.
func JoinJavaNonMatchTiming() Option {
	return optFunc{"JoinJavaNonMatchTiming", func(c *opConfig) { c.sj.javaTiming = true }}
}

// JoinWindowed joins two streams on their keys within windows w, as Kafka Streams'
// KStream.join(KStream, ValueJoinerWithKey, JoinWindows, StreamJoined) does: each record
// of either stream is joined with every record of the other stream that has the same key
// and a timestamp within the windows (see [JoinWindows]), and the result has the larger of
// the two timestamps and the headers of the record that arrived last. Both streams are kept
// in window stores (with every duplicate) for before + after + grace of stream time, so a
// record that arrives out of order still finds the records it joins. Records with a null
// key or value are dropped and counted in [Stats].DroppedRecords, as are those too late
// for their store (their window's segment has expired); a late record still joins the
// records of the other stream that are kept.
//
// Joining a stream with itself (l and r the same stream) uses a single store, as Kafka
// Streams' self-join optimization (KStreamKStreamSelfJoin) does.
//
// l and r must be co-partitioned (checked at start). A side that a key-changing operator
// ran on is first repartitioned, as Kafka Streams does: through
// "<application.id>-<name>-left-repartition" (or -right-) when the join is [Named], else
// through a topic named after the operator it comes out of.
//
// Names as in Kafka Streams (KStreamImplJoin): the nodes are KSTREAM-WINDOWED-… (one per
// side, each writing its side's store), KSTREAM-JOINTHIS-… and KSTREAM-JOINOTHER-… (each
// joining its side's records with the other side's store) and KSTREAM-MERGE-…; with
// [Named] name they are "<name>-this-windowed", "<name>-other-windowed",
// "<name>-this-join", "<name>-other-join" and "<name>-merge". The stores are
// "KSTREAM-JOINTHIS-…-store" and "KSTREAM-JOINOTHER-…-store" unless [JoinStoreName] names
// them, with changelogs "<application.id>-<store>-changelog" in Kafka Streams' window
// changelog format. Options: [Named], [JoinStoreName], [JoinSerdes], [JoinWithoutChangelog].
func JoinWindowed[K, V1, V2, VR any](l KStream[K, V1], r KStream[K, V2], joiner func(key K, v1 V1, v2 V2) VR, w JoinWindows, opts ...Option) KStream[K, VR] {
	return streamJoin(l, r, innerJoin, "JoinWindowed", func(k K, v1 V1, _ bool, v2 V2, _ bool) VR { return joiner(k, v1, v2) }, w, opts)
}

// LeftJoinWindowed is [JoinWindowed] that keeps every record of l, as Kafka Streams'
// KStream.leftJoin(KStream, …, JoinWindows) does since 3.1: a left record that has found no
// right record when its window closes is emitted then, once, as joiner(key, v1, zero V2,
// false), with its own timestamp: by the first record of either stream that the task
// processes once stream time has passed its timestamp + after + grace, before that record
// is joined (Kafka Streams can emit it later: see [JoinJavaNonMatchTiming]); a left record
// that arrives after its window has closed and finds nothing is emitted at once. No
// non-match is emitted for a record that is matched later within its window. The
// pending non-matches wait in a third store, "KSTREAM-OUTERSHARED-…-store" (Kafka Streams'
// outer-join shared store, keyed by timestamp, side and key), which a match removes them
// from. Left records with a null key (KIP-962) are emitted at once as non-matches, with
// the null key; those with a null value are dropped.
//
// The node that joins the right records is KSTREAM-OUTEROTHER-… ("<name>-outer-other-join"
// when named), and with [JoinStoreName] name the stores are "<name>-this-join-store",
// "<name>-outer-other-join-store" and "<name>-left-shared-join-store". Options: those of
// [JoinWindowed] and [JoinJavaNonMatchTiming].
func LeftJoinWindowed[K, V1, V2, VR any](l KStream[K, V1], r KStream[K, V2], joiner func(key K, v1 V1, v2 V2, found bool) VR, w JoinWindows, opts ...Option) KStream[K, VR] {
	return streamJoin(l, r, leftJoin, "LeftJoinWindowed", func(k K, v1 V1, _ bool, v2 V2, ok2 bool) VR { return joiner(k, v1, v2, ok2) }, w, opts)
}

// OuterJoinWindowed is [LeftJoinWindowed] that keeps every record of both streams, as Kafka
// Streams' KStream.outerJoin(KStream, …, JoinWindows) does: the non-match of a right record
// is joiner(key, zero V1, false, v2, true), emitted when its window closes (its timestamp
// + before + grace), and right records with a null key are emitted at once too.
//
// Both joining nodes are then KSTREAM-OUTERTHIS-… and KSTREAM-OUTEROTHER-…
// ("<name>-outer-this-join", "<name>-outer-other-join"), and the non-match store is
// "KSTREAM-OUTERSHARED-…-store" ("<name>-outer-shared-join-store").
func OuterJoinWindowed[K, V1, V2, VR any](l KStream[K, V1], r KStream[K, V2], joiner func(key K, v1 V1, found1 bool, v2 V2, found2 bool) VR, w JoinWindows, opts ...Option) KStream[K, VR] {
	return streamJoin(l, r, outerJoin, "OuterJoinWindowed", joiner, w, opts)
}

// streamJoinDef is what the processors of one stream-stream join share.
type streamJoinDef[K, V1, V2, VR any] struct {
	kind                  joinKind
	before, after, grace  int64
	join                  func(k K, v1 V1, ok1 bool, v2 V2, ok2 bool) VR
	thisStore, otherStore string
	sharedStore           string // "" for an inner join
	// javaTiming: non-matches are emitted when Kafka Streams emits them
	// (JoinJavaNonMatchTiming), else each when its own window closes.
	javaTiming bool
	// clocks are the per-task stream times shared by the two sides (Kafka Streams'
	// TimeTrackerSupplier).
	mu     sync.Mutex
	clocks map[*task]*joinClock
}

func streamJoin[K, V1, V2, VR any](l KStream[K, V1], r KStream[K, V2], kind joinKind, op string, joiner func(K, V1, bool, V2, bool) VR, w JoinWindows, opts []Option) KStream[K, VR] {
	b := l.b
	c := b.options(op, opts, "JoinStoreName", "JoinSerdes", "JoinWithoutChangelog", "JoinJavaNonMatchTiming")
	if r.b != b {
		b.errorf("%s: the streams come from different builders", op)
		return KStream[K, VR]{b: b, n: l.n}
	}
	if err := w.check(); err != nil {
		b.errorf("%s: %w", op, err)
	}
	ks, v1s, v2s := l.ks, l.vs, r.vs
	if ks == nil {
		ks = r.ks
	}
	if c.sj.serdes != nil {
		s, ok := c.sj.serdes.(joinSerdes[K, V1, V2])
		if !ok {
			b.errorf("%s: JoinSerdes has the types of another join (%T)", op, c.sj.serdes)
		} else {
			if s.ks != nil {
				ks = s.ks
			}
			if s.v1s != nil {
				v1s = s.v1s
			}
			if s.v2s != nil {
				v2s = s.v2s
			}
		}
	}
	// KStreamImpl.doJoin: re-keyed sides are repartitioned first, the left then the right.
	// A re-keyed stream joined with itself is repartitioned once (a named join's
	// "<name>-left" and "<name>-right" merge into the first, as Java's optimizer merges the
	// repartitions of one key-changing operator), and is a self-join.
	if l.keyChanged {
		repName := l.n.name
		if c.name != "" {
			repName = c.name + "-left"
		}
		l = repartitionForKey(KStream[K, V1]{b: b, n: l.n, ks: ks, vs: v1s, keyChanged: true}, repName, c.name == "", op)
	}
	if r.keyChanged {
		repName := r.n.name
		if c.name != "" {
			repName = c.name + "-right"
		}
		r = repartitionForKey(KStream[K, V2]{b: b, n: r.n, ks: ks, vs: v2s, keyChanged: true}, repName, c.name == "", op)
	}
	self := l.n == r.n
	if ks == nil || v1s == nil || v2s == nil {
		b.errorf("%s: the join's window stores need the key and both value serdes; use JoinSerdes: %w", op, ErrNoSerde)
	}

	// Names in the order KStreamImplJoin takes them from the counter.
	leftOuter, rightOuter := kind != innerJoin, kind == outerJoin
	thisSuffix, otherSuffix := "-this-join", "-other-join"
	thisPrefix, otherPrefix := "KSTREAM-JOINTHIS", "KSTREAM-JOINOTHER"
	if rightOuter {
		thisSuffix, thisPrefix = "-outer-this-join", "KSTREAM-OUTERTHIS"
	}
	if leftOuter {
		otherSuffix, otherPrefix = "-outer-other-join", "KSTREAM-OUTEROTHER"
	}
	named := func(suffix, gen string) string {
		if c.name != "" {
			return c.name + suffix
		}
		return gen
	}
	thisWinName := named("-this-windowed", b.newName("KSTREAM-WINDOWED"))
	otherWinName := named("-other-windowed", b.newName("KSTREAM-WINDOWED"))
	thisGen, otherGen := b.newName(thisPrefix), b.newName(otherPrefix)
	thisName, otherName := named(thisSuffix, thisGen), named(otherSuffix, otherGen)
	mergeName := named("-merge", b.newName("KSTREAM-MERGE"))

	thisStore, otherStore := thisGen+"-store", otherGen+"-store"
	if c.sj.storeName != "" {
		thisStore, otherStore = c.sj.storeName+thisSuffix+"-store", c.sj.storeName+otherSuffix+"-store"
	}
	def := &streamJoinDef[K, V1, V2, VR]{kind: kind, before: w.before, after: w.after, grace: w.grace, join: joiner,
		thisStore: thisStore, otherStore: otherStore, clocks: map[*task]*joinClock{}, javaTiming: c.sj.javaTiming}
	if leftOuter {
		// OuterStreamJoinStoreFactory's name: KSTREAM-OUTERSHARED- and the number of the
		// generated this-side name.
		sharedSuffix := "-left-shared-join"
		if rightOuter {
			sharedSuffix = "-outer-shared-join"
		}
		def.sharedStore = "KSTREAM-OUTERSHARED-" + thisGen[len(thisPrefix)+1:] + "-store"
		if c.sj.storeName != "" {
			def.sharedStore = c.sj.storeName + sharedSuffix + "-store"
		}
	}

	size, retention := max(w.size(), 0), max(w.size(), 0)+w.grace
	thisD := joinWindowStoreDef(b, op, thisStore, ks, v1s, size, retention, !c.sj.noLog)
	thisD.window = w.def()
	thisWin := b.tableNode(thisWinName, l.n)
	b.addStore(thisD, thisWin)
	thisWin.instantiate = joinWindowInstance(thisWin, thisStore, ks, v1s)

	if self {
		// Kafka Streams' rewriteSingleStoreSelfJoin: one windowed node and one store; the
		// self-join processor takes the merge node's name.
		mergeN := b.tableNode(mergeName, thisWin)
		b.addStore(thisD, mergeN)
		mergeN.instantiate = func(t *task) (any, error) {
			st, err := taskJoinStore[K, V1](t, thisStore)
			if err != nil {
				return nil, err
			}
			p := &selfJoinProcessor[K, V1, V2, VR]{def: def, t: t, n: mergeN, st: st, joinClock: newJoinClock()}
			if err := p.recover(); err != nil {
				return nil, err
			}
			t.txnHooks = append(t.txnHooks, &p.joinClock)
			return processorInstance(t, mergeN, ProcessorFunc[K, V1, K, VR](p.process))
		}
		// Java registers the join's sources as co-partitioned all the same: a group of one
		// topic, which a streams-group declaration lists.
		b.copart = append(b.copart, []*node{l.n})
		return KStream[K, VR]{b: b, n: mergeN, ks: ks}
	}

	otherD := joinWindowStoreDef(b, op, otherStore, ks, v2s, size, retention, !c.sj.noLog)
	otherD.window = w.def()
	otherWin := b.tableNode(otherWinName, r.n)
	b.addStore(otherD, otherWin)
	otherWin.instantiate = joinWindowInstance(otherWin, otherStore, ks, v2s)

	thisN := b.tableNode(thisName, thisWin)
	otherN := b.tableNode(otherName, otherWin)
	b.addStore(otherD, thisN)
	b.addStore(thisD, otherN)
	if leftOuter {
		sd := &storeDef{name: def.sharedStore, persistent: true, logged: !c.sj.noLog,
			keyID: serdeID(ks), valueID: serdeID(v1s) + ", " + serdeID(v2s)}
		// Java's outer-join store serdes wrap the join's serdes, which name their subjects
		// after the store's changelog.
		kser := joinKeySerde[K]{storeSerde(sd, ks, true)}
		vser := joinValuesSerde[V1, V2]{storeSerde(sd, v1s, false), storeSerde(sd, v2s, false)}
		sd.typed = func(bk store.Backend) any { return store.NewKeyValueStore(def.sharedStore, bk, kser, vser) }
		b.addStore(sd, thisN)
		b.addStore(sd, otherN)
	}
	mergeN := b.tableNode(mergeName, thisN, otherN)
	// KIP-962: left and outer joins take null keys, so repartitions upstream of either side
	// keep them (Java labels the join node NULL_KEY_RELAXED_JOIN, above both sides).
	thisN.relaxedJoin = leftOuter
	otherN.relaxedJoin = leftOuter
	mergeN.instantiate = func(t *task) (any, error) {
		return processorInstance(t, mergeN, ProcessorFunc[K, VR, K, VR](func(ctx ProcessorContext[K, VR], rec Record[K, VR]) error {
			ctx.Forward(rec)
			return nil
		}))
	}
	thisN.instantiate = func(t *task) (any, error) {
		p, err := newJoinSide[K, V1, V2, V1, V2, VR](t, thisN, def, true, leftOuter, otherStore,
			func(k K, v V1, o V2, found bool) VR { return def.join(k, v, true, o, found) })
		if err != nil {
			return nil, err
		}
		t.closers = append(t.closers, namedCloser{thisN.name, p})
		return processorInstance(t, thisN, ProcessorFunc[K, V1, K, VR](p.process))
	}
	otherN.instantiate = func(t *task) (any, error) {
		p, err := newJoinSide[K, V2, V1, V1, V2, VR](t, otherN, def, false, rightOuter, thisStore,
			func(k K, v V2, o V1, found bool) VR { return def.join(k, o, found, v, true) })
		if err != nil {
			return nil, err
		}
		t.closers = append(t.closers, namedCloser{otherN.name, p})
		return processorInstance(t, otherN, ProcessorFunc[K, V2, K, VR](p.process))
	}
	b.copart = append(b.copart, []*node{l.n, r.n})
	return KStream[K, VR]{b: b, n: mergeN, ks: ks}
}

// joinWindowStoreDef declares a window store of a stream-stream join, as Kafka Streams'
// StreamJoinedStoreFactory does: windows of the join's size, kept for size + grace, every
// duplicate retained, changelog with cleanup.policy delete.
//
// The store has no read cache: the join reads it only by key and time range, which the
// read cache does not serve, and every write is of a new key (a record's key, timestamp
// and sequence number), so caching the writes cost map work for nothing.
func joinWindowStoreDef[K, V any](b *Builder, op, name string, ks serde.Serde[K], vs serde.Serde[V], size, retention int64, logged bool) *storeDef {
	d := &storeDef{name: name, persistent: true, logged: logged, noReadCache: true}
	o := store.WindowOptions{
		Retention:        time.Duration(retention) * time.Millisecond,
		WindowSize:       time.Duration(size) * time.Millisecond,
		RetainDuplicates: true,
	}
	codec, err := store.NewWindowChangelog(o)
	if err != nil {
		b.errorf("%s: %w", op, err)
	}
	d.codec = joinChangelogCodec{codec}
	ks, vs = storeSerde(d, ks, true), storeSerde(d, vs, false)
	d.key, d.value = ks, vs
	d.typed = func(bk store.Backend) any {
		ws, err := store.NewWindowStore(name, bk, ks, vs, o)
		if err != nil {
			return err
		}
		return ws
	}
	return d
}

// joinChangelogCodec is the changelog codec of a join's window store: a window store's,
// with Kafka Streams' cleanup.policy=delete (StreamJoinedStoreFactory sets it: the store
// keeps duplicates, which compaction would lose).
type joinChangelogCodec struct{ store.ChangelogCodec }

func (c joinChangelogCodec) TopicConfigs() map[string]*string {
	m := maps.Clone(c.ChangelogCodec.TopicConfigs())
	m["cleanup.policy"] = ptr("delete")
	return m
}

// WindowOptions gives the test driver the store's options, as the window codec does.
func (c joinChangelogCodec) WindowOptions() store.WindowOptions {
	if wo, ok := c.ChangelogCodec.(interface{ WindowOptions() store.WindowOptions }); ok {
		return wo.WindowOptions()
	}
	return store.WindowOptions{}
}

// taskJoinStore returns task t's instance of the join window store named name.
func taskJoinStore[K, V any](t *task, name string) (*store.WindowStore[K, V], error) {
	switch s := t.stores[name].(type) {
	case *store.WindowStore[K, V]:
		return s, nil
	case error:
		return nil, fmt.Errorf("kstream: task %s: window store %q: %w", t.id, name, s)
	default:
		return nil, fmt.Errorf("kstream: internal error: task %s has no join window store %q of these types (it has a %T)", t.id, name, t.stores[name])
	}
}

// joinWindowInstance is the processor of a KSTREAM-WINDOWED node (Kafka Streams'
// KStreamJoinWindow): it forwards each record, then keeps it in its side's window store,
// unless its key or value is null.
func joinWindowInstance[K, V any](n *node, name string, ks serde.Serde[K], vs serde.Serde[V]) func(t *task) (any, error) {
	return func(t *task) (any, error) {
		st, err := taskJoinStore[K, V](t, name)
		if err != nil {
			return nil, err
		}
		return processorInstance(t, n, ProcessorFunc[K, V, K, V](func(ctx ProcessorContext[K, V], r Record[K, V]) error {
			ctx.Forward(r)
			if r.HasNullKey() || nullValue(r) {
				return nil
			}
			return joinPut(t, n, st, r)
		}))
	}
}

// joinPut puts r in a join's window store, counting it as dropped if its window has
// expired (Kafka Streams' "Skipping record for expired segment", a dropped record).
func joinPut[K, V any](t *task, n *node, st *store.WindowStore[K, V], r Record[K, V]) error {
	before := st.DroppedExpired()
	if err := st.Put(r.Key, r.Value, r.Timestamp); err != nil {
		return err
	}
	if st.DroppedExpired() != before {
		return t.lateJoinRecord(n, st, unixMs(r.Timestamp))
	}
	return nil
}

// joinClock is the time of a stream-stream join in one task, shared by its two sides
// (Kafka Streams' KStreamImplJoin.TimeTracker): the largest timestamp either side has seen
// (-1 before the first); for the non-match store, due, a time no later than the earliest
// close of a waiting record's window, so that no non-match is due while stream time has not
// passed it (math.MaxInt64 when none waits), and minTime, Kafka Streams' guess of the
// smallest waiting timestamp, which only [JoinJavaNonMatchTiming] reads. It is a txnHook,
// so that it goes back with the stores when a transaction aborts.
type joinClock struct {
	streamTime, minTime, due                int64
	savedStreamTime, savedMinTime, savedDue int64
}

func newJoinClock() joinClock {
	return joinClock{streamTime: -1, minTime: math.MaxInt64, due: math.MaxInt64,
		savedStreamTime: -1, savedMinTime: math.MaxInt64, savedDue: math.MaxInt64}
}

func (c *joinClock) committed() {
	c.savedStreamTime, c.savedMinTime, c.savedDue = c.streamTime, c.minTime, c.due
}

func (c *joinClock) cut() func() {
	streamTime, minTime, due := c.streamTime, c.minTime, c.due
	return func() { c.savedStreamTime, c.savedMinTime, c.savedDue = streamTime, minTime, due }
}

func (c *joinClock) aborted() {
	c.streamTime, c.minTime, c.due = c.savedStreamTime, c.savedMinTime, c.savedDue
}

// clock returns task t's clock of the join, creating it (recovered from the stores) on
// first use.
func (d *streamJoinDef[K, V1, V2, VR]) clock(t *task, recover func(*joinClock) error) (*joinClock, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if c, ok := d.clocks[t]; ok {
		return c, nil
	}
	c := newJoinClock()
	if err := recover(&c); err != nil {
		return nil, err
	}
	c.committed()
	d.clocks[t] = &c
	t.txnHooks = append(t.txnHooks, &c)
	return &c, nil
}

func (d *streamJoinDef[K, V1, V2, VR]) release(t *task) {
	d.mu.Lock()
	delete(d.clocks, t)
	d.mu.Unlock()
}

// joinKey is a key of the non-match store (Kafka Streams' TimestampedKeyAndJoinSide).
type joinKey[K any] struct {
	ts   int64
	left bool
	key  K
}

// joinKeySerde writes a joinKey as Kafka Streams' TimestampedKeyAndJoinSideSerializer: the
// 8-byte big-endian timestamp, 1 for the left side (0 for the right), the key. Keys sort by
// timestamp, then right before left, then key.
type joinKeySerde[K any] struct{ ks serde.Serde[K] }

func (s joinKeySerde[K]) Serialize(k joinKey[K]) ([]byte, error) {
	kb, err := s.ks.Serialize(k.key)
	if err != nil {
		return nil, err
	}
	out := binary.BigEndian.AppendUint64(make([]byte, 0, 9+len(kb)), uint64(k.ts))
	side := byte(0)
	if k.left {
		side = 1
	}
	return append(append(out, side), kb...), nil
}

func (s joinKeySerde[K]) Deserialize(b []byte) (joinKey[K], error) {
	if len(b) < 9 {
		return joinKey[K]{}, fmt.Errorf("a join key of %d bytes", len(b))
	}
	k, err := s.ks.Deserialize(b[9:])
	return joinKey[K]{ts: int64(binary.BigEndian.Uint64(b)), left: b[8] == 1, key: k}, err
}

// joinValue is one value waiting in the non-match store (Kafka Streams' LeftOrRightValue).
type joinValue[V1, V2 any] struct {
	left bool
	v1   V1
	v2   V2
}

// joinValuesSerde writes the values of one non-match store key as Kafka Streams'
// ListValueStore does: a ListSerde of byte arrays (1, the 4-byte count, then each value's
// 4-byte length and bytes), each value a LeftOrRightValue (1 for a left value, 0 for a
// right one, then the value).
type joinValuesSerde[V1, V2 any] struct {
	v1s serde.Serde[V1]
	v2s serde.Serde[V2]
}

func (s joinValuesSerde[V1, V2]) Serialize(vs []joinValue[V1, V2]) ([]byte, error) {
	out := binary.BigEndian.AppendUint32([]byte{1}, uint32(len(vs)))
	for _, v := range vs {
		var raw []byte
		var err error
		side := byte(0)
		if v.left {
			side = 1
			raw, err = s.v1s.Serialize(v.v1)
		} else {
			raw, err = s.v2s.Serialize(v.v2)
		}
		if err != nil {
			return nil, err
		}
		out = binary.BigEndian.AppendUint32(out, uint32(1+len(raw)))
		out = append(append(out, side), raw...)
	}
	return out, nil
}

func (s joinValuesSerde[V1, V2]) Deserialize(b []byte) ([]joinValue[V1, V2], error) {
	if len(b) < 5 || b[0] != 1 {
		return nil, errors.New("not a list of join values")
	}
	n := int(binary.BigEndian.Uint32(b[1:]))
	b = b[5:]
	out := make([]joinValue[V1, V2], 0, n)
	for range n {
		if len(b) < 4 {
			return nil, errors.New("a truncated list of join values")
		}
		l := int(binary.BigEndian.Uint32(b))
		b = b[4:]
		if l < 1 || len(b) < l {
			return nil, errors.New("a truncated join value")
		}
		var v joinValue[V1, V2]
		var err error
		if v.left = b[0] == 1; v.left {
			v.v1, err = s.v1s.Deserialize(b[1:l])
		} else {
			v.v2, err = s.v2s.Deserialize(b[1:l])
		}
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		b = b[l:]
	}
	return out, nil
}

type joinShared[K, V1, V2 any] = store.KeyValueStore[joinKey[K], []joinValue[V1, V2]]

// joinSide is the processor of one side of a stream-stream join (Kafka Streams'
// KStreamKStreamJoinLeftSide and KStreamKStreamJoinRightSide): records of type VT joined
// with the other side's store of VO.
type joinSide[K, VT, VO, V1, V2, VR any] struct {
	def        *streamJoinDef[K, V1, V2, VR]
	t          *task
	n          *node
	left       bool
	outer      bool
	joinBefore int64 // how far before a record of this side the other side's records join
	joinAfter  int64
	other      *store.WindowStore[K, VO]
	shared     *joinShared[K, V1, V2] // nil for an inner join
	clock      *joinClock
	call       func(k K, v VT, o VO, found bool) VR
	matches    []store.WindowValue[VO] // reused by process
}

func newJoinSide[K, VT, VO, V1, V2, VR any](t *task, n *node, def *streamJoinDef[K, V1, V2, VR], left, outer bool, otherStore string, call func(K, VT, VO, bool) VR) (*joinSide[K, VT, VO, V1, V2, VR], error) {
	other, err := taskJoinStore[K, VO](t, otherStore)
	if err != nil {
		return nil, err
	}
	p := &joinSide[K, VT, VO, V1, V2, VR]{def: def, t: t, n: n, left: left, outer: outer, other: other, call: call,
		joinBefore: def.before, joinAfter: def.after}
	if !left {
		p.joinBefore, p.joinAfter = def.after, def.before
	}
	if def.sharedStore != "" {
		s, ok := t.stores[def.sharedStore].(*joinShared[K, V1, V2])
		if !ok {
			return nil, fmt.Errorf("kstream: internal error: task %s has no join store %q of these types (it has a %T)", t.id, def.sharedStore, t.stores[def.sharedStore])
		}
		p.shared = s
	}
	p.clock, err = def.clock(t, p.recover)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// recover sets a task's join clock from its stores, for a task that starts with state:
// the stream time is the latest timestamp of either window store, the smallest pending
// non-match time (minTime) the first key of the non-match store, and due the earliest that
// the window of a record at that time can close. (Kafka Streams starts from no stream time
// and no minTime, so it looks for closed windows on its first record.)
func (p *joinSide[K, VT, VO, V1, V2, VR]) recover(c *joinClock) error {
	for _, name := range []string{p.def.thisStore, p.def.otherStore} {
		st, ok := p.t.stores[name].(interface {
			ObservedStreamTime() (time.Time, bool, error)
		})
		if !ok {
			continue
		}
		ts, ok, err := st.ObservedStreamTime()
		if err != nil {
			return err
		}
		if ok {
			c.streamTime = max(c.streamTime, ts.UnixMilli())
		}
	}
	if p.shared == nil {
		return nil
	}
	it, err := p.shared.All()
	if err != nil {
		return err
	}
	defer it.Close()
	if it.Next() {
		c.minTime = it.Key().ts
		c.due = c.minTime + p.def.minLookBack() + p.def.grace
	}
	return it.Err()
}

// Close releases the task's clock.
func (p *joinSide[K, VT, VO, V1, V2, VR]) Close() error {
	p.def.release(p.t)
	return nil
}

func (p *joinSide[K, VT, VO, V1, V2, VR]) thisValue(v VT) joinValue[V1, V2] {
	var jv joinValue[V1, V2]
	jv.left = p.left
	if p.left {
		jv.v1 = any(v).(V1)
	} else {
		jv.v2 = any(v).(V2)
	}
	return jv
}

func (p *joinSide[K, VT, VO, V1, V2, VR]) process(ctx ProcessorContext[K, VR], r Record[K, VT]) error {
	c := p.clock
	ts := unixMs(r.Timestamp)
	c.streamTime = max(c.streamTime, ts)
	if p.shared != nil && !p.def.javaTiming {
		// The non-matches whose windows this record's time has closed go out first, even
		// when the record itself is then dropped.
		if err := p.emitNonMatches(ctx, r); err != nil {
			return err
		}
	}
	if p.outer && r.HasNullKey() && !nullValue(r) {
		// KIP-962: an outer side's record with a null key is a non-match, at once.
		var zero VO
		ctx.Forward(Record[K, VR]{Key: r.Key, Value: p.call(r.Key, r.Value, zero, false), Timestamp: r.Timestamp, Headers: r.Headers, nullKey: r.nullKey})
		return nil
	}
	if r.HasNullKey() || nullValue(r) {
		p.t.dropRecord(p.n, "join key or value")
		return nil
	}
	if ts == c.streamTime && p.shared != nil && p.def.javaTiming {
		if err := p.emitNonMatchesAsJava(ctx, r); err != nil {
			return err
		}
	}
	from, to := max(0, ts-p.joinBefore), max(0, ts+p.joinAfter)
	// The matches are read at once into the processor's slice (taken while in use, in case
	// a forward comes back to this processor), then joined.
	matches, err := p.other.AppendFetchRange(p.matches[:0], r.Key, time.UnixMilli(from), time.UnixMilli(to))
	p.matches = nil
	defer func() { clear(matches); p.matches = matches[:0] }()
	if err != nil {
		return err
	}
	for _, m := range matches {
		if p.shared != nil {
			// The other side's record is matched: it is no longer a pending non-match.
			k := joinKey[K]{ts: m.Start, left: !p.left, key: r.Key}
			if _, ok, err := p.shared.Get(k); err != nil {
				return err
			} else if ok {
				if err := p.shared.Delete(k); err != nil {
					return err
				}
			}
		}
		ctx.Forward(Record[K, VR]{Key: r.Key, Value: p.call(r.Key, r.Value, m.Value, true), Timestamp: time.UnixMilli(max(ts, m.Start)), Headers: r.Headers})
	}
	if !p.outer || len(matches) > 0 {
		return nil
	}
	if p.shared == nil || to < c.streamTime {
		// The record's window has closed already: its non-match goes out at once.
		var zero VO
		ctx.Forward(Record[K, VR]{Key: r.Key, Value: p.call(r.Key, r.Value, zero, false), Timestamp: r.Timestamp, Headers: r.Headers})
		return nil
	}
	c.minTime = min(c.minTime, ts)
	c.due = min(c.due, ts+p.joinAfter+p.def.grace) // this record's window closes then
	k := joinKey[K]{ts: ts, left: p.left, key: r.Key}
	vs, _, err := p.shared.Get(k)
	if err != nil {
		return err
	}
	return p.shared.Put(k, append(vs, p.thisValue(r.Value)))
}

// joinPending is a key of the non-match store and its values, whose window has closed.
type joinPending[K, V1, V2 any] struct {
	k  joinKey[K]
	vs []joinValue[V1, V2]
}

// minLookBack is how long after its timestamp the window of a record waiting in the
// non-match store closes at the earliest, before the grace: after for a left record,
// before for a right one (only left records wait in a left join's store).
func (d *streamJoinDef[K, V1, V2, VR]) minLookBack() int64 {
	if d.kind == outerJoin {
		return min(d.before, d.after)
	}
	return d.after
}

// closes returns the stream time that the window of a record waiting under k closes at:
// once stream time is past it, the record's non-match is due.
func (d *streamJoinDef[K, V1, V2, VR]) closes(k joinKey[K]) int64 {
	if k.left {
		return k.ts + d.after + d.grace
	}
	return k.ts + d.before + d.grace
}

// emitNonMatches emits every pending non-match whose window has closed (stream time is
// past its timestamp + after + grace, for a right record + before + grace), in the order
// of the non-match store (timestamp, right before left, key), and removes them: each has
// its own key and timestamp and the headers of the record in hand, whose time closed the
// window. It reads the store only once stream time has passed clock.due, and then only up
// to the first record whose window cannot have closed even with the shorter look-back of
// the two sides (nor can any later record's); it sets due to the earliest closing time of
// the waiting records it read, or, when it stopped early, to that first record's lower
// bound if smaller. (Kafka Streams' timing is emitNonMatchesAsJava's.)
func (p *joinSide[K, VT, VO, V1, V2, VR]) emitNonMatches(ctx ProcessorContext[K, VR], r Record[K, VT]) error {
	c, def := p.clock, p.def
	if c.due >= c.streamTime {
		return nil
	}
	// due is a lower bound of the closing times of the records that wait: from here on
	// the records read give it, and the first one left unread (with the smallest
	// timestamp of those unread) bounds the rest.
	c.due = math.MaxInt64
	it, err := p.shared.All()
	if err != nil {
		return err
	}
	minLookBack := def.minLookBack()
	var due []joinPending[K, V1, V2]
	for it.Next() {
		k := it.Key()
		if earliest := k.ts + minLookBack + def.grace; earliest >= c.streamTime {
			// Neither this record's window nor any later record's has closed.
			c.due = min(c.due, earliest)
			break
		}
		if closes := def.closes(k); closes >= c.streamTime {
			// Open (only with asymmetric windows can a later record's have closed).
			c.due = min(c.due, closes)
			continue
		}
		due = append(due, joinPending[K, V1, V2]{k, it.Value()})
	}
	err = it.Err()
	it.Close()
	if err != nil {
		return err
	}
	return p.forwardNonMatches(ctx, r, due)
}

// emitNonMatchesAsJava is emitNonMatches as Kafka Streams' emitNonJoinedOuterRecords does
// it ([JoinJavaNonMatchTiming]), without its wall-clock throttle: it reads the store only
// when stream time is past minTime + the after of this side + grace, and sets minTime,
// for each record it reads, to that record's timestamp, so that after a pass minTime is
// the timestamp of the last record read: with several records waiting, a later one than
// the first that waits.
func (p *joinSide[K, VT, VO, V1, V2, VR]) emitNonMatchesAsJava(ctx ProcessorContext[K, VR], r Record[K, VT]) error {
	c, def := p.clock, p.def
	// Java computes minTime + after + grace in longs: with no minTime known (Long.MAX_VALUE)
	// the sum wraps around and the store is scanned; Go's int64 arithmetic wraps the same.
	if c.minTime+p.joinAfter+def.grace >= c.streamTime {
		return nil
	}
	c.minTime = math.MaxInt64
	it, err := p.shared.All()
	if err != nil {
		return err
	}
	var due []joinPending[K, V1, V2]
	leftOpen, rightOpen := false, false
	for it.Next() {
		k := it.Key()
		c.minTime = k.ts
		if leftOpen && rightOpen {
			break
		}
		lookBack := def.before
		if k.left {
			lookBack = def.after
		}
		if c.minTime+lookBack+def.grace >= c.streamTime {
			if k.left {
				leftOpen = true
			} else {
				rightOpen = true
			}
			continue
		}
		due = append(due, joinPending[K, V1, V2]{k, it.Value()})
	}
	err = it.Err()
	it.Close()
	if err != nil {
		return err
	}
	return p.forwardNonMatches(ctx, r, due)
}

// forwardNonMatches forwards the non-matches of due, with the headers of r, and removes
// them from the non-match store.
func (p *joinSide[K, VT, VO, V1, V2, VR]) forwardNonMatches(ctx ProcessorContext[K, VR], r Record[K, VT], due []joinPending[K, V1, V2]) error {
	def := p.def
	for _, d := range due {
		for _, v := range d.vs {
			var zero1 V1
			var zero2 V2
			var vr VR
			if v.left {
				vr = def.join(d.k.key, v.v1, true, zero2, false)
			} else {
				vr = def.join(d.k.key, zero1, false, v.v2, true)
			}
			ctx.Forward(Record[K, VR]{Key: d.k.key, Value: vr, Timestamp: time.UnixMilli(d.k.ts), Headers: r.Headers})
		}
		if err := p.shared.Delete(d.k); err != nil {
			return err
		}
	}
	return nil
}

// selfJoinProcessor is the single-store join of a stream with itself (Kafka Streams'
// KStreamKStreamSelfJoin), with a stream time of its own.
type selfJoinProcessor[K, V1, V2, VR any] struct {
	def *streamJoinDef[K, V1, V2, VR]
	t   *task
	n   *node
	st  *store.WindowStore[K, V1]
	joinClock
}

func (p *selfJoinProcessor[K, V1, V2, VR]) recover() error {
	ts, ok, err := p.st.ObservedStreamTime()
	if ok {
		p.streamTime = ts.UnixMilli()
	}
	p.committed()
	return err
}

func (p *selfJoinProcessor[K, V1, V2, VR]) process(ctx ProcessorContext[K, VR], r Record[K, V1]) error {
	if r.HasNullKey() || nullValue(r) {
		p.t.dropRecord(p.n, "join key or value")
		return nil
	}
	def := p.def
	ts := unixMs(r.Timestamp)
	// V1 and V2 are the same type in a self-join.
	asV2 := func(v V1) V2 { return any(v).(V2) }
	out := func(v VR, at int64) {
		ctx.Forward(Record[K, VR]{Key: r.Key, Value: v, Timestamp: time.UnixMilli(at), Headers: r.Headers})
	}
	p.streamTime = max(p.streamTime, ts)
	retention := max(def.before+def.after, 0) + def.grace
	emitSelf := ts > p.streamTime-retention+1
	fetch := func(before, after int64) ([]store.WindowValue[V1], error) {
		return p.st.AppendFetchRange(nil, r.Key, time.UnixMilli(max(0, ts-before)), time.UnixMilli(max(0, ts+after)))
	}
	ms, err := fetch(def.before, def.after)
	if err != nil {
		return err
	}
	for _, m := range ms {
		out(def.join(r.Key, r.Value, true, asV2(m.Value), true), max(ts, m.Start))
	}
	ms, err = fetch(def.after, def.before)
	if err != nil {
		return err
	}
	emitted := false
	for _, m := range ms {
		if ts < max(ts, m.Start) && !emitted && emitSelf {
			emitted = true
			out(def.join(r.Key, r.Value, true, asV2(r.Value), true), ts)
		}
		out(def.join(r.Key, m.Value, true, asV2(r.Value), true), max(ts, m.Start))
	}
	if !emitted && emitSelf {
		out(def.join(r.Key, r.Value, true, asV2(r.Value), true), ts)
	}
	return nil
}
