package kstream

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/store"
)

// WithRetention sets how long, in stream time, a window store keeps a window after its
// start (Kafka Streams' Materialized.withRetention): at least the window size plus the
// grace period (twice the time difference plus the grace for sliding windows, the
// inactivity gap plus the grace for sessions), which is also the default. A longer
// retention keeps closed windows queryable for longer. It applies to windowed aggregations
// only.
func WithRetention(retention time.Duration) StoreOption {
	return storeOpt{"WithRetention", func(d *storeDef) {
		d.retention, d.retentionSet = retention, true
	}}
}

// TimeWindowedKStream is a grouped stream with time windows ([TimeWindows] or
// [SlidingWindows]), ready for a windowed aggregation ([WindowedCount], [WindowedReduce],
// [WindowedAggregate]). Create one with [KGroupedStream.WindowedBy].
type TimeWindowedKStream[K, V any] struct {
	g       KGroupedStream[K, V]
	w       windowSpec
	onClose bool
	close   closeOptions
}

// WindowedBy windows the grouped stream by time: [TimeWindowsOf] (tumbling or hopping) or
// [SlidingWindowsOf].
func (g KGroupedStream[K, V]) WindowedBy(w Windows) TimeWindowedKStream[K, V] {
	var s windowSpec
	if w == nil {
		s.err = fmt.Errorf("WindowedBy: the windows are nil")
	} else {
		s = w.spec()
	}
	return TimeWindowedKStream[K, V]{g: g, w: s}
}

// EmitOnWindowClose makes the aggregation emit one final result per window, when the
// window closes (its end plus the grace period is reached by stream time), instead of an
// update for every record: Kafka Streams' EmitStrategy.onWindowClose. Unlike
// [KTable.Suppress], it keeps no buffer of its own: the final results are read from the
// window store, so that it costs nothing per record beyond the aggregation.
//
// As in Kafka Streams, the results of a window are emitted when a record of the same task
// moves stream time past the window's close, with that record's headers and the window's
// timestamp (the largest timestamp aggregated into it); windows are emitted in the order of
// the store (by window start, then key, segment by segment).
//
// As in Kafka Streams, a window whose retention in the store passes before it closes (when
// stream time jumps over several windows at once: the retention is by default the window
// size plus the grace period) expires without a final result; it is counted
// ([Stats].LostResults, kstream_operator_lost_results_total) and logged at warn.
// [EmitBeforeExpiry] emits it instead (see docs/windows.md).
func (w TimeWindowedKStream[K, V]) EmitOnWindowClose(opts ...CloseOption) TimeWindowedKStream[K, V] {
	w.onClose = true
	for _, o := range opts {
		o(&w.close)
	}
	return w
}

// CloseOption is an option of EmitOnWindowClose ([TimeWindowedKStream.EmitOnWindowClose],
// [SessionWindowedKStream.EmitOnWindowClose]).
type CloseOption func(*closeOptions)

type closeOptions struct {
	beforeExpiry bool
	idle         time.Duration
}

// CloseWhenIdle lets the stream time of an aggregation over time windows that emits on
// window close move on with the wall clock once its task is caught up with its input and
// no record has reached the aggregation for d: from the largest timestamp it has seen, by
// the wall-clock time since that record came. The last windows of a burst then close, and
// their final results come out, without a new record. It is off by default (Kafka Streams
// has no such setting: its windows close only when records move stream time on) and is a
// deviation from Kafka Streams (docs/semantics.md): results then depend on when records
// arrive, and a record that comes after a quiet period may be late for the time the
// aggregation moved on to (counted and logged as late, see docs/windows.md). Session
// windows do not take it (a Build error).
func CloseWhenIdle(d time.Duration) CloseOption {
	return func(o *closeOptions) { o.idle = d }
}

// EmitBeforeExpiry makes an aggregation that emits on window close emit the final result
// of every window that closes, also of one whose retention in the store passes at the same
// time. When a record moves stream time past the close of windows and past their retention
// at once (a jump over several windows, as after a quiet period), the windows are emitted,
// in window order, before the store expires them.
//
// Without it, as in Kafka Streams, such windows expire without a final result (counted in
// [Stats].LostResults and kstream_operator_lost_results_total, and logged at warn). The
// results that both emit are the same, in the same order; EmitBeforeExpiry adds the ones
// Kafka Streams loses, in their place. It is a deviation from Kafka Streams
// (docs/semantics.md).
func EmitBeforeExpiry() CloseOption {
	return func(o *closeOptions) { o.beforeExpiry = true }
}

// WindowedCount counts the records of each key and window into the window store named
// name. Records with a null key are skipped and counted in [Stats].DroppedRecords; so are
// late records, for each window they arrive too late for. Over time windows, unlike
// [Count], a record with a null value is counted, as Kafka Streams' windowed count does;
// over sliding windows it is dropped, as Java's sliding aggregation drops it.
func WindowedCount[K, V any](w TimeWindowedKStream[K, V], name string, opts ...StoreOption) KTable[serde.Windowed[K], int64] {
	return windowedAggregate(w, "KSTREAM-AGGREGATE", "WindowedCount", func() int64 { return 0 },
		func(_ K, _ V, n int64, _ bool) int64 { return n + 1 }, false, serde.Int64(), name, opts)
}

// WindowedReduce combines the values of each key and window with fn (a window's first value
// is stored as it is) into the window store named name, with the stream's value serde.
func WindowedReduce[K, V any](w TimeWindowedKStream[K, V], fn func(acc, v V) V, name string, opts ...StoreOption) KTable[serde.Windowed[K], V] {
	return windowedAggregate(w, "KSTREAM-REDUCE", "WindowedReduce", nil, func(_ K, v V, acc V, had bool) V {
		if !had {
			return v
		}
		return fn(acc, v)
	}, true, w.g.s.vs, name, opts)
}

// WindowedAggregate folds the values of each key and window into an aggregate of type VA,
// starting from init() for each new window, and keeps it in the window store named name
// (values serialized with vs).
//
// As in Kafka Streams (KStreamWindowAggregate): each record updates every window that
// contains its timestamp and has not closed; each update carries the window's largest
// timestamp so far and the record's headers; the table's keys are [serde.Windowed] with
// [serde.TimeWindowed] as their serde (window size: the windows' size, or the sliding
// windows' time difference), so that its topics can be read by Java's
// TimeWindowedDeserializer. The store is a timestamped window store kept for the window
// size plus the grace period unless [WithRetention] says more, logged to
// "<application.id>-<name>-changelog" (compact,delete, retained one day longer than the
// store), in Java's format.
func WindowedAggregate[K, V, VA any](w TimeWindowedKStream[K, V], init func() VA, agg func(key K, value V, acc VA) VA, vs serde.Serde[VA], name string, opts ...StoreOption) KTable[serde.Windowed[K], VA] {
	return windowedAggregate(w, "KSTREAM-AGGREGATE", "WindowedAggregate", init,
		func(k K, v V, acc VA, _ bool) VA { return agg(k, v, acc) }, false, vs, name, opts)
}

// windowAgg is what a windowed aggregation processor needs of its definition.
type windowAgg[K, V, VA any] struct {
	w       windowSpec
	onClose bool
	// beforeExpiry is EmitBeforeExpiry: closed windows are emitted even when they expired
	// from the store with the record that closed them.
	beforeExpiry bool
	// idle is CloseWhenIdle's quiet time, zero if not set.
	idle   time.Duration
	init   func() VA // nil for a reduce
	agg    func(K, V, VA, bool) VA
	reduce bool
	ks     serde.Serde[K]
	store  string
	info   *tableInfo
	def    *storeDef // the store, for its record cache (recordcache.go)
}

func windowedAggregate[K, V, VA any](w TimeWindowedKStream[K, V], prefix, opName string, init func() VA, agg func(K, V, VA, bool) VA, reduce bool, vs serde.Serde[VA], name string, opts []StoreOption) KTable[serde.Windowed[K], VA] {
	b := w.g.s.b
	s := w.g.s
	op := fmt.Sprintf("%s %q", opName, name)
	nodeName := b.aggName(prefix, opts)
	if w.w.err != nil {
		b.errorf("%s: %w", op, w.w.err)
	}
	if s.keyChanged {
		repName := w.g.name
		if repName == "" {
			repName = name
		}
		s = repartitionForKey(s, repName, false, op)
	}
	if s.ks == nil {
		b.errorf("%s: the stream carries no key serde for the store; use WithSerdes: %w", op, ErrNoSerde)
	}
	if vs == nil {
		b.errorf("%s: no value serde for the store: %w", op, ErrNoSerde)
	}
	// Java: the retention defaults to size + grace (sliding: 2 * time difference + grace)
	// and may not be shorter.
	minRetention := w.w.size + w.w.grace
	if w.w.kind == slidingWindowKind {
		minRetention = 2*w.w.size + w.w.grace
	}
	d := windowStoreDef(b, op, name, s.ks, vs, w.w.size, minRetention, w.w.grace, w.onClose, opts)
	d.window = w.w.def()
	n := b.tableNode(nodeName, s.n)
	n.windowGrace, n.hasWindowGrace = w.w.grace, true // for KTable.Suppress(UntilWindowCloses)
	b.addStore(d, n)
	info := storedInfo()
	a := &windowAgg[K, V, VA]{w: w.w, onClose: w.onClose, beforeExpiry: w.close.beforeExpiry, idle: w.close.idle, init: init, agg: agg, reduce: reduce, ks: storeKeySerde(d, s.ks), store: name, info: info, def: d}
	n.instantiate = func(t *task) (any, error) {
		st, err := taskWindowStore[K, VA](t, name)
		if err != nil {
			return nil, err
		}
		if a.w.kind == slidingWindowKind {
			return newSlidingAggregator(t, n, a, st)
		}
		return newTimeWindowAggregator(t, n, a, st)
	}
	return KTable[serde.Windowed[K], VA]{b: b, n: n, ks: serde.TimeWindowed(s.ks, time.Duration(w.w.size)*time.Millisecond), vs: vs,
		store: name, info: info, getter: windowGetter[K, VA](name), getterStores: []*storeDef{d}}
}

// windowKV is the typed store of a windowed aggregation: a timestamped window store.
type windowKV[K, V any] = store.WindowStore[K, tsValue[V]]

// windowStoreDef declares the timestamped window store of a windowed aggregation, whose
// windows have the given size and must be kept at least minRetention.
//
// An aggregation that emits on window close reads its store as Kafka Streams' time-ordered
// window store does, with windows at the retention edge (store.WindowOptions).
func windowStoreDef[K, V any](b *Builder, op, name string, ks serde.Serde[K], vs serde.Serde[V], size, minRetention, grace int64, onClose bool, opts []StoreOption) *storeDef {
	d := &storeDef{name: name, persistent: true, logged: true, timestamped: true, accepts: []string{"Named", "WithRetention"}}
	applyStoreOpts(d, opts)
	ks, vs = storeSerde(d, ks, true), storeSerde(d, vs, false)
	d.key, d.value = ks, vs
	retention := minRetention
	if d.retentionSet {
		ms, err := millis("the retention period", d.retention)
		if err != nil {
			b.errorf("%s: %w", op, err)
		}
		retention = ms
		if retention < minRetention {
			b.errorf("%s: the retention period of the window store %s must be no smaller than its window size plus the grace period (%dms + %dms), got %dms",
				op, name, minRetention-grace, grace, retention)
		}
	}
	o := store.WindowOptions{
		Retention:  time.Duration(max(retention, minRetention)) * time.Millisecond,
		WindowSize: time.Duration(size) * time.Millisecond,

		ReadsAtRetentionEdge: onClose,
	}
	codec, err := store.NewWindowChangelog(o)
	if err != nil {
		b.errorf("%s: %w", op, err)
	}
	d.codec = codec
	d.query = newQueryCodec(WindowKind, ks, vs, true)
	d.typed = func(bk store.Backend) any {
		ws, err := store.NewWindowStore(name, bk, ks, tsSerde[V]{vs}, o)
		if err != nil {
			return err
		}
		return ws
	}
	return d
}

// taskWindowStore returns task t's instance of the window store named name.
func taskWindowStore[K, V any](t *task, name string) (*windowKV[K, V], error) {
	switch s := t.stores[name].(type) {
	case *windowKV[K, V]:
		return s, nil
	case error:
		return nil, fmt.Errorf("kstream: task %s: window store %q: %w", t.id, name, s)
	default:
		return nil, fmt.Errorf("kstream: internal error: task %s has no window store %q of these types (it has a %T)", t.id, name, t.stores[name])
	}
}

// windowGetter is the value getter of a windowed table kept in the window store named
// name: Kafka Streams' KStreamWindowAggregateValueGetter.
func windowGetter[K, V any](name string) func(t *task) (valueGetter[serde.Windowed[K], V], error) {
	return func(t *task) (valueGetter[serde.Windowed[K], V], error) {
		st, err := taskWindowStore[K, V](t, name)
		if err != nil {
			return nil, err
		}
		return func(k serde.Windowed[K]) (V, int64, bool, error) {
			tv, ok, err := st.Fetch(k.Key, k.Start)
			return tv.v, tv.ts, ok, err
		}, nil
	}
}

// lateRecord notes that operator n dropped the record in hand, of timestamp ts, for the
// window [start, end) because the window had closed (end before closeTime, the operator's
// stream time observed minus the grace period): counted (Stats.DroppedRecords, as Kafka
// Streams' dropped-records metric, and by operator) and logged (see lossLog), as Kafka
// Streams' logSkippedRecordForExpiredWindow.
func (t *task) lateRecord(n *node, ts, start, end, closeTime, observed int64) {
	t.dropLate(n, late{reason: dropExpiredWindow, ts: ts, streamTime: observed, lateBy: closeTime - end, hasWindow: true, start: start, end: end})
}

// timeWindowAggregator is the processor of an aggregation over time windows: Kafka
// Streams' KStreamWindowAggregate.
type timeWindowAggregator[K, V, VA any] struct {
	a  *windowAgg[K, V, VA]
	t  *task
	n  *node
	st *windowKV[K, VA]
	windowClock
	// ctx is the processor context, kept for emissions without a record in hand (align.go).
	ctx ProcessorContext[serde.Windowed[K], change[VA]]
	// lastWall is when the last record came (wall clock) and lastObserved the stream time
	// it left, lastMove when the stream time last moved on by idleness (CloseWhenIdle).
	lastWall, lastMove time.Time
	lastObserved       int64
	// kapp is the key serde when it appends to a buffer, kbuf that buffer (appendSerialize).
	kapp store.AppendSerializer[K]
	kbuf []byte
	// cache is the store's record cache, nil without one (or when emitting on close);
	// ckey the buffer of its keys: the serialized key, then the window start.
	cache *emitCache[serde.Windowed[K], VA]
	ckey  []byte
}

func newTimeWindowAggregator[K, V, VA any](t *task, n *node, a *windowAgg[K, V, VA], st *windowKV[K, VA]) (any, error) {
	p := &timeWindowAggregator[K, V, VA]{a: a, t: t, n: n, st: st, windowClock: newWindowClock()}
	p.kapp, _ = a.ks.(store.AppendSerializer[K])
	if !a.onClose && a.def != nil {
		p.cache = openEmitCache[serde.Windowed[K], VA](t, a.def)
	}
	p.rewinds = true
	if err := p.recover(); err != nil {
		return nil, err
	}
	p.start(t, p.st, a.onClose)
	if a.onClose && a.idle > 0 {
		t.flushers = append(t.flushers, idleCloser[K, V, VA]{p})
	}
	if a.onClose {
		t.onAlignedAdvance(func() error {
			if p.ctx == nil {
				return nil // no record yet: no window either
			}
			closeTime := p.now() - a.w.grace
			finals, due, err := p.closed(closeTime)
			if err != nil || !due {
				return err
			}
			return p.emitFinal(p.ctx, Record[K, V]{}, closeTime, finals)
		})
	}
	return processorInstance(t, n, ProcessorFunc[K, V, serde.Windowed[K], change[VA]](p.process))
}

// recover sets the observed stream time and the last emitted close time from the store,
// for a task that starts with state (restored, or kept on disk).
//
// The observed stream time is the largest timestamp of the windows that start at the
// store's latest window start: the windows of the latest record. Kafka Streams starts
// again from no stream time instead, accepting as on time any record until one moves it.
//
// Kafka Streams keeps the last emitted close time in its committed offsets' metadata.
// Here, under at-least-once, it is kept in the store's metadata, written to disk with each
// commit; under exactly-once, where the store holds exactly the committed state (also when
// restored from the changelog alone), it is derived from the observed stream time: final
// results are emitted after every record, so they were emitted up to its close time. Under
// at-least-once, a store restored from its changelog alone has no metadata: every closed
// window it holds is emitted again, duplicates rather than a loss.
func (p *timeWindowAggregator[K, V, VA]) recover() error {
	latest, ok, err := p.st.ObservedStreamTime()
	if err != nil || !ok {
		return err
	}
	p.observed = latest.UnixMilli()
	it, err := p.st.FetchAll(latest, latest)
	if err != nil {
		return err
	}
	for it.Next() {
		p.observed = max(p.observed, it.Value().ts)
	}
	if err := it.Err(); err != nil {
		it.Close()
		return err
	}
	it.Close()
	if err := p.recoverCommitted(p.st, p.t.h.eos); err != nil {
		return err
	}
	if !p.a.onClose {
		return nil
	}
	closeTime := p.observed - p.a.w.grace
	return p.recoverLastEmit(p.st, p.t.h.eos && !p.t.aligned(), closeTime, closeTime-p.a.w.size >= 0)
}

// windowClock is the time of a windowed aggregation: the largest timestamp it has seen
// (ms), -1 before the first record, and the close time up to which it emitted final
// results, -1 if none. The saved copies are their values at the last commit: the clock is
// a txnHook, so that it goes back with the store when a transaction aborts.
type windowClock struct {
	observed, lastEmit           int64
	savedObserved, savedLastEmit int64
	// loggedEmit and loggedObserved are the last values of lastEmit and of the committed
	// stream time written to the store's metadata under at-least-once (see flush), -1 if
	// none.
	loggedEmit, loggedObserved int64
	// t is the task, whose aligned event time caps observed when Config.EventTimeAlignment
	// is set (align.go); st the store whose metadata keeps the clock; onClose whether the
	// aggregation emits on close (and keeps lastEmit).
	t       *task
	st      metaStore
	onClose bool
	// rewinds is set for an aggregation that goes back to its committed stream time after a
	// crash under at-least-once (recoverCommitted); storeAhead is then the stream time of
	// its store at the start, if later (-1 if not): until the aggregation gets there, a
	// window the store has expired is not one it may write (see expiredInStore).
	rewinds    bool
	storeAhead int64
}

func newWindowClock() windowClock {
	return windowClock{observed: -1, lastEmit: -1, loggedEmit: -1, loggedObserved: -1, storeAhead: -1}
}

// start saves the clock's recovered time and registers it with the task's commits; st is
// the aggregation's store, onClose whether it emits on close.
func (c *windowClock) start(t *task, st metaStore, onClose bool) {
	c.t, c.st, c.onClose = t, st, onClose
	if t.align != nil {
		t.align.restored = max(t.align.restored, c.observed) // what the stores had seen
	}
	c.committed()
	t.txnHooks = append(t.txnHooks, c)
	if !t.h.eos {
		t.flushers = append(t.flushers, c)
	}
}

// now is the time by which the operator judges lateness and closes windows: its observed
// stream time, or the task's aligned event time if smaller (align.go).
func (c *windowClock) now() int64 {
	if c.t == nil {
		return c.observed
	}
	return c.t.eventTime(c.observed)
}

func (c *windowClock) committed() { c.savedObserved, c.savedLastEmit = c.observed, c.lastEmit }

func (c *windowClock) cut() func() {
	observed, lastEmit := c.observed, c.lastEmit
	return func() { c.savedObserved, c.savedLastEmit = observed, lastEmit }
}

func (c *windowClock) aborted() { c.observed, c.lastEmit = c.savedObserved, c.savedLastEmit }

// flush implements flusher under at-least-once: at each commit, before the stores are
// logged, it writes down the clock as of the previous commit, which acknowledged what it
// covers: the stream time (committedStreamTimeMeta, see recoverCommitted), and, for an
// aggregation that emits on close, the close time up to which final results were emitted
// (logged: see emitted).
func (c *windowClock) flush(context.Context) error {
	if c.rewinds && c.savedObserved > c.loggedObserved {
		if err := c.st.SetMeta(committedStreamTimeMeta, c.savedObserved); err != nil {
			return err
		}
		if err := c.st.SetLoggedMeta(committedStreamTimeMeta, c.savedObserved); err != nil {
			return err
		}
		c.loggedObserved = c.savedObserved
	}
	if c.onClose && c.savedLastEmit > c.loggedEmit {
		if err := c.st.SetLoggedMeta(lastEmitMeta, c.savedLastEmit); err != nil {
			return err
		}
		c.loggedEmit = c.savedLastEmit
	}
	return nil
}

// committedStreamTimeMeta names the store metadata holding the stream time of an
// aggregation at a commit, under at-least-once.
const committedStreamTimeMeta = "committed-stream-time"

// recoverCommitted, under at-least-once (eos false), takes the recovered stream time back
// to the one written down at a commit (see flush), if the store's is later. After a crash,
// the store may hold updates made after the last commit (a buffer written out early, or a
// changelog logged by a commit whose offsets were not committed), and its stream time with
// them: judged by it, the records replayed from the committed offsets would be late, dropped,
// and never reach what is below (a suppression buffer restored without those updates would
// emit a window's final result below its count). Judged by the committed stream time, they
// are on time again, as when they were first processed: aggregated a second time, which
// at-least-once allows, and forwarded.
func (c *windowClock) recoverCommitted(st metaStore, eos bool) error {
	if eos || c.observed < 0 || !c.rewinds {
		return nil
	}
	storeTime := c.observed
	local, okLocal, err := st.Meta(committedStreamTimeMeta)
	if err != nil {
		return err
	}
	logged, okLogged, err := st.LoggedMeta(committedStreamTimeMeta)
	if err != nil {
		return err
	}
	switch {
	case okLocal && okLogged:
		c.observed = min(c.observed, max(local, logged))
	case okLocal:
		c.observed = min(c.observed, local)
	case okLogged:
		c.observed = min(c.observed, logged)
	}
	if c.observed < storeTime {
		c.storeAhead = storeTime
	}
	return nil
}

// liveStore is a window store's retention check (store.WindowStore.Live).
type liveStore interface {
	Live(windowStart time.Time) (bool, error)
}

// expiredInStore reports whether the window starting at start has expired in st while the
// aggregation's stream time is behind its store's after a rewind (recoverCommitted): a
// record for it is late, as the store would drop its write and has lost the window's
// value (aggregating it anew would forward a value below the window's).
func (c *windowClock) expiredInStore(st liveStore, start int64) (bool, error) {
	if c.storeAhead < 0 {
		return false, nil
	}
	if c.observed >= c.storeAhead {
		c.storeAhead = -1 // caught up with the store: its retention never drops a window on time
		return false, nil
	}
	live, err := st.Live(msTime(start))
	return !live, err
}

// due implements flusher: the close time is logged at commits only.
func (c *windowClock) due() time.Time { return time.Time{} }

// metaStore is a window or session store's operator metadata (store.WindowStore.Meta and
// LoggedMeta).
type metaStore interface {
	Meta(name string) (int64, bool, error)
	SetMeta(name string, v int64) error
	LoggedMeta(name string) (int64, bool, error)
	SetLoggedMeta(name string, v int64) error
}

// lastEmitMeta names the store metadata holding the close time up to which an aggregation
// emitted its final results.
const lastEmitMeta = "last-emit-close-time"

// recoverLastEmit sets the last emitted close time of an aggregation that emits on close,
// for a task that starts with state: the latest of what the store's metadata keeps (kept on
// disk with each commit) and of what its changelog restored (logged metadata, see
// emitted), and, under exactly-once without alignment (eos), derived from the recovered
// stream time (derived; none unless derivedOK), since final results are then emitted after
// every record. With none of them (a store restored from a changelog written before the
// close time was logged), every closed window still in the store is emitted again:
// duplicates rather than a loss.
func (c *windowClock) recoverLastEmit(st metaStore, eos bool, derived int64, derivedOK bool) error {
	local, okLocal, err := st.Meta(lastEmitMeta)
	if err != nil {
		return err
	}
	logged, okLogged, err := st.LoggedMeta(lastEmitMeta)
	if err != nil {
		return err
	}
	if okLocal {
		c.lastEmit = max(c.lastEmit, local)
	}
	if okLogged {
		c.lastEmit = max(c.lastEmit, logged)
		c.loggedEmit = logged
	}
	if eos && derivedOK {
		c.lastEmit = max(c.lastEmit, derived)
	}
	return nil
}

// emitted notes that final results were emitted up to closeTime, in the clock and in the
// store's metadata. The close time reaches the changelog too (logged metadata), so that a
// task restored from its changelog alone (on another instance) does not emit them again:
// under exactly-once now, in the transaction that holds the final results; under
// at-least-once at the commit after the one that acknowledged them (flush), so that a
// crash between the two never loses a final result, at the cost of emitting again those of
// one commit interval.
func (c *windowClock) emitted(st metaStore, closeTime int64) error {
	c.lastEmit = closeTime
	if err := st.SetMeta(lastEmitMeta, closeTime); err != nil {
		return err
	}
	if c.t != nil && c.t.h.eos {
		c.loggedEmit = closeTime
		return st.SetLoggedMeta(lastEmitMeta, closeTime)
	}
	return nil
}

func (p *timeWindowAggregator[K, V, VA]) process(ctx ProcessorContext[serde.Windowed[K], change[VA]], r Record[K, V]) error {
	a, t := p.a, p.t
	if r.HasNullKey() {
		t.dropRecord(p.n, "key")
		return nil
	}
	// The key is serialized once, for the check and for every window's fetch and write
	// (into a buffer of the processor: the store copies what it keeps).
	kb, err := appendSerialize(p.kapp, a.ks, &p.kbuf, r.Key)
	if err != nil {
		return fmt.Errorf("serializing the key: %w", err)
	} else if kb == nil {
		t.dropRecord(p.n, "key")
		return nil
	}
	ts := unixMs(r.Timestamp)
	p.observed = max(p.observed, ts)
	p.ctx = ctx
	if a.idle > 0 {
		p.lastWall, p.lastObserved = t.env.Now(), p.observed
	}
	closeTime := p.now() - a.w.grace
	// The windows that close are read before the record's writes, which may move the
	// store's stream time past their retention (see emitFinal).
	var finals []windowFinal[K, VA]
	var due bool
	if a.onClose {
		var err error
		if finals, due, err = p.closed(closeTime); err != nil {
			return err
		}
	}
	// The windows of a.w.windowsFor(ts), without the slice.
	for start := max(0, ts-a.w.size+a.w.advance) / a.w.advance * a.w.advance; start <= ts; start += a.w.advance {
		end := a.w.windowEnd(start)
		if end <= closeTime {
			t.lateRecord(p.n, ts, start, end, closeTime, p.observed)
			continue
		}
		if expired, err := p.expiredInStore(p.st, start); err != nil {
			return err
		} else if expired {
			t.lateRecord(p.n, ts, start, end, closeTime, p.observed)
			continue
		}
		old, ok, err := p.st.FetchSerialized(kb, msTime(start))
		if err != nil {
			return err
		}
		acc, newTs, oldOK := old.v, ts, ok
		if ok {
			newTs = max(ts, old.ts)
		} else if a.init != nil {
			acc, oldOK = a.init(), true
		}
		var res change[VA]
		if a.reduce && !ok && nullValue(r) {
			// Java's reduce stores the first value as it is: a null is no window.
		} else {
			res.setNew(a.agg(r.Key, r.Value, acc, ok))
		}
		if res.hasNew {
			err = p.st.PutSerialized(kb, tsValue[VA]{v: res.new, ts: newTs}, msTime(start))
		} else {
			err = p.st.DeleteSerialized(kb, msTime(start))
		}
		if err != nil {
			return err
		}
		if a.onClose {
			continue
		}
		if p.cache != nil {
			// Held back (recordcache.go): the old value is the window's last forwarded
			// one, none for a new window, as Java's caching window store reads it.
			if a.info.sendOld && ok {
				res.setOld(acc)
			}
			putTs := newTs
			if !res.hasNew {
				putTs = ts
			}
			p.ckey = binary.BigEndian.AppendUint64(append(p.ckey[:0], kb...), uint64(start))
			p.cache.put(ctx, p.ckey, serde.WindowedMs(r.Key, start, end), res, ok, putTs, r.Headers)
			continue
		}
		if a.info.sendOld && oldOK {
			res.setOld(acc)
		}
		ctx.Forward(Record[serde.Windowed[K], change[VA]]{Key: serde.WindowedMs(r.Key, start, end), Value: res,
			Timestamp: msTime(newTs), Headers: r.Headers})
	}
	if a.onClose && due {
		return p.emitFinal(ctx, r, closeTime, finals)
	}
	return nil
}

// idleCloser is the flusher of an aggregation with CloseWhenIdle: when its task is caught
// up and no record came for the quiet time, it moves the stream time on with the wall
// clock and emits the windows that close, checking again every idleTick.
type idleCloser[K, V, VA any] struct {
	p *timeWindowAggregator[K, V, VA]
}

// idleTick is how often an idle aggregation's stream time moves on after its quiet time.
const idleTick = time.Second

func (c idleCloser[K, V, VA]) due() time.Time {
	p := c.p
	if p.lastWall.IsZero() {
		return time.Time{}
	}
	at := p.lastWall.Add(p.a.idle)
	if next := p.lastMove.Add(min(p.a.idle, idleTick)); next.After(at) {
		at = next
	}
	return at
}

func (c idleCloser[K, V, VA]) flush(context.Context) error {
	p, t := c.p, c.p.t
	now := t.env.Now()
	if p.lastWall.IsZero() || p.ctx == nil || now.Sub(p.lastWall) < p.a.idle {
		return nil
	}
	p.lastMove = now
	if !t.env.CaughtUp(t.id) {
		return nil
	}
	moved := p.lastObserved + now.Sub(p.lastWall).Milliseconds()
	if moved <= p.observed {
		return nil
	}
	p.observed = moved
	closeTime := p.now() - p.a.w.grace
	finals, due, err := p.closed(closeTime)
	if err != nil || !due {
		return err
	}
	t.punctuating, t.hasTS, t.curTS = true, true, max(p.now(), 0)
	defer func() { t.punctuating, t.hasTS = false, false }()
	t.idleEmitted = true
	return p.emitFinal(p.ctx, Record[K, V]{}, closeTime, finals)
}

// windowFinal is a closed window read from the store: its key and value.
type windowFinal[K, VA any] struct {
	k serde.Windowed[K]
	v tsValue[VA]
}

// closed returns the windows that closed since the last emission (close time closeTime),
// as Kafka Streams' AbstractKStreamTimeWindowAggregateProcessor.maybeForwardFinalResult
// reads them (without its wall-clock throttle, so that the results do not depend on the
// wall clock), in the order of window start then key; due says that emitFinal must run
// (new windows may have closed). They are read before the record in hand is aggregated:
// its writes may move the store's stream time past the retention of some of them, which
// emitFinal then emits (EmitBeforeExpiry) or counts as lost (Kafka Streams' behaviour).
func (p *timeWindowAggregator[K, V, VA]) closed(closeTime int64) ([]windowFinal[K, VA], bool, error) {
	w := p.a.w
	if p.lastEmit != -1 && p.lastEmit >= closeTime {
		return nil, false, nil
	}
	upper := closeTime - w.size
	if upper < 0 {
		return nil, false, nil
	}
	lower := int64(0)
	if p.lastEmit != -1 {
		lower = max(0, p.lastEmit-w.size) + 1
		// No window ends in (lastEmit, closeTime]: nothing new to emit.
		if slices.Equal(w.windowsFor(upper), w.windowsFor(lower-1)) {
			return nil, false, nil
		}
	}
	if lower > upper {
		return nil, true, nil
	}
	it, err := p.st.FetchAll(msTime(lower), msTime(upper))
	if err != nil {
		return nil, false, err
	}
	var finals []windowFinal[K, VA]
	for it.Next() {
		finals = append(finals, windowFinal[K, VA]{it.Key(), it.Value()})
	}
	err = it.Err()
	it.Close()
	if err != nil {
		return nil, false, err
	}
	// Kafka Streams keeps the store of an aggregation that emits on close in time order
	// (RocksDbIndexedTimeOrderedWindowBytesStoreSupplier): by window start, then key.
	// This store is in key order within a segment.
	slices.SortStableFunc(finals, func(a, b windowFinal[K, VA]) int { return a.k.Start.Compare(b.k.Start) })
	return finals, true, nil
}

// emitFinal forwards the closed windows that closed() read, with the headers of the record
// in hand, and notes the emission. A window that expired from the store meanwhile (the
// record's writes moved its stream time past the window's retention) is emitted under
// EmitBeforeExpiry; otherwise, as in Kafka Streams, it is not, and it is counted and logged
// as a lost final result.
func (p *timeWindowAggregator[K, V, VA]) emitFinal(ctx ProcessorContext[serde.Windowed[K], change[VA]], r Record[K, V], closeTime int64, finals []windowFinal[K, VA]) error {
	w := p.a.w
	for _, f := range finals {
		start := f.k.StartMs()
		if !p.a.beforeExpiry {
			live, err := p.st.Live(f.k.Start)
			if err != nil {
				return err
			}
			if !live {
				p.t.loseResult(p.n, late{reason: lostWindowExpired, ts: f.v.ts, streamTime: p.observed,
					lateBy: closeTime - w.windowEnd(start), hasWindow: true, start: start, end: w.windowEnd(start), store: p.a.store})
				continue
			}
		}
		var res change[VA]
		res.setNew(f.v.v)
		ctx.Forward(Record[serde.Windowed[K], change[VA]]{Key: serde.WindowedMs(f.k.Key, start, w.windowEnd(start)),
			Value: res, Timestamp: msTime(f.v.ts), Headers: r.Headers})
	}
	return p.emitted(p.st, closeTime)
}
