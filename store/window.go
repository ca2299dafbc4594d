package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/kstream-go/kstream/serde"
)

// WindowOptions configures a window store. Durations are whole milliseconds (a fraction of
// one rounds up).
type WindowOptions struct {
	// Retention is how long, in stream time, a window is kept after its start: the store
	// drops a window that starts at or before observed stream time minus Retention (Kafka
	// Streams' retentionPeriod). It must not be negative; 0 keeps only the windows that
	// start at the observed stream time.
	Retention time.Duration
	// WindowSize is the size of the store's windows. It only sets the End of the
	// [serde.Windowed] keys that scans return (Start + WindowSize, as Kafka Streams'
	// TimeWindow); it must not be negative nor exceed Retention.
	WindowSize time.Duration
	// SegmentInterval is the time span of a segment, the unit in which expired windows are
	// dropped; 0 means Kafka Streams' default max(Retention/2, 1 minute).
	SegmentInterval time.Duration
	// RetainDuplicates keeps every value put for the same key and window start, each with
	// its own sequence number (the store of a stream-stream join, Kafka Streams'
	// retainDuplicates), instead of the last.
	RetainDuplicates bool
	// ReadsAtRetentionEdge makes reads return a window that starts exactly at observed
	// stream time minus Retention, as Kafka Streams' time-ordered window store does (the
	// store of an aggregation that emits on window close), whose final results include the
	// window that the closing record moves to that edge. Writes are dropped as without it.
	ReadsAtRetentionEdge bool
}

func (o WindowOptions) check() (retention, interval, size int64, err error) {
	retention, interval, err = checkRetention(o.Retention, o.SegmentInterval)
	if err != nil {
		return 0, 0, 0, err
	}
	if o.WindowSize < 0 {
		return 0, 0, 0, fmt.Errorf("negative window size %s", o.WindowSize)
	}
	size = durationMs(o.WindowSize)
	if size > retention {
		return 0, 0, 0, fmt.Errorf("the window size %s is larger than the retention %s", o.WindowSize, o.Retention)
	}
	return retention, interval, size, nil
}

// Window store schema keys (Kafka Streams' WindowKeySchema): key, start, sequence number.
const (
	windowSeqLen    = 4
	windowSuffixLen = 8 + windowSeqLen
)

// appendWindowKey appends the schema key of (key, start, seq).
func appendWindowKey(dst, key []byte, start int64, seq int32) []byte {
	dst = append(dst, key...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(start))
	return binary.BigEndian.AppendUint32(dst, uint32(seq))
}

func windowSeq(sk []byte) int32 { return int32(binary.BigEndian.Uint32(sk[len(sk)-windowSeqLen:])) }

func newWindowSegmented(name string, b Backend, retention, interval int64) segmented {
	return segmented{name: name, b: b, retention: retention, interval: interval,
		suffixLen: windowSuffixLen, timeAt: windowSuffixLen}
}

// NewWindowChangelog returns the changelog codec of window stores with options o: changelog
// keys are Kafka Streams' WindowKeySchema keys ([serialized key][8-byte big-endian window
// start][4-byte big-endian sequence number]) and values the values the store keeps, as
// Kafka Streams' ChangeLoggingWindowBytesStore writes them.
func NewWindowChangelog(o WindowOptions) (ChangelogCodec, error) {
	retention, interval, _, err := o.check()
	if err != nil {
		return nil, fmt.Errorf("store: window changelog: %w", err)
	}
	return windowCodec{retention: retention, interval: interval, o: o}, nil
}

type windowCodec struct {
	retention, interval int64
	o                   WindowOptions
}

// WindowOptions returns the options the codec was made with, so that a reader of the
// store (the test driver) can open a typed view of it.
func (c windowCodec) WindowOptions() WindowOptions { return c.o }

func (windowCodec) ChangelogKey(k []byte) ([]byte, bool) { return changelogKey(k) }

func (c windowCodec) TopicConfigs() map[string]*string {
	return WindowedChangelogConfigs(time.Duration(c.retention)*time.Millisecond, DefaultWindowedChangelogAdditionalRetention)
}

// WithExtraRetention implements [RetentionExtender]: the codec of the same store with extra
// more retention (its restorer keeps windows that much longer; its topic's retention.ms
// grows as much).
func (c windowCodec) WithExtraRetention(extra time.Duration) any {
	c.retention += extra.Milliseconds()
	c.o.Retention = time.Duration(c.retention) * time.Millisecond
	c.o.SegmentInterval = time.Duration(c.interval) * time.Millisecond // unchanged on disk
	return c
}

func (c windowCodec) NewRestorer(b Backend) (Restorer, error) {
	st, err := readState(b)
	if err != nil {
		return nil, fmt.Errorf("store: window changelog: reading the stream time: %w", err)
	}
	return &windowRestorer{s: newWindowSegmented("(restoring)", b, c.retention, c.interval), st: st}, nil
}

type windowRestorer struct {
	s  segmented
	st segState
}

func (r *windowRestorer) Restore(bt Batch, key, value []byte) error {
	return r.s.restore(&r.st, bt, key, value, func(sk []byte) (int32, bool) {
		n := windowSeq(sk)
		return n, seqAfter(n, r.st.seq)
	})
}

// seqAfter reports whether sequence number a comes after b, the numbers wrapping around at
// 2^31 (serial number arithmetic, RFC 1982): a restorer keeps the latest number it sees,
// whatever the order of the records (a buffered store logs its keys in key order), so that
// the store goes on with numbers it has not used lately. Kafka Streams starts again from 0.
func seqAfter(a, b int32) bool {
	d := (a - b) & math.MaxInt32
	return d != 0 && d < 1<<30
}

// WindowStore is a typed window store over a [Backend], with Kafka Streams' WindowStore
// semantics: each entry is a key, a window start and a value; entries are kept for the
// retention period in stream time. See the package's segmented-store layout (segmented.go)
// for the key layout and [NewWindowChangelog] for the changelog format.
//
// The observed stream time is the largest window start put so far. A put whose window has
// expired (its segment is before the segment of observed stream time minus retention) is
// dropped, as Kafka Streams drops it ("Skipping record for expired segment"; counted by
// [WindowStore.DroppedExpired]); reads never return a window that starts at or before
// observed stream time minus retention; whole expired segments leave the backend with one
// range deletion when stream time moves past them.
//
// Scans of one key return its windows by start time (then sequence number); scans of
// several keys return them by segment, then by serialized key, then by start, as Kafka
// Streams' RocksDB window store does. Time bounds are inclusive, as Kafka Streams' are.
// Negative window starts are rejected.
//
// The stream time and sequence number live in the backend, written with the data, so that a
// new WindowStore over the same backend (a restarted task) goes on where the last one
// stopped, and a Buffer's Discard takes them back. The store caches them, which assumes that
// the backend is written through it only (restoring happens before it is created). It is
// used from one goroutine at a time (its task's).
type WindowStore[K, V any] struct {
	s       segmented
	ks      serde.Serde[K]
	vs      serde.Serde[V]
	size    int64
	dups    bool
	expired int64
	// edge is 0 for ReadsAtRetentionEdge, else 1: reads return windows from observed stream
	// time minus retention plus edge.
	edge  int64
	fetch windowFetch[V] // AppendFetchRange's
	// view is the backend when it can return values without copying them (a Buffer):
	// fetches deserialize at once, and a serde keeps no reference to its input.
	view viewGetter
	// app is vs when it appends its bytes to a buffer: puts serialize into vbuf, which
	// the backend copies.
	app  AppendSerializer[V]
	vbuf []byte
	// kapp is ks when it appends its bytes to a buffer: the reads and writes that use a
	// key only during the call serialize it into kbuf (see tmpKey).
	kapp AppendSerializer[K]
	kbuf []byte
}

// NewWindowStore returns a typed window store over b. name appears in errors. It fails only
// for invalid options.
func NewWindowStore[K, V any](name string, b Backend, ks serde.Serde[K], vs serde.Serde[V], o WindowOptions) (*WindowStore[K, V], error) {
	retention, interval, size, err := o.check()
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", name, err)
	}
	edge := int64(1)
	if o.ReadsAtRetentionEdge {
		edge = 0
	}
	if buf, ok := unwrap(b).(*Buffer); ok && o.RetainDuplicates {
		// Every put of a store that retains duplicates is a new key, which no Get reads
		// again (scans do not use the read cache): caching the flushed entries would only
		// cost their copies and the heap.
		buf.WithReadCache(0)
	}
	w := &WindowStore[K, V]{s: newWindowSegmented(name, b, retention, interval), ks: ks, vs: vs, size: size, dups: o.RetainDuplicates, edge: edge}
	// A store that keeps one value per window fetches single windows, mostly new ones (an
	// aggregation's first record of a window): its Buffer records each new segment's keys
	// so that those fetches do not read the engine. A store retaining duplicates writes a
	// new key per put and reads by range scans, which the record would not serve.
	w.s.freshOn, w.s.freshSeg = !o.RetainDuplicates, -1
	w.view, _ = b.(viewGetter)
	w.app, _ = vs.(AppendSerializer[V])
	w.kapp, _ = ks.(AppendSerializer[K])
	return w, nil
}

// Name returns the store's name.
func (w *WindowStore[K, V]) Name() string { return w.s.name }

// WithExtraRetention implements [RetentionExtender]: it lengthens w's retention by extra
// (windows are kept and read that much longer) and returns w. Call it before the first
// read or write.
func (w *WindowStore[K, V]) WithExtraRetention(extra time.Duration) any {
	w.s.retention += extra.Milliseconds()
	return w
}

// Retention returns the retention period.
func (w *WindowStore[K, V]) Retention() time.Duration {
	return time.Duration(w.s.retention) * time.Millisecond
}

// SegmentInterval returns the segment interval.
func (w *WindowStore[K, V]) SegmentInterval() time.Duration {
	return time.Duration(w.s.interval) * time.Millisecond
}

// ObservedStreamTime returns the largest window start put so far; ok is false before the
// first put.
func (w *WindowStore[K, V]) ObservedStreamTime() (t time.Time, ok bool, err error) {
	st, err := w.s.state()
	if err != nil || st.streamTime == NoTimestamp {
		return time.Time{}, false, err
	}
	return time.UnixMilli(st.streamTime), true, nil
}

// DroppedExpired returns the number of values this value of the store dropped because their
// window had expired (deletions of expired windows are not counted).
func (w *WindowStore[K, V]) DroppedExpired() int64 { return w.expired }

// Live reports whether reads at the current observed stream time return a window that
// starts at windowStart: whether it has not expired. A caller that read windows before
// writes that may advance the stream time learns with it which of them expired meanwhile.
func (w *WindowStore[K, V]) Live(windowStart time.Time) (bool, error) {
	st, err := w.s.state()
	if err != nil {
		return false, err
	}
	ts := ms(windowStart)
	return ts >= 0 && ts >= w.minLive(st.streamTime), nil
}

func (w *WindowStore[K, V]) key(k K) ([]byte, error) {
	b, err := w.ks.Serialize(k)
	if err != nil {
		return nil, w.s.errorf("serializing key: %w", err)
	}
	if b == nil {
		return nil, w.s.errorf("a null key")
	}
	return b, nil
}

// tmpKey is key, serialized into the store's buffer when the key serde appends (no
// allocation): for a read or write that is done with the bytes when it returns (a backend
// copies what it keeps), never for an iterator, which keeps them. Valid until the next call.
func (w *WindowStore[K, V]) tmpKey(k K) ([]byte, error) {
	if w.kapp == nil {
		return w.key(k)
	}
	out, isNull, err := w.kapp.AppendSerialize(w.kbuf[:0], k)
	if err != nil {
		return nil, w.s.errorf("serializing key: %w", err)
	}
	if isNull {
		return nil, w.s.errorf("a null key")
	}
	w.kbuf = out
	if out == nil {
		out = []byte{} // an empty key, not a null
	}
	return out, nil
}

// Put writes v for key k in the window starting at windowStart, advancing the observed
// stream time to windowStart if it is later. A value that serializes to nil (a nil pointer
// of a [serde.Nullable] serde) deletes the window, as Kafka Streams' put(key, null) does;
// with RetainDuplicates it does nothing. Without RetainDuplicates a put replaces the
// window's value.
func (w *WindowStore[K, V]) Put(k K, v V, windowStart time.Time) error {
	kb, err := w.tmpKey(k)
	if err != nil {
		return err
	}
	return w.putValue(kb, v, ms(windowStart))
}

// PutSerialized is [WindowStore.Put] to the key whose serialized form is kb: a caller that
// already serialized the key (to check it, or to fetch the window and then write it) saves
// doing it again. kb must not be nil (a null key); the store copies it.
func (w *WindowStore[K, V]) PutSerialized(kb []byte, v V, windowStart time.Time) error {
	if kb == nil {
		return w.s.errorf("a null key")
	}
	return w.putValue(kb, v, ms(windowStart))
}

// putValue serializes v (into the store's buffer when the serde appends) and puts it.
func (w *WindowStore[K, V]) putValue(kb []byte, v V, ts int64) error {
	var vb []byte
	if w.app != nil {
		out, isNull, err := w.app.AppendSerialize(w.vbuf[:0], v)
		if err != nil {
			return w.s.errorf("serializing value: %w", err)
		}
		if !isNull {
			w.vbuf = out
			if vb = out; vb == nil {
				vb = []byte{} // an empty value, not a null
			}
		}
	} else {
		var err error
		if vb, err = w.vs.Serialize(v); err != nil {
			return w.s.errorf("serializing value: %w", err)
		}
	}
	if vb == nil && w.dups {
		return nil
	}
	return w.put(kb, vb, ts)
}

// put writes vb (a deletion if nil) for key kb at window start ts.
func (w *WindowStore[K, V]) put(kb, vb []byte, ts int64) error {
	if ts < 0 {
		return w.s.errorf("negative window start %d", ts)
	}
	st, err := w.s.state()
	if err != nil {
		return err
	}
	var seq int32
	if w.dups {
		st.seq = (st.seq + 1) & math.MaxInt32 // Kafka Streams' seqnum: never negative
		seq = st.seq
	}
	if vb != nil {
		w.s.notePut(kb, ts)
		if seg := segmentID(ts, w.s.interval); w.s.freshOn && seg > w.s.freshSeg {
			if err := w.s.trackFresh(seg); err != nil {
				return err
			}
		}
	}
	dk := appendWindowKey(w.s.dataKeyBuf(segmentID(ts, w.s.interval), len(kb)+windowSuffixLen), kb, ts, seq)
	kept, err := w.s.write(w.s.b, &st, dk, ts, vb, w.dups)
	w.s.remember(st, err)
	if err != nil {
		return w.s.errorf("put: %w", err)
	}
	if !kept && vb != nil {
		w.expired++
	}
	return nil
}

// Delete removes the window of key k starting at windowStart. Like a put, it advances the
// observed stream time (and is logged, as Kafka Streams' put(key, null) is). With
// RetainDuplicates, where Kafka Streams has no deletion, it removes every value of the
// window, one changelog tombstone each, and leaves the stream time alone.
func (w *WindowStore[K, V]) Delete(k K, windowStart time.Time) error {
	kb, err := w.tmpKey(k)
	if err != nil {
		return err
	}
	return w.delete(kb, ms(windowStart))
}

// DeleteSerialized is [WindowStore.Delete] of the key whose serialized form is kb (see
// [WindowStore.PutSerialized]).
func (w *WindowStore[K, V]) DeleteSerialized(kb []byte, windowStart time.Time) error {
	if kb == nil {
		return w.s.errorf("a null key")
	}
	return w.delete(kb, ms(windowStart))
}

func (w *WindowStore[K, V]) delete(kb []byte, ts int64) error {
	if !w.dups {
		return w.put(kb, nil, ts)
	}
	if ts < 0 {
		return w.s.errorf("negative window start %d", ts)
	}
	it := w.rangeScan(kb, ts, ts, false)
	var doomed [][]byte
	for it.Next() {
		doomed = append(doomed, bytes.Clone(it.key))
	}
	if err := errors.Join(it.Err(), it.Close()); err != nil {
		return err
	}
	for _, sk := range doomed {
		if err := w.s.b.Delete(dataKey(segmentID(ts, w.s.interval), sk)); err != nil {
			return w.s.errorf("delete: %w", err)
		}
	}
	return nil
}

// Fetch returns the value of key k in the window starting at windowStart; ok is false if
// there is none or it has expired. With RetainDuplicates it returns the value with the
// lowest sequence number (FetchRange returns them all).
func (w *WindowStore[K, V]) Fetch(k K, windowStart time.Time) (v V, ok bool, err error) {
	kb, err := w.tmpKey(k)
	if err != nil {
		return v, false, err
	}
	return w.fetchOne(kb, ms(windowStart))
}

// FetchSerialized is [WindowStore.Fetch] of the key whose serialized form is kb (see
// [WindowStore.PutSerialized]).
func (w *WindowStore[K, V]) FetchSerialized(kb []byte, windowStart time.Time) (v V, ok bool, err error) {
	if kb == nil {
		return v, false, w.s.errorf("a null key")
	}
	return w.fetchOne(kb, ms(windowStart))
}

func (w *WindowStore[K, V]) fetchOne(kb []byte, ts int64) (v V, ok bool, err error) {
	var vb []byte
	if w.dups {
		it := w.rangeScan(kb, ts, ts, false)
		if it.Next() {
			vb, ok = bytes.Clone(it.val), true
		}
		if err := errors.Join(it.Err(), it.Close()); err != nil {
			return v, false, err
		}
	} else {
		st, err := w.s.state()
		if err != nil {
			return v, false, err
		}
		if ts < 0 || ts < w.minLive(st.streamTime) {
			return v, false, nil
		}
		dk := appendWindowKey(w.s.dataKeyBuf(segmentID(ts, w.s.interval), len(kb)+windowSuffixLen), kb, ts, 0)
		buf, err := w.s.pendingOnly(ts)
		if err != nil {
			return v, false, err
		}
		// The value is read without a copy where the backend allows it: it is
		// deserialized at once.
		switch {
		case buf != nil:
			vb, ok = pendingView(buf, dk)
		case w.view != nil:
			vb, ok, err = w.view.getView(dk)
		default:
			vb, ok, err = w.s.b.Get(dk)
		}
		if err != nil {
			return v, false, w.s.errorf("fetch: %w", err)
		}
	}
	if !ok {
		return v, false, nil
	}
	v, err = w.vs.Deserialize(vb)
	if err != nil {
		return v, false, w.s.errorf("deserializing value: %w", err)
	}
	return v, true, nil
}

// minLive is the earliest window start reads return at stream time st.
func (w *WindowStore[K, V]) minLive(st int64) int64 {
	return satAdd(satSub(st, w.s.retention), w.edge)
}

// timeBounds returns the live part of [from, to] at the current stream time: the window
// starts a read may return. ok is false if it is empty.
func (w *WindowStore[K, V]) timeBounds(from, to int64) (lo, hi int64, ok bool, err error) {
	st, err := w.s.state()
	if err != nil {
		return 0, 0, false, err
	}
	lo = max(from, w.minLive(st.streamTime), 0)
	hi = min(to, st.streamTime) // no window starts after the observed stream time
	return lo, hi, lo <= hi, nil
}

// rangeScan scans the windows of serialized key kb starting in [from, to].
func (w *WindowStore[K, V]) rangeScan(kb []byte, from, to int64, reverse bool) *segScan {
	lo, hi, ok, err := w.timeBounds(from, to)
	if err != nil {
		return &segScan{done: true, err: err}
	}
	if !ok {
		return emptyScan()
	}
	iv := w.s.interval
	span := func(seg int64) (segSpan, bool) {
		a, b := max(lo, segmentStart(seg, iv)), min(hi, segmentEnd(seg, iv)-1)
		from := dataKey(seg, appendWindowKey(nil, kb, a, 0))
		to := append(dataKey(seg, appendWindowKey(nil, kb, b, -1)), 0x00) // seq 0xffffffff, then any byte
		return segSpan{from, to}, true
	}
	n := len(kb) + windowSuffixLen
	accept := func(sk []byte) bool {
		if len(sk) != n || !bytes.Equal(sk[:len(kb)], kb) {
			return false
		}
		t := w.s.segTime(sk)
		return t >= lo && t <= hi
	}
	sc := w.s.scan(segmentID(lo, iv), segmentID(hi, iv), reverse, span, accept)
	if sc.s != nil {
		// The key's windows from lo on may all be pending writes, read without the
		// storage engine.
		pend, none, err := w.s.recentOnly(kb, lo)
		switch {
		case err != nil:
			return &segScan{done: true, err: err}
		case none:
			return emptyScan()
		}
		sc.pend = pend
	}
	return sc
}

// keyRangeScan scans the windows of serialized keys in [kFrom, kTo] starting in [from, to].
func (w *WindowStore[K, V]) keyRangeScan(kFrom, kTo []byte, from, to int64, reverse bool) *segScan {
	if bytes.Compare(kFrom, kTo) > 0 {
		return emptyScan() // as Kafka Streams, which logs a warning
	}
	lo, hi, ok, err := w.timeBounds(from, to)
	if err != nil {
		return &segScan{done: true, err: err}
	}
	if !ok {
		return emptyScan()
	}
	upper := keyUpperBound(kTo, appendWindowKey(nil, nil, hi, -1))
	span := func(seg int64) (segSpan, bool) {
		return segSpan{dataKey(seg, kFrom), dataKey(seg, upper)}, true
	}
	accept := func(sk []byte) bool {
		t := w.s.segTime(sk)
		return t >= lo && t <= hi && w.s.inKeyRange(sk, kFrom, kTo)
	}
	return w.s.scan(segmentID(lo, w.s.interval), segmentID(hi, w.s.interval), reverse, span, accept)
}

// allScan scans the windows of every key starting in [from, to].
func (w *WindowStore[K, V]) allScan(from, to int64, reverse bool) *segScan {
	lo, hi, ok, err := w.timeBounds(from, to)
	if err != nil {
		return &segScan{done: true, err: err}
	}
	if !ok {
		return emptyScan()
	}
	accept := func(sk []byte) bool {
		t := w.s.segTime(sk)
		return t >= lo && t <= hi
	}
	return w.s.wholeScan(segmentID(lo, w.s.interval), segmentID(hi, w.s.interval), reverse, accept)
}

// FetchRange iterates over the windows of key k that start in [from, to], by start time
// (Kafka Streams' fetch(key, timeFrom, timeTo)).
func (w *WindowStore[K, V]) FetchRange(k K, from, to time.Time) (*WindowedIterator[K, V], error) {
	return w.fetchRange(k, from, to, false)
}

// WindowValue is a value of a window store with the start of its window, in Unix
// milliseconds: what [WindowStore.AppendFetchRange] returns.
type WindowValue[V any] struct {
	Start int64
	Value V
}

// AppendFetchRange appends to dst the values of key k whose windows start in [from, to],
// by start time (then sequence number), and returns the extended slice: FetchRange read at
// once, without an iterator, for a caller that takes every value (a stream-stream join
// fetches the other side's windows this way for each record).
func (w *WindowStore[K, V]) AppendFetchRange(dst []WindowValue[V], k K, from, to time.Time) ([]WindowValue[V], error) {
	kb, err := w.tmpKey(k)
	if err != nil {
		return dst, err
	}
	return w.appendFetchRange(dst, kb, from, to)
}

// AppendFetchRangeSerialized is [WindowStore.AppendFetchRange] of the key whose serialized
// form is kb (see [WindowStore.PutSerialized]).
func (w *WindowStore[K, V]) AppendFetchRangeSerialized(dst []WindowValue[V], kb []byte, from, to time.Time) ([]WindowValue[V], error) {
	if kb == nil {
		return dst, w.s.errorf("a null key")
	}
	return w.appendFetchRange(dst, kb, from, to)
}

func (w *WindowStore[K, V]) appendFetchRange(dst []WindowValue[V], kb []byte, from, to time.Time) ([]WindowValue[V], error) {
	lo, hi, ok, err := w.timeBounds(ms(from), ms(to))
	if err != nil || !ok {
		return dst, err
	}
	pend, none, err := w.s.recentOnly(kb, lo)
	if err != nil || none {
		return dst, err
	}
	f := &w.fetch
	if f.pendFn == nil {
		f.pendFn = func(k string, v []byte) bool { return f.add(unsafeBytes(k), v) }
	}
	f.s, f.vs, f.kb, f.lo, f.hi, f.dst, f.err = &w.s, w.vs, kb, lo, hi, dst, nil
	defer func() { f.kb, f.dst = nil, nil }()
	iv := w.s.interval
	for seg := segmentID(lo, iv); seg <= segmentID(hi, iv); seg++ {
		a, b := max(lo, segmentStart(seg, iv)), min(hi, segmentEnd(seg, iv)-1)
		w.s.spanFrom = appendWindowKey(appendSegPrefix(w.s.spanFrom[:0], seg), kb, a, 0)
		w.s.spanTo = append(appendWindowKey(appendSegPrefix(w.s.spanTo[:0], seg), kb, b, -1), 0x00)
		if pend != nil {
			pend.ascendPending(w.s.spanFrom, w.s.spanTo, f.pendFn)
			if f.err != nil {
				return f.dst, f.err
			}
			continue
		}
		it, err := w.s.b.Range(w.s.spanFrom, w.s.spanTo)
		if err != nil {
			return f.dst, w.s.errorf("%w", err)
		}
		for it.Next() && f.add(it.Key(), it.Value()) {
		}
		if err := errors.Join(it.Err(), it.Close()); err != nil {
			return f.dst, w.s.errorf("%w", err)
		}
		if f.err != nil {
			return f.dst, f.err
		}
	}
	return f.dst, nil
}

// windowFetch is the state of an AppendFetchRange, kept in its store so that a fetch
// allocates nothing but the values it returns.
type windowFetch[V any] struct {
	s      *segmented
	vs     serde.Serde[V]
	kb     []byte // the serialized key
	lo, hi int64  // the window starts fetched
	dst    []WindowValue[V]
	err    error
	pendFn func(k string, v []byte) bool // add of a Buffer's pending entry
}

// add appends the value of data key dk to f.dst if it is one of the fetched windows; it
// returns false on a deserialization error (in f.err).
func (f *windowFetch[V]) add(dk, vb []byte) bool {
	sk, ok := schemaKeyOf(dk)
	if !ok || len(sk) != len(f.kb)+windowSuffixLen || !bytes.Equal(sk[:len(f.kb)], f.kb) {
		return true
	}
	t := f.s.segTime(sk)
	if t < f.lo || t > f.hi {
		return true
	}
	v, err := f.vs.Deserialize(vb)
	if err != nil {
		f.err = f.s.errorf("deserializing value: %w", err)
		return false
	}
	f.dst = append(f.dst, WindowValue[V]{Start: t, Value: v})
	return true
}

// BackwardFetchRange is FetchRange in descending order of start time.
func (w *WindowStore[K, V]) BackwardFetchRange(k K, from, to time.Time) (*WindowedIterator[K, V], error) {
	return w.fetchRange(k, from, to, true)
}

func (w *WindowStore[K, V]) fetchRange(k K, from, to time.Time, reverse bool) (*WindowedIterator[K, V], error) {
	kb, err := w.key(k)
	if err != nil {
		return nil, err
	}
	return w.iter(w.rangeScan(kb, ms(from), ms(to), reverse), func([]byte) (K, error) { return k, nil })
}

// FetchKeyRange iterates over the windows of the keys whose serialized form is in [kFrom,
// kTo] that start in [from, to] (Kafka Streams' fetch(keyFrom, keyTo, timeFrom, timeTo)).
func (w *WindowStore[K, V]) FetchKeyRange(kFrom, kTo K, from, to time.Time) (*WindowedIterator[K, V], error) {
	return w.fetchKeyRange(kFrom, kTo, from, to, false)
}

// BackwardFetchKeyRange is FetchKeyRange in the opposite order.
func (w *WindowStore[K, V]) BackwardFetchKeyRange(kFrom, kTo K, from, to time.Time) (*WindowedIterator[K, V], error) {
	return w.fetchKeyRange(kFrom, kTo, from, to, true)
}

func (w *WindowStore[K, V]) fetchKeyRange(kFrom, kTo K, from, to time.Time, reverse bool) (*WindowedIterator[K, V], error) {
	fb, err := w.key(kFrom)
	if err != nil {
		return nil, err
	}
	tb, err := w.key(kTo)
	if err != nil {
		return nil, err
	}
	return w.iter(w.keyRangeScan(fb, tb, ms(from), ms(to), reverse), w.decodeKey)
}

// FetchAll iterates over the windows of every key that start in [from, to] (Kafka Streams'
// fetchAll(timeFrom, timeTo)).
func (w *WindowStore[K, V]) FetchAll(from, to time.Time) (*WindowedIterator[K, V], error) {
	return w.iter(w.allScan(ms(from), ms(to), false), w.decodeKey)
}

// BackwardFetchAll is FetchAll in the opposite order.
func (w *WindowStore[K, V]) BackwardFetchAll(from, to time.Time) (*WindowedIterator[K, V], error) {
	return w.iter(w.allScan(ms(from), ms(to), true), w.decodeKey)
}

// All iterates over every live window.
func (w *WindowStore[K, V]) All() (*WindowedIterator[K, V], error) {
	return w.iter(w.allScan(0, math.MaxInt64, false), w.decodeKey)
}

// BackwardAll is All in the opposite order.
func (w *WindowStore[K, V]) BackwardAll() (*WindowedIterator[K, V], error) {
	return w.iter(w.allScan(0, math.MaxInt64, true), w.decodeKey)
}

func (w *WindowStore[K, V]) decodeKey(kb []byte) (K, error) { return w.ks.Deserialize(kb) }

func (w *WindowStore[K, V]) iter(sc *segScan, key func([]byte) (K, error)) (*WindowedIterator[K, V], error) {
	if sc.err != nil {
		return nil, sc.err
	}
	size := w.size
	return &WindowedIterator[K, V]{s: &w.s, sc: sc, vs: w.vs, key: key, window: func(sk []byte) (int64, int64) {
		start := w.s.segTime(sk)
		return start, serde.TimeWindowEnd(start, time.Duration(size)*time.Millisecond)
	}}, nil
}

// WindowedIterator walks the entries of a window or session store: each a [serde.Windowed]
// key and a value. Call Next before Key and Value, and Close when done; a decoding or
// storage error ends the iteration and is returned by Err.
type WindowedIterator[K, V any] struct {
	s      *segmented
	sc     *segScan
	vs     serde.Serde[V]
	key    func(kb []byte) (K, error)
	window func(sk []byte) (start, end int64)
	k      serde.Windowed[K]
	v      V
	err    error
}

// Next advances to the next entry; it returns false at the end or on an error.
func (i *WindowedIterator[K, V]) Next() bool {
	if i.err != nil || !i.sc.Next() {
		return false
	}
	sk := i.sc.key
	k, err := i.key(i.s.keyOf(sk))
	if err != nil {
		i.err = i.s.errorf("deserializing key: %w", err)
		return false
	}
	v, err := i.vs.Deserialize(i.sc.val)
	if err != nil {
		i.err = i.s.errorf("deserializing value: %w", err)
		return false
	}
	start, end := i.window(sk)
	i.k, i.v = serde.WindowedMs(k, start, end), v
	return true
}

// Key returns the current key and its window.
func (i *WindowedIterator[K, V]) Key() serde.Windowed[K] { return i.k }

// Value returns the current value.
func (i *WindowedIterator[K, V]) Value() V { return i.v }

// Err returns the error that ended the iteration, if any.
func (i *WindowedIterator[K, V]) Err() error { return errors.Join(i.err, i.sc.Err()) }

// Close releases the iterator.
func (i *WindowedIterator[K, V]) Close() error { return i.sc.Close() }

// Meta returns the operator metadata value named name, written with [WindowStore.SetMeta];
// ok is false if there is none. Operator metadata is kept with the store's data, written
// to disk with it at each commit, but never logged: a store restored from its changelog
// alone has none (see [WindowStore.LoggedMeta] for metadata that is logged). An operator keeps there what Kafka Streams keeps in the metadata of its
// committed offsets (the close time up to which a windowed aggregation emitted its final
// results).
func (w *WindowStore[K, V]) Meta(name string) (v int64, ok bool, err error) {
	return w.s.meta(segOpMetaPrefix, name)
}

// SetMeta writes the operator metadata value named name (see [WindowStore.Meta]).
func (w *WindowStore[K, V]) SetMeta(name string, v int64) error {
	return w.s.setMeta(segOpMetaPrefix, name, v)
}

// LoggedMeta returns the logged operator metadata value named name, written with
// [WindowStore.SetLoggedMeta]; ok is false if there is none. Unlike [WindowStore.Meta], it
// is logged with the store's writes (under a changelog key no window has) and restored
// from the changelog: under exactly-once it is part of the transaction that emits what it
// describes.
func (w *WindowStore[K, V]) LoggedMeta(name string) (v int64, ok bool, err error) {
	return w.s.meta(segLoggedMetaPrefix, name)
}

// SetLoggedMeta writes the logged operator metadata value named name (see
// [WindowStore.LoggedMeta]).
func (w *WindowStore[K, V]) SetLoggedMeta(name string, v int64) error {
	return w.s.setMeta(segLoggedMetaPrefix, name, v)
}
