package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Segmented stores: the window and session stores keep their entries in time segments, as
// Kafka Streams' RocksDB segmented stores do, so that expired data leaves with one range
// deletion per expiry instead of a scan.
//
// # Layout
//
// A window or session store is one [Backend] namespace with this key layout:
//
//	0x00 0x01                                   -> state: observed stream time (int64 BE,
//	                                               Unix ms, -1 before the first write) and
//	                                               the last sequence number (int32 BE)
//	0x01 <segment id uint64 BE> <schema key>    -> value
//
// The schema key is Kafka Streams' changelog key, byte for byte:
//
//	window store  (WindowKeySchema):  <serialized key> <window start int64 BE> <seqnum int32 BE>
//	session store (SessionKeySchema): <serialized key> <session end int64 BE> <session start int64 BE>
//
// and the segment id is the segment timestamp (window start; session end) divided by the
// segment interval. Within a segment the entries are therefore ordered by serialized key,
// then by time, so that the windows of one key over a time range are one range scan per
// segment, [key start, key end] within the segment, as in RocksDB. Scans of several keys
// (or of all) read the segments in time order and, within each, the keys in byte order;
// like Kafka Streams, they filter out the entries of other keys whose serialized key has the
// scanned key as a prefix.
//
// Expired segments (below the segment of observed stream time minus retention) are removed
// with one [Backend.DeleteRange] of every data key below the first live segment. The state
// key is store metadata: it is not part of the changelog ([ChangelogCodec.ChangelogKey]
// reports it as not logged), and restoring rebuilds it from the records.
//
// Timestamps are Unix milliseconds and must not be negative (Kafka Streams' windows never
// start before 0).

// Key prefixes of a segmented store.
const (
	segMetaPrefix byte = 0x00
	segDataPrefix byte = 0x01
	// segPrefixLen is the length of a data key's prefix: segDataPrefix and the segment id.
	segPrefixLen = 1 + 8
	// segStateLen is the length of the state value.
	segStateLen = 8 + 4
)

var (
	segStateKey  = []byte{segMetaPrefix, 0x01}
	segDataStart = []byte{segDataPrefix}
	segDataEnd   = []byte{segDataPrefix + 1}
)

// NoTimestamp is the observed stream time of a segmented store that has seen no record
// (Kafka's RecordBatch.NO_TIMESTAMP).
const NoTimestamp int64 = -1

// DefaultWindowedChangelogAdditionalRetention is added to a window or session store's
// retention to make the retention.ms of its changelog topic: Kafka Streams'
// windowstore.changelog.additional.retention.ms default, one day.
const DefaultWindowedChangelogAdditionalRetention = 24 * time.Hour

// minSegmentInterval is the smallest default segment interval: Kafka Streams' segment
// interval is max(retention/2, 60 s).
const minSegmentInterval = 60_000

// WindowedChangelogConfigs returns the configuration of the changelog topic of a window or
// session store that keeps data for retention, as Kafka Streams creates it
// (WindowedChangelogTopicConfig): cleanup.policy=compact,delete, so that records of expired
// windows leave the topic too, and retention.ms = retention + additional (Kafka Streams'
// windowstore.changelog.additional.retention.ms, [DefaultWindowedChangelogAdditionalRetention]
// by default). The map is in the form topic creation takes (kadm.CreateTopic,
// runtime.InternalTopic.Configs).
func WindowedChangelogConfigs(retention, additional time.Duration) map[string]*string {
	// Two Durations in milliseconds cannot overflow an int64, as Java's sum can.
	ms := retention.Milliseconds() + additional.Milliseconds()
	policy, ret := "compact,delete", strconv.FormatInt(ms, 10)
	return map[string]*string{"cleanup.policy": &policy, "retention.ms": &ret}
}

// ChangelogCodec relates the backend keys of a store whose layout is not its changelog's (a
// window or session store) to the records of its changelog, so that the changelog has
// Kafka Streams' format and can be shared with (or migrated from) a Java application.
//
// The runtime logging a store's writes passes each written backend key through
// ChangelogKey; the value (and, for a timestamped store, the record timestamp) is produced
// as for a key-value store. Restoring passes each changelog record, with its value as the
// store keeps it, to a [Restorer]. Range deletions (expired segments) are never logged: the
// changelog topic's cleanup.policy=compact,delete and retention.ms (TopicConfigs) expire
// its records.
//
// Kafka Streams logs a write even when it drops it for an expired segment; kstream stores
// and logs nothing then. Restoring skips such records in both, so the restored stores agree.
type ChangelogCodec interface {
	// ChangelogKey returns the changelog key of a write of backend key k (a slice of k,
	// valid as long as k is); logged is false for store metadata, which is not logged.
	ChangelogKey(k []byte) (key []byte, logged bool)
	// NewRestorer returns a Restorer that applies changelog records to the store partition
	// whose backend is b, continuing from the state b holds (its observed stream time).
	NewRestorer(b Backend) (Restorer, error)
	// TopicConfigs is the configuration of the changelog topic ([WindowedChangelogConfigs]
	// with the default additional retention).
	TopicConfigs() map[string]*string
}

// Restorer applies changelog records to a store partition. It is used by one goroutine and
// keeps state between records (the observed stream time), so one Restorer must see the
// records of a restoration in offset order, and the batches it added to must commit in
// that order.
type Restorer interface {
	// Restore adds to bt the writes applying one changelog record: its key and its value as
	// the store keeps it (nil for a tombstone). A record of a segment that has expired
	// (with respect to the stream time of the records restored so far) is skipped, as
	// Kafka Streams skips it. It fails only for a malformed key.
	Restore(bt Batch, key, value []byte) error
}

// segmented is the time-segmented layout over a backend shared by window and session
// stores. The observed stream time lives in the backend (the state key), written with the
// data, so that it survives restarts and a Buffer's Discard (an aborted transaction) takes
// it back with the data. A typed store caches it (as Kafka Streams keeps it in memory),
// which assumes that the backend is written through the store only; the cache is dropped
// when a Buffer discards.
type segmented struct {
	name      string
	b         Backend
	retention int64 // ms
	interval  int64 // ms, > 0
	suffixLen int   // length of the schema key's suffix after the serialized key
	timeAt    int   // offset from the end of a schema key of its segment timestamp

	cache    segState // the state as of the last read or write, if cached
	cached   bool
	cacheGen uint64 // the backend's discard count when cache was taken
	stateBuf [segStateLen]byte
	// flushedST is the stream time of the data under a Buffer backend as of its flush
	// number flushedGen (valid if flushedOK): see pendingOnly.
	flushedST  int64
	flushedGen uint64
	flushedOK  bool
	scratch    []byte // a data key being built
	// fidx bounds the timestamps of each key's flushed entries (window stores over a
	// Buffer): see recentOnly.
	fidx flushIndex
	// spanFrom and spanTo hold the bounds of a span being read (AppendFetchRange).
	spanFrom, spanTo []byte
	// freshOn makes puts record each new segment in the Buffer under b (see trackFresh);
	// freshSeg is the last segment tried.
	freshOn  bool
	freshSeg int64
	// buf and disc are the Buffer and the discard counter under b, if any, once resolved
	// (see resolve).
	buf      *Buffer
	disc     discardCounter
	resolved bool
}

// segState is the persisted state of a segmented store.
type segState struct {
	streamTime int64 // observed stream time: the largest segment timestamp written
	seq        int32 // the last sequence number used (window stores retaining duplicates)
}

// appendTo appends the encoded state to dst.
func (st segState) appendTo(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(st.streamTime))
	return binary.BigEndian.AppendUint32(dst, uint32(st.seq))
}

func decodeSegState(v []byte) (segState, error) {
	if len(v) != segStateLen {
		return segState{}, fmt.Errorf("malformed state %x", v)
	}
	return segState{streamTime: int64(binary.BigEndian.Uint64(v)), seq: int32(binary.BigEndian.Uint32(v[8:]))}, nil
}

// readState reads the state of the store over b.
func readState(b interface {
	Get(key []byte) ([]byte, bool, error)
}) (segState, error) {
	v, ok, err := b.Get(segStateKey)
	if err != nil {
		return segState{}, err
	}
	if !ok {
		return segState{streamTime: NoTimestamp}, nil
	}
	return decodeSegState(v)
}

// getterFunc is a function as readState's getter.
type getterFunc func(key []byte) ([]byte, bool, error)

// Get calls f.
func (f getterFunc) Get(key []byte) ([]byte, bool, error) { return f(key) }

func (s *segmented) errorf(format string, args ...any) error {
	return fmt.Errorf("store %s: "+format, append([]any{s.name}, args...)...)
}

// resolve finds, once, what is under the store's backend: the Buffer and the discard
// counter, if any (the backend never changes).
func (s *segmented) resolve() {
	if s.resolved {
		return
	}
	u := unwrap(s.b)
	s.buf, _ = u.(*Buffer)
	if s.buf != nil {
		s.buf.cacheWritesByReads()
	}
	s.disc, _ = u.(discardCounter)
	s.resolved = true
}

// buffer returns the Buffer under the store's backend, or nil.
func (s *segmented) buffer() *Buffer {
	s.resolve()
	return s.buf
}

// discardGen returns the backend's discard count (0 for a backend that cannot discard).
func (s *segmented) discardGen() uint64 {
	s.resolve()
	if s.disc != nil {
		return s.disc.discardCount()
	}
	return 0
}

// state returns the store's state, from the cache if it is valid.
func (s *segmented) state() (segState, error) {
	gen := s.discardGen()
	if s.cached && s.cacheGen == gen {
		return s.cache, nil
	}
	st, err := readState(s.b)
	if err != nil {
		s.cached = false
		return st, s.errorf("reading the stream time: %w", err)
	}
	s.cache, s.cached, s.cacheGen = st, true, gen
	return st, nil
}

// remember caches st as the state after a successful write (err nil), or drops the cache.
func (s *segmented) remember(st segState, err error) {
	if err != nil {
		s.cached = false
		return
	}
	s.cache = st
}

// dataKeyBuf starts a data key of segment seg in the scratch buffer, with room for a
// schema key of n bytes: append it to the result (which then stays in the scratch buffer,
// without an allocation). It is valid until the next call.
func (s *segmented) dataKeyBuf(seg int64, n int) []byte {
	if need := segPrefixLen + n; cap(s.scratch) < need {
		s.scratch = make([]byte, 0, max(need, 2*cap(s.scratch)))
	}
	s.scratch = appendSegPrefix(s.scratch[:0], seg)
	return s.scratch
}

// segmentID is Kafka Streams' segment id of a timestamp (AbstractSegments.segmentId):
// timestamp / interval, truncated toward zero as Java's division is.
func segmentID(ts, interval int64) int64 { return ts / interval }

// minLiveSegment is the first segment that is live at stream time st: Kafka Streams'
// segmentId(streamTime - retentionPeriod). Writes to earlier segments are dropped.
func minLiveSegment(st, retention, interval int64) int64 {
	return segmentID(satSub(st, retention), interval)
}

// minLiveTime is the earliest timestamp reads return at stream time st: Kafka Streams'
// observedStreamTime - retentionPeriod + 1.
func minLiveTime(st, retention int64) int64 { return satAdd(satSub(st, retention), 1) }

func satAdd(a, b int64) int64 {
	c := a + b
	switch {
	case b > 0 && c < a:
		return math.MaxInt64
	case b < 0 && c > a:
		return math.MinInt64
	}
	return c
}

func satSub(a, b int64) int64 {
	if b == math.MinInt64 {
		return satAdd(satAdd(a, math.MaxInt64), 1)
	}
	return satAdd(a, -b)
}

// segmentStart and segmentEnd bound the timestamps of segment seg: [start, end).
func segmentStart(seg, interval int64) int64 {
	if seg > math.MaxInt64/interval {
		return math.MaxInt64
	}
	return seg * interval
}

func segmentEnd(seg, interval int64) int64 { return segmentStart(satAdd(seg, 1), interval) }

// appendSegPrefix appends the data key prefix of segment seg.
func appendSegPrefix(dst []byte, seg int64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, segDataPrefix), uint64(seg))
}

// dataKey returns the backend key of schema key sk in segment seg.
func dataKey(seg int64, sk []byte) []byte {
	return append(appendSegPrefix(make([]byte, 0, segPrefixLen+len(sk)), seg), sk...)
}

// schemaKeyOf returns the schema key of data key k, or false for a key that is not data.
func schemaKeyOf(k []byte) ([]byte, bool) {
	if len(k) < segPrefixLen || k[0] != segDataPrefix {
		return nil, false
	}
	return k[segPrefixLen:], true
}

// changelogKey implements ChangelogCodec.ChangelogKey for every segmented store: data keys
// are logged as their schema keys, logged operator metadata (see [WindowStore.SetLoggedMeta])
// under metaChangelogKey, the rest of the metadata not at all.
func changelogKey(k []byte) ([]byte, bool) {
	if name, ok := bytes.CutPrefix(k, segLoggedMetaPrefix); ok {
		return metaChangelogKey(name), true
	}
	return schemaKeyOf(k)
}

// metaChangelogTag starts the changelog key of logged operator metadata, and
// metaChangelogEnd ends it: 16 bytes of 0xff, whose last 8 or 16 bytes read as a window's
// or a session's timestamps are negative, so that no data key has this form (no store
// writes a window before 0) and a restorer that does not know it skips it as such a window.
var (
	metaChangelogTag = []byte("\x00kstream-meta\x00")
	metaChangelogEnd = bytes.Repeat([]byte{0xff}, 16)
)

// metaChangelogKey is the changelog key of the logged operator metadata named name.
func metaChangelogKey(name []byte) []byte {
	k := make([]byte, 0, len(metaChangelogTag)+len(name)+len(metaChangelogEnd))
	return append(append(append(k, metaChangelogTag...), name...), metaChangelogEnd...)
}

// metaOfChangelogKey returns the name of the logged operator metadata whose changelog key
// is key, or false for a key of data.
func metaOfChangelogKey(key []byte) ([]byte, bool) {
	rest, ok := bytes.CutPrefix(key, metaChangelogTag)
	if !ok {
		return nil, false
	}
	return bytes.CutSuffix(rest, metaChangelogEnd)
}

// segTime returns the segment timestamp of schema key sk.
func (s *segmented) segTime(sk []byte) int64 {
	return int64(binary.BigEndian.Uint64(sk[len(sk)-s.timeAt:]))
}

// writer is what a segmented store writes through: its backend, or a batch when restoring.
type writer interface {
	Set(key, value []byte) error
	Delete(key []byte) error
	DeleteRange(from, to []byte) error
}

type batchWriter struct{ bt Batch }

func (w batchWriter) Set(k, v []byte) error             { w.bt.Set(k, v); return nil }
func (w batchWriter) Delete(k []byte) error             { w.bt.Delete(k); return nil }
func (w batchWriter) DeleteRange(from, to []byte) error { w.bt.DeleteRange(from, to); return nil }

// observe advances the stream time of st to ts, if later, and removes through w the
// segments that expire with it; it reports whether st changed (and must be written).
func (s *segmented) observe(w writer, st *segState, ts int64) (bool, error) {
	if ts <= st.streamTime {
		return false, nil
	}
	oldMin := minLiveSegment(st.streamTime, s.retention, s.interval)
	st.streamTime = ts
	if newMin := minLiveSegment(ts, s.retention, s.interval); newMin > oldMin && newMin > 0 {
		// Every data key below the first live segment, in one range deletion.
		if err := w.DeleteRange(segDataStart, appendSegPrefix(nil, newMin)); err != nil {
			return true, err
		}
	}
	return true, nil
}

// live reports whether a write with segment timestamp ts is kept at stream time st (the
// segment of ts has not expired: Kafka Streams' getOrCreateSegmentIfLive).
func (s *segmented) live(st, ts int64) bool {
	return segmentID(ts, s.interval) >= minLiveSegment(st, s.retention, s.interval)
}

// write writes one entry (a deletion if value is nil) with data key dk (whose segment is
// that of ts) and segment timestamp ts through w, advancing the stream time; it reports
// false, writing nothing, if the entry's segment has expired. st is the state before the
// write; it is updated, and written too if it changed or if forceState is set.
func (s *segmented) write(w writer, st *segState, dk []byte, ts int64, value []byte, forceState bool) (bool, error) {
	changed, err := s.observe(w, st, ts)
	if err != nil {
		return false, err
	}
	if changed || forceState {
		if err := w.Set(segStateKey, st.appendTo(s.stateBuf[:0])); err != nil {
			return false, err
		}
	}
	if !s.live(st.streamTime, ts) {
		return false, nil
	}
	if value == nil {
		return true, w.Delete(dk)
	}
	return true, w.Set(dk, value)
}

// restore implements Restorer.Restore for every segmented store. seq, if not nil, returns
// the sequence number of a schema key and whether it is to replace the state's.
func (s *segmented) restore(st *segState, bt Batch, key, value []byte, seq func(sk []byte) (int32, bool)) error {
	if name, ok := metaOfChangelogKey(key); ok {
		k := append(append([]byte(nil), segLoggedMetaPrefix...), name...)
		if value == nil {
			bt.Delete(k)
		} else {
			bt.Set(k, append([]byte(nil), value...))
		}
		return nil
	}
	if len(key) < s.suffixLen {
		return fmt.Errorf("store %s: restoring: malformed changelog key %x: shorter than %d bytes", s.name, key, s.suffixLen)
	}
	ts := s.segTime(key)
	if ts < 0 {
		return nil // a window before 0: no Kafka Streams store writes one
	}
	force := false
	if seq != nil {
		if n, later := seq(key); later {
			st.seq, force = n, true
		}
	}
	_, err := s.write(batchWriter{bt}, st, dataKey(segmentID(ts, s.interval), key), ts, value, force)
	return err
}

// keyUpperBound returns an exclusive upper bound of the schema keys whose serialized key is
// at most keyTo and whose suffix is at most maxSuffix: the successor of the largest of
// keyTo[:l] + maxSuffix for every l (a shorter key followed by its suffix may sort after
// keyTo followed by its own, when keyTo's next bytes are below the suffix's: Kafka Streams'
// OrderedBytes.upperRange handles the same case).
func keyUpperBound(keyTo, maxSuffix []byte) []byte {
	var best, cand []byte
	for l := len(keyTo); l >= 0; l-- {
		cand = append(append(cand[:0], keyTo[:l]...), maxSuffix...)
		if l == len(keyTo) || bytes.Compare(cand, best) > 0 {
			best = append(best[:0], cand...)
		}
	}
	return append(best, 0x00)
}

// segSpan is the part of one segment a scan reads: data keys in [from, to).
type segSpan struct{ from, to []byte }

// segScan iterates over segments first..last (descending if reverse), reading in each the
// span that span returns, and yields the entries whose schema key accept takes. Each
// segment's iterator is opened when the scan gets to it (as Kafka Streams' SegmentIterator
// does), so it reads the segment as of that moment.
type segScan struct {
	s       *segmented
	seg     int64 // the next segment to open
	last    int64
	reverse bool
	span    func(seg int64) (segSpan, bool)
	accept  func(sk []byte) bool
	cur     Iterator
	// pend, if set, is the Buffer whose pending writes alone hold the entries scanned
	// (recentOnly): each segment's span is copied from them into ents (keys and values in
	// arena) instead of read through an iterator; inPend is set while ents holds a
	// segment's, ei the next of them.
	pend     *Buffer
	inPend   bool
	ents     []pendEnt
	ei       int
	arena    []byte
	done     bool
	closed   bool
	err      error
	key, val []byte // the current entry: schema key and value
}

// emptyScan is a scan that yields nothing.
func emptyScan() *segScan { return &segScan{done: true} }

// pendEnt is an entry copied from a Buffer's pending writes: its data key and value in a
// segScan's arena.
type pendEnt struct{ k0, k1, v1 int }

// loadPending copies the pending values of span sp into it.ents, in the scan's order.
func (it *segScan) loadPending(sp segSpan) {
	it.ents, it.arena, it.ei, it.inPend = it.ents[:0], it.arena[:0], 0, true
	it.pend.ascendPending(sp.from, sp.to, func(k string, v []byte) bool {
		k0 := len(it.arena)
		it.arena = append(append(it.arena, k...), v...)
		it.ents = append(it.ents, pendEnt{k0, k0 + len(k), len(it.arena)})
		return true
	})
	if it.reverse {
		for i, j := 0, len(it.ents)-1; i < j; i, j = i+1, j-1 {
			it.ents[i], it.ents[j] = it.ents[j], it.ents[i]
		}
	}
}

// nextPending moves to the next accepted entry of it.ents, if any.
func (it *segScan) nextPending() bool {
	for it.ei < len(it.ents) {
		e := it.ents[it.ei]
		it.ei++
		sk, ok := schemaKeyOf(it.arena[e.k0:e.k1])
		if !ok || len(sk) < it.s.suffixLen || !it.accept(sk) {
			continue
		}
		it.key, it.val = sk, it.arena[e.k1:e.v1]
		return true
	}
	it.inPend = false
	return false
}

func (it *segScan) Next() bool {
	it.key, it.val = nil, nil
	if it.done || it.closed {
		return false
	}
	for {
		if it.inPend {
			if it.nextPending() {
				return true
			}
			continue
		}
		if it.cur == nil {
			if (!it.reverse && it.seg > it.last) || (it.reverse && it.seg < it.last) {
				it.done = true
				return false
			}
			seg := it.seg
			if it.reverse {
				it.seg--
			} else {
				it.seg++
			}
			sp, ok := it.span(seg)
			if !ok {
				continue
			}
			if it.pend != nil {
				it.loadPending(sp)
				continue
			}
			var err error
			if it.reverse {
				it.cur, err = it.s.b.ReverseRange(sp.from, sp.to)
			} else {
				it.cur, err = it.s.b.Range(sp.from, sp.to)
			}
			if err != nil {
				it.err, it.done = it.s.errorf("%w", err), true
				return false
			}
		}
		if !it.cur.Next() {
			err := errors.Join(it.cur.Err(), it.cur.Close())
			it.cur = nil
			if err != nil {
				it.err, it.done = it.s.errorf("%w", err), true
				return false
			}
			continue
		}
		sk, ok := schemaKeyOf(it.cur.Key())
		if !ok || len(sk) < it.s.suffixLen || !it.accept(sk) {
			continue
		}
		it.key, it.val = sk, it.cur.Value()
		return true
	}
}

func (it *segScan) Err() error { return it.err }

func (it *segScan) Close() error {
	it.closed, it.inPend = true, false
	if it.cur == nil {
		return nil
	}
	err := it.cur.Close()
	it.cur = nil
	return err
}

// scan returns a scan of segments lo..hi, in reverse if reverse.
func (s *segmented) scan(lo, hi int64, reverse bool, span func(int64) (segSpan, bool), accept func([]byte) bool) *segScan {
	if lo > hi {
		return emptyScan()
	}
	it := &segScan{s: s, seg: lo, last: hi, reverse: reverse, span: span, accept: accept}
	if reverse {
		it.seg, it.last = hi, lo
	}
	return it
}

// wholeScan returns a scan of every entry of segments lo..hi that accept takes, with one
// backend iterator.
func (s *segmented) wholeScan(lo, hi int64, reverse bool, accept func([]byte) bool) *segScan {
	if lo > hi {
		return emptyScan()
	}
	span := segSpan{appendSegPrefix(nil, lo), appendSegPrefix(nil, satAdd(hi, 1))}
	if hi == math.MaxInt64 {
		span.to = segDataEnd
	}
	return s.scan(0, 0, reverse, func(int64) (segSpan, bool) { return span, true }, accept)
}

// keyOf returns the serialized key of schema key sk.
func (s *segmented) keyOf(sk []byte) []byte { return sk[:len(sk)-s.suffixLen] }

// inKeyRange reports whether sk's serialized key is in [from, to] (nil bounds unbounded).
func (s *segmented) inKeyRange(sk, from, to []byte) bool {
	k := s.keyOf(sk)
	return (from == nil || bytes.Compare(k, from) >= 0) && (to == nil || bytes.Compare(k, to) <= 0)
}

// ms converts a time to Unix milliseconds.
func ms(t time.Time) int64 { return t.UnixMilli() }

// durationMs converts a positive duration to whole milliseconds, rounding up a fraction of
// one so that a positive duration never becomes 0.
func durationMs(d time.Duration) int64 {
	m := d.Milliseconds()
	if d > 0 && time.Duration(m)*time.Millisecond < d {
		m++
	}
	return m
}

// checkRetention validates a retention and a segment interval and returns them in
// milliseconds, the interval defaulting to max(retention/2, 60 s).
func checkRetention(retention, interval time.Duration) (int64, int64, error) {
	if retention < 0 {
		return 0, 0, fmt.Errorf("negative retention %s", retention)
	}
	if interval < 0 {
		return 0, 0, fmt.Errorf("negative segment interval %s", interval)
	}
	r := durationMs(retention)
	i := durationMs(interval)
	if i == 0 {
		i = max(r/2, minSegmentInterval)
	}
	return r, i, nil
}

// segOpMetaPrefix starts the keys of operator metadata (see [WindowStore.Meta]), under the
// meta prefix so that they are never logged; segLoggedMetaPrefix those of logged operator
// metadata ([WindowStore.LoggedMeta]), which changelogKey logs.
var (
	segOpMetaPrefix     = []byte{segMetaPrefix, 0x02}
	segLoggedMetaPrefix = []byte{segMetaPrefix, 0x03}
)

// meta reads the operator metadata value named name, under prefix.
func (s *segmented) meta(prefix []byte, name string) (int64, bool, error) {
	v, ok, err := s.b.Get(append(append([]byte(nil), prefix...), name...))
	if err != nil || !ok {
		return 0, false, err
	}
	if len(v) != 8 {
		return 0, false, s.errorf("malformed metadata %q: %x", name, v)
	}
	return int64(binary.BigEndian.Uint64(v)), true, nil
}

// setMeta writes the operator metadata value named name, under prefix. The value is 8
// bytes: logged, a timestamped store's changelog carries it as the record timestamp (with
// an empty value), and restoring puts it back as the value's timestamp prefix, which is the
// same 8 bytes.
func (s *segmented) setMeta(prefix []byte, name string, v int64) error {
	k := append(append([]byte(nil), prefix...), name...)
	return s.b.Set(k, binary.BigEndian.AppendUint64(nil, uint64(v)))
}

// pendingOnly returns the Buffer that s writes through, when the data under it cannot hold
// an entry whose segment timestamp is ts: ts is after the stream time of what was flushed
// (every flushed entry's timestamp is at most that), so that the pending writes alone know
// the entry. A window store fetches the window of a key that the key's first record of a
// new window creates this way without a read of the storage engine. nil otherwise.
func (s *segmented) pendingOnly(ts int64) (*Buffer, error) {
	buf := s.buffer()
	if buf == nil {
		return nil, nil
	}
	if !s.flushedOK || s.flushedGen != buf.flushes {
		st, err := readState(getterFunc(buf.getCut))
		if err != nil {
			return nil, s.errorf("reading the flushed stream time: %w", err)
		}
		s.flushedST, s.flushedGen, s.flushedOK = st.streamTime, buf.flushes, true
	}
	if ts > s.flushedST {
		return buf, nil
	}
	return nil, nil
}

// pendingView reads key from b's pending writes alone, without a copy: its pending value
// (ok), or nothing (a pending deletion, a pending range deletion covering it, or no pending
// write). The value is b's, valid until b's next call, and must not be modified; a present
// empty value is empty, not nil.
func pendingView(b *Buffer, key []byte) ([]byte, bool) {
	if len(b.fresh) > 0 && b.freshAbsent(key) {
		return nil, false // never written
	}
	s := b.find(key)
	if s == nil || s.p == nil || s.p.del {
		return nil, false
	}
	if s.p.val == nil {
		return []byte{}, true
	}
	return s.p.val, true
}

// recentOnly returns the Buffer that s writes through when its pending writes alone hold
// every entry of serialized key kb with a segment timestamp of at least lo: nothing flushed
// to the data under it is that recent, by the stream time of the last flush (see
// pendingOnly) or by the key's flushed bound (flushIndex); none is then set if no pending
// write of the key is that recent either. buf is nil otherwise.
func (s *segmented) recentOnly(kb []byte, lo int64) (buf *Buffer, none bool, err error) {
	buf = s.buffer()
	if buf == nil {
		return nil, false, nil
	}
	gen := buf.flushes
	if !s.fidx.ok {
		st, err := s.state()
		if err != nil {
			return nil, false, err
		}
		s.fidx.start(st.streamTime, gen)
	}
	flushed, pending := s.fidx.bounds(kb, gen)
	if lo <= flushed {
		if b, err := s.pendingOnly(lo); b == nil || err != nil {
			return nil, false, err
		}
	}
	return buf, lo > pending, nil
}

// notePut records in the flush index a put of serialized key kb at segment timestamp ts.
// The index starts with the first read that consults it (recentOnly), bounding what was
// written before by the stream time then: a store that is never read by key and time range
// (a windowed aggregation's, which fetches single windows) pays nothing for it.
func (s *segmented) notePut(kb []byte, ts int64) {
	if !s.fidx.ok {
		return
	}
	buf := s.buffer()
	if buf == nil {
		return
	}
	s.fidx.note(kb, ts, buf.flushes)
}

// trackFresh asks the Buffer under s, if any, to record the keys written to segment seg,
// which a put is about to write to for the first time since s was made, if the segment holds
// nothing yet (a segment newer than every write so far): a fetch of a window of the segment
// that was never written then answers without a read of the storage engine (see
// [Buffer.TrackFresh]). Each segment is tried once, when it is newer than those tried
// before.
func (s *segmented) trackFresh(seg int64) error {
	s.freshSeg = seg
	buf := s.buffer()
	if buf == nil {
		s.freshOn = false
		return nil
	}
	if _, err := buf.TrackFresh(appendSegPrefix(nil, seg)); err != nil {
		return s.errorf("%w", err)
	}
	return nil
}

// RetentionExtender is a window or session store, or its changelog codec, whose retention
// can be lengthened after it was made: the runtime lengthens that of the stores of
// windowed operators whose event time is aligned with their upstream tasks
// (Config.EventTimeAlignment in package kstream), which put windows ahead of the time that
// closes them by as much as the fastest upstream task leads the slowest. Lengthening never
// changes the segment interval: the keys already on disk keep their segments.
type RetentionExtender interface {
	// WithExtraRetention returns the store or codec with extra added to its retention.
	WithExtraRetention(extra time.Duration) any
}
