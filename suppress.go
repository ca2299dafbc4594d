package kstream

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode/utf16"
	"unsafe"

	"github.com/google/btree"
	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/store"
)

// BufferConfig bounds the buffer of a [KTable.Suppress] and says what happens when it is
// full: Kafka Streams' Suppressed.BufferConfig. Create one with [Unbounded], [MaxRecords]
// or [MaxBytes]; the zero BufferConfig is not usable. A BufferConfig is an immutable value:
// its methods return modified copies.
//
// A strict buffer ([Unbounded], or any buffer after [BufferConfig.ShutDownWhenFull]) never
// emits a result early: when it grows past its limits the operator fails with a
// [*BufferFullError]. An eager buffer ([MaxRecords] or [MaxBytes], or any buffer after
// [BufferConfig.EmitEarlyWhenFull]) emits its oldest records early to stay within its
// limits, so that it may emit more than one result per key.
type BufferConfig struct {
	maxRecords, maxBytes int64
	emitEarly            bool
	made                 bool // made by a constructor
}

// Unbounded returns a strict buffer without limits (Suppressed.BufferConfig.unbounded):
// it keeps every record until it is due, however much memory that takes.
func Unbounded() BufferConfig {
	return BufferConfig{maxRecords: math.MaxInt64, maxBytes: math.MaxInt64, made: true}
}

// MaxRecords returns an eager buffer of at most n records, with no limit on its size in
// bytes (Suppressed.BufferConfig.maxRecords).
func MaxRecords(n int64) BufferConfig {
	return BufferConfig{maxRecords: n, maxBytes: math.MaxInt64, emitEarly: true, made: true}
}

// MaxBytes returns an eager buffer of at most n bytes, with no limit on its number of
// records (Suppressed.BufferConfig.maxBytes). A record's size is Kafka Streams' estimate:
// its serialized key and values, its headers, its input topic's name and 28 bytes.
func MaxBytes(n int64) BufferConfig {
	return BufferConfig{maxRecords: math.MaxInt64, maxBytes: n, emitEarly: true, made: true}
}

// WithMaxRecords returns c limited to n records, keeping its strategy.
func (c BufferConfig) WithMaxRecords(n int64) BufferConfig { c.maxRecords = n; return c }

// WithMaxBytes returns c limited to n bytes, keeping its strategy.
func (c BufferConfig) WithMaxBytes(n int64) BufferConfig { c.maxBytes = n; return c }

// EmitEarlyWhenFull returns c made eager: when full, it emits its oldest records.
func (c BufferConfig) EmitEarlyWhenFull() BufferConfig { c.emitEarly = true; return c }

// ShutDownWhenFull returns c made strict: when full, the operator fails with a
// [*BufferFullError], which goes to [Config.ProcessingErrorHandler].
func (c BufferConfig) ShutDownWhenFull() BufferConfig { c.emitEarly = false; return c }

// Suppressed says which updates of a table [KTable.Suppress] holds back, and for how long:
// Kafka Streams' Suppressed. Create one with [UntilWindowCloses] or [UntilTimeLimit]. It
// is an immutable value.
type Suppressed struct {
	name    string
	final   bool
	limitMs int64
	buf     BufferConfig
	err     error
}

// UntilWindowCloses suppresses all but the final result of each window of a windowed
// table: a window's latest value is emitted once, when stream time (as the suppression sees
// it) passes the window's end plus the grace period of the windowed aggregation upstream
// (for session windows, the grace period plus the inactivity gap), and a window whose final
// value is a delete emits nothing. The buffer must be strict ([Unbounded] or
// [BufferConfig.ShutDownWhenFull]), since an early result would not be final; Suppress
// reports a build error otherwise, and when the table is not a windowed aggregation's.
// Kafka Streams' Suppressed.untilWindowCloses.
func UntilWindowCloses(c BufferConfig) Suppressed {
	s := Suppressed{final: true, buf: c}
	if c.made && c.emitEarly {
		s.err = errors.New("UntilWindowCloses needs a strict buffer (Unbounded or ShutDownWhenFull), since emitting early would emit results that are not final")
	}
	return s
}

// UntilTimeLimit holds back each key's updates until d has passed, in stream time, since
// the first update that the buffer holds for the key; the key's latest value is then
// emitted (a delete too, as a tombstone). d is taken in whole milliseconds. Kafka Streams'
// Suppressed.untilTimeLimit.
func UntilTimeLimit(d time.Duration, c BufferConfig) Suppressed {
	return Suppressed{limitMs: d.Milliseconds(), buf: c}
}

// WithName names the suppression operator name and its buffer store "<name>-store"
// (logged to "<application.id>-<name>-store-changelog"). Without it, they are
// KTABLE-SUPPRESS- and KTABLE-SUPPRESS-STATE-STORE- followed by generated numbers.
func (s Suppressed) WithName(name string) Suppressed { s.name = name; return s }

// BufferFullError is the failure of a suppression whose strict buffer went over its limits
// (see [BufferConfig.ShutDownWhenFull]). Its message is Kafka Streams'.
type BufferFullError struct {
	Operator            string // the suppression operator
	Records, MaxRecords int64
	Bytes, MaxBytes     int64
}

func (e *BufferFullError) Error() string {
	return fmt.Sprintf("%s buffer exceeded its max capacity. Currently [%d/%d] records and [%d/%d] bytes.",
		e.Operator, e.Records, e.MaxRecords, e.Bytes, e.MaxBytes)
}

// windowEnder is the key of a windowed table ([serde.Windowed]).
type windowEnder interface{ EndMs() int64 }

// Suppress holds back the updates of the table and emits only some of them, as s says:
// the final result of each window ([UntilWindowCloses]), or each key's latest value once a
// time limit has passed ([UntilTimeLimit]). It is Kafka Streams' KTable.suppress.
//
// As in Kafka Streams, time is the largest record timestamp the operator has seen (its own
// stream time, which starts again from none when its task restarts), and an update is due
// when that time minus the time limit (or the grace period) reaches the update's buffer
// time: for UntilTimeLimit, the timestamp of the first update buffered for its key (later
// updates replace the value but not the buffer time); for UntilWindowCloses, the window's
// end. Due updates are emitted after each record, in order of buffer time then serialized
// key, with the timestamp and headers of the key's latest update and with the old value
// that update carried. Nothing is emitted on the wall clock: a suppression whose input
// stops keeps its buffer until another record arrives.
//
// The buffer is kept in memory and, at each commit, in a state store with a changelog (see
// [Suppressed.WithName]), so that a restarted or moved task neither loses nor repeats a
// result. A table read through the suppressed table (a join) sees, for a key with buffered
// updates, the value the key had before them, and otherwise the upstream table's value.
//
// The table must carry its key and value serdes, with which the buffer is stored.
func (t KTable[K, V]) Suppress(s Suppressed) KTable[K, V] {
	b := t.b
	if t.info != nil && t.info.versioned {
		// InternalStreamsBuilder.enableVersionedSemantics' check.
		b.errorf("Suppress: suppress() is only supported for non-versioned KTables (note that version semantics might be inherited from upstream)")
	}
	name := s.name
	if name == "" {
		name = b.newName("KTABLE-SUPPRESS")
	}
	storeName := name + "-store"
	if s.name == "" {
		storeName = b.newName("KTABLE-SUPPRESS-STATE-STORE")
	}
	op := "KTable.Suppress " + name
	if !s.buf.made {
		b.errorf("%s: the buffer config is the zero BufferConfig; use Unbounded, MaxRecords or MaxBytes", op)
	}
	if s.err != nil {
		b.errorf("%s: %w", op, s.err)
	}
	suppressMs := s.limitMs
	if s.final {
		if _, ok := any(*new(K)).(windowEnder); !ok {
			b.errorf("%s: UntilWindowCloses applies to windowed tables, whose keys are serde.Windowed; this table's keys are %T", op, *new(K))
		} else if grace, err := findWindowGrace(t.n, nil, ""); err != nil {
			b.errorf("%s: %w", op, err)
		} else {
			suppressMs = grace
		}
	}
	switch {
	case t.ks == nil:
		b.errorf("%s: the table carries no key serde for the buffer store: %w", op, ErrNoSerde)
	case t.vs == nil:
		// Kafka Streams falls back to the default value serde; kstream has none. The table's
		// values changed type upstream (TableMapValues, a join's joiner), which drops the
		// serde unless the operator is given one.
		b.errorf("%s: the table carries no value serde for the buffer store (its values, of type %s, come from operator %s, which has none for them); pass one to that operator with kstream.Materialized(\"\", serde), a value serde without a store (Kafka Streams' Materialized.with), or kstream.Materialized(\"<store>\", serde) to keep the table in a store too: %w",
			op, typeName[V](), t.n.name, ErrNoSerde)
	}
	// KTableSuppressProcessorSupplier asks its parent for old values (forcing it), which
	// the buffer keeps as the value a key had before its buffered updates.
	sendOld := t.info.enable(true)
	n := b.tableNode(name, t.n)
	d := &storeDef{name: storeName, persistent: false, logged: true, noReadCache: true, keyID: serdeID(t.ks), valueID: serdeID(t.vs)}
	d.typed = func(bk store.Backend) any { return store.NewKeyValueStore(storeName, bk, serde.Bytes(), serde.Bytes()) }
	b.addStore(d, n)
	cfg := suppressConfig{final: s.final, suppressMs: suppressMs, buf: s.buf, store: storeName}
	// The buffer's serdes name their subjects after its changelog, as Java's buffer does;
	// the table downstream carries the serdes unbound.
	ks, vs := storeSerde(d, t.ks, true), storeSerde(d, t.vs, false)
	n.instantiate = func(tk *task) (any, error) {
		st, err := taskBufferStore(tk, storeName)
		if err != nil {
			return nil, err
		}
		p := &suppressProcessor[K, V]{cfg: cfg, t: tk, n: n, ks: ks, vs: vs, st: st, observed: -1, savedObserved: -1}
		p.kapp, _ = ks.(store.AppendSerializer[K])
		p.endOff = windowEndOffset[K]()
		p.vapp, _ = vs.(store.AppendSerializer[V])
		if err := p.rebuild(); err != nil {
			return nil, fmt.Errorf("kstream: operator %s: reading its buffer store %q: %w", n.name, storeName, err)
		}
		tk.txnHooks = append(tk.txnHooks, p)
		tk.storeWriters = append(tk.storeWriters, p)
		if cfg.final {
			tk.onAlignedAdvance(func() error {
				if p.ctx == nil || p.broken != nil {
					return nil
				}
				return p.enforce(p.ctx)
			})
		}
		return processorInstance(tk, n, ProcessorFunc[K, change[V], K, change[V]](p.process))
	}
	info := derivedInfo(t.info)
	info.sendOld = sendOld
	out := KTable[K, V]{b: b, n: n, ks: t.ks, vs: t.vs, info: info}
	// Java's view lists the buffer's store first, then the parent's (storeNames).
	out.getterStores = append([]*storeDef{d}, t.getterStores...)
	out.getter = func(tk *task) (valueGetter[K, V], error) {
		parent, err := t.getter(tk)
		if err != nil {
			return nil, err
		}
		// The buffer's store is written only at commits: the getter reads the processor's
		// entries in memory. The processor may be instantiated after the operator that
		// asks for the getter (its child), so it is looked up at the first read.
		var p *suppressProcessor[K, V]
		// KTableSuppressProcessorSupplier.view: the prior value of a buffered key (with
		// timestamp -1, as Java's buffer gives it), else the parent's value.
		return func(k K) (V, int64, bool, error) {
			var zero V
			if p == nil {
				if p = findSuppressProcessor[K, V](tk, storeName); p == nil {
					return zero, 0, false, fmt.Errorf("kstream: internal error: task %s has no suppression %s over store %q", tk.id, name, storeName)
				}
			}
			kb, err := ks.Serialize(k)
			if err != nil {
				return zero, 0, false, fmt.Errorf("suppression %s: serializing the key: %w", name, err)
			}
			e, ok := p.keys[string(kb)]
			if !ok {
				return parent(k)
			}
			if !e.hasPrior {
				return zero, 0, false, nil
			}
			v, err := vs.Deserialize(e.prior)
			if err != nil {
				return zero, 0, false, fmt.Errorf("suppression %s: deserializing a buffered value: %w", name, err)
			}
			return v, -1, true, nil
		}, nil
	}
	return out
}

// findSuppressProcessor returns task t's suppression processor over the buffer store named
// storeName, nil if it has none (yet).
func findSuppressProcessor[K, V any](t *task, storeName string) *suppressProcessor[K, V] {
	for _, h := range t.txnHooks {
		if p, ok := h.(*suppressProcessor[K, V]); ok && p.cfg.store == storeName {
			return p
		}
	}
	return nil
}

// findWindowGrace returns the grace period that closes the windows of the table of node n:
// that of the windowed aggregation upstream, the largest one if several are, as Kafka
// Streams' GraphGraceSearchUtil.findAndVerifyWindowGrace finds it. chain names the nodes
// walked so far (from is the last), for its error, which names them as Java does: a
// source's parent is Java's "root", and a table's source and its processor are one node
// named after the processor.
func findWindowGrace(n, from *node, chain string) (int64, error) {
	if n.hasWindowGrace {
		return n.windowGrace, nil
	}
	if n.kind != kindSource || from == nil || !isSourceTable(from) {
		if chain == "" {
			chain = n.name
		} else {
			chain = n.name + "->" + chain
		}
	}
	if len(n.parents) == 0 {
		return 0, fmt.Errorf("Window close time is only defined for windowed computations. Got [root->%s].", chain)
	}
	grace := int64(-1)
	for _, p := range n.parents {
		g, err := findWindowGrace(p, n, chain)
		if err != nil {
			return 0, err
		}
		grace = max(grace, g)
	}
	return grace, nil
}

// isSourceTable reports whether n is the processor of a table read from a topic.
func isSourceTable(n *node) bool {
	for _, d := range n.stores {
		if d.sourceTopic != "" {
			return true
		}
	}
	return false
}

// bufferKV is the store of a suppression buffer: serialized record keys to encoded
// bufferEntry values.
type bufferKV = store.KeyValueStore[[]byte, []byte]

// taskBufferStore returns task t's instance of the suppression buffer store named name.
func taskBufferStore(t *task, name string) (*bufferKV, error) {
	s, ok := t.stores[name].(*bufferKV)
	if !ok {
		return nil, fmt.Errorf("kstream: internal error: task %s has no suppression buffer store %q (it has a %T)", t.id, name, t.stores[name])
	}
	return s, nil
}

// suppressConfig is what a suppression processor needs of its definition.
type suppressConfig struct {
	final      bool
	suppressMs int64 // the time limit, or the upstream grace period
	buf        BufferConfig
	store      string
}

// bufferEntry is one buffered key: the latest update with its record context, and the
// value the key had before its first buffered update (Java's BufferValue). Values are
// serialized; a value is absent (a null) when its has flag is false.
type bufferEntry struct {
	time    int64 // buffer time: the first update's timestamp, or the window end
	ts      int64 // the latest update's timestamp
	topic   string
	headers []Header
	// prior is the value before the first buffered update; old and new are the latest
	// update's. oldIsPrior says old is the prior value itself (one update buffered), which
	// Java's size estimate counts once.
	prior, old, new          []byte
	hasPrior, hasOld, hasNew bool
	oldIsPrior               bool
}

const (
	entryHasPrior = 1 << iota
	entryHasOld
	entryHasNew
	entryOldIsPrior
)

// encode writes e as the buffer store's value:
//
//	time (8 bytes, big-endian) | ts (8) | flags (1) | uvarint len(topic) | topic |
//	uvarint count of headers | per header: uvarint len(key) | key | varint len(value) or -1 | value |
//	per present value among prior, old, new: uvarint len | bytes
//
// This format is kstream's own; Kafka Streams' suppression changelog is not read or written.
func (e *bufferEntry) encode() []byte {
	return e.appendEncoded(make([]byte, 0, 17+len(e.topic)+len(e.prior)+len(e.old)+len(e.new)+16))
}

// appendEncoded appends the encoding of e (see encode) to out.
func (e *bufferEntry) appendEncoded(out []byte) []byte {
	out, _ = e.appendEncodedAt(out)
	return out
}

// appendEncodedAt appends the encoding of e (see encode) to out, and returns where in the
// result e's prior value is.
func (e *bufferEntry) appendEncodedAt(out []byte) ([]byte, int) {
	var flags byte
	if e.hasPrior {
		flags |= entryHasPrior
	}
	if e.hasOld {
		flags |= entryHasOld
	}
	if e.hasNew {
		flags |= entryHasNew
	}
	if e.oldIsPrior {
		flags |= entryOldIsPrior
	}
	out = binary.BigEndian.AppendUint64(out, uint64(e.time))
	out = binary.BigEndian.AppendUint64(out, uint64(e.ts))
	out = append(out, flags)
	out = binary.AppendUvarint(out, uint64(len(e.topic)))
	out = append(out, e.topic...)
	out = binary.AppendUvarint(out, uint64(len(e.headers)))
	for _, h := range e.headers {
		out = binary.AppendUvarint(out, uint64(len(h.Key)))
		out = append(out, h.Key...)
		if h.Value == nil {
			out = binary.AppendVarint(out, -1)
			continue
		}
		out = binary.AppendVarint(out, int64(len(h.Value)))
		out = append(out, h.Value...)
	}
	priorAt := len(out)
	if e.hasPrior {
		out = binary.AppendUvarint(out, uint64(len(e.prior)))
		priorAt = len(out)
		out = append(out, e.prior...)
	}
	if e.hasOld {
		out = binary.AppendUvarint(out, uint64(len(e.old)))
		out = append(out, e.old...)
	}
	if e.hasNew {
		out = binary.AppendUvarint(out, uint64(len(e.new)))
		out = append(out, e.new...)
	}
	return out, priorAt
}

var errBadBufferEntry = errors.New("kstream: malformed suppression buffer entry")

// decodeBufferEntry reads a value written by bufferEntry.encode. The entry's values are
// slices of b.
func decodeBufferEntry(b []byte) (bufferEntry, error) {
	var e bufferEntry
	err := decodeBufferEntryInto(&e, b, true)
	return e, err
}

// decodeBufferEntryInto reads a value written by bufferEntry.encode into e, whose values
// are then slices of b; without withTopic, e's topic is left empty (an eviction has no use
// for it, and need not allocate it).
func decodeBufferEntryInto(e *bufferEntry, b []byte, withTopic bool) error {
	if len(b) < 17 {
		return errBadBufferEntry
	}
	e.time, e.ts = int64(binary.BigEndian.Uint64(b)), int64(binary.BigEndian.Uint64(b[8:]))
	flags := b[16]
	b = b[17:]
	bytesOf := func() ([]byte, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, false
		}
		v := b[k : k+int(n) : k+int(n)]
		b = b[k+int(n):]
		return v, true
	}
	topic, ok := bytesOf()
	if !ok {
		return errBadBufferEntry
	}
	if withTopic {
		e.topic = string(topic)
	}
	nh, k := binary.Uvarint(b)
	if k <= 0 || nh > uint64(len(b)) {
		return errBadBufferEntry
	}
	b = b[k:]
	for range nh {
		key, ok := bytesOf()
		if !ok {
			return errBadBufferEntry
		}
		h := Header{Key: string(key)}
		n, k := binary.Varint(b)
		if k <= 0 || n < -1 || n > int64(len(b)-k) {
			return errBadBufferEntry
		}
		b = b[k:]
		if n >= 0 {
			h.Value = append(make([]byte, 0, n), b[:n]...)
			b = b[n:]
		}
		e.headers = append(e.headers, h)
	}
	e.hasPrior, e.hasOld, e.hasNew = flags&entryHasPrior != 0, flags&entryHasOld != 0, flags&entryHasNew != 0
	e.oldIsPrior = flags&entryOldIsPrior != 0
	for _, v := range []struct {
		has bool
		dst *[]byte
	}{{e.hasPrior, &e.prior}, {e.hasOld, &e.old}, {e.hasNew, &e.new}} {
		if v.has {
			if *v.dst, ok = bytesOf(); !ok {
				return errBadBufferEntry
			}
		}
	}
	if len(b) != 0 {
		return errBadBufferEntry
	}
	return nil
}

// size is Kafka Streams' estimate of the memory a buffered record takes
// (InMemoryTimeOrderedKeyValueChangeBuffer.computeRecordSize), which [MaxBytes] bounds: 8
// bytes, the key, the prior value, the old value unless it is the prior value, the new
// value, and the record context (16 bytes, the topic's length in UTF-16 units, 4 bytes, and
// each header's key length in UTF-16 units and value length).
func (e *bufferEntry) size(key []byte) int64 { return e.sizeWith(key, utf16Len(e.topic)) }

// sizeWith is size given the topic's length in UTF-16 units.
func (e *bufferEntry) sizeWith(key []byte, topicLen int64) int64 {
	n := int64(8 + len(key) + len(e.prior) + len(e.new))
	if e.hasOld && !e.oldIsPrior {
		n += int64(len(e.old))
	}
	n += 16 + topicLen + 4
	for _, h := range e.headers {
		n += utf16Len(h.Key) + int64(len(h.Value))
	}
	return n
}

// utf16Len is the length of s in UTF-16 code units, Java's String.toCharArray().length.
func utf16Len(s string) int64 {
	n := int64(0)
	for _, r := range s {
		n += int64(utf16.RuneLen(r))
	}
	return n
}

// bufferKey orders the buffer: by buffer time, then serialized key (Java's BufferKey).
type bufferKey struct {
	time int64
	key  string
}

func bufferKeyLess(a, b bufferKey) bool { return compareBufferKeys(a, b) < 0 }

// windowEndOffset is the offset of the End field (a time.Time) in K when K is a
// serde.Windowed, so that the window end of a key can be read without converting the key
// to an interface; -1 for another type.
func windowEndOffset[K any]() int {
	rt := reflect.TypeFor[K]()
	if rt.Kind() != reflect.Struct || rt.PkgPath() != reflect.TypeFor[serde.Windowed[int]]().PkgPath() || !strings.HasPrefix(rt.Name(), "Windowed[") {
		return -1
	}
	f, ok := rt.FieldByName("End")
	if !ok || len(f.Index) != 1 || f.Type != reflect.TypeFor[time.Time]() {
		return -1
	}
	return int(f.Offset)
}

// bufferedKey is a buffered key as a suppression processor keeps it in memory: its whole
// entry, encoded as the buffer store keeps it (Kafka Streams'
// InMemoryTimeOrderedKeyValueChangeBuffer keeps its entries in memory the same way, and
// its store only for restoration), with the fields that updates, evictions and the size
// limits read without decoding it.
type bufferedKey struct {
	key  string // the serialized key: the same string as the processor's map key
	size int64  // the size estimate (bufferEntry.size)
	time int64  // the buffer time
	// enc is the encoded entry (bufferEntry.encode); prior, the prior value within it.
	enc      []byte
	prior    []byte
	hasPrior bool
	// dirty says enc has changed since it was last written to the store (it is then in
	// the processor's dirty list); stored, that the store holds an entry of the key, written
	// at an earlier commit's cut or read when the buffer was rebuilt.
	dirty, stored bool
}

func compareBufferKeys(a, b bufferKey) int {
	if a.time != b.time {
		if a.time < b.time {
			return -1
		}
		return 1
	}
	return strings.Compare(a.key, b.key)
}

// suppressProcessor is the processor of [KTable.Suppress]: Kafka Streams'
// KTableSuppressProcessor over an InMemoryTimeOrderedKeyValueChangeBuffer. The buffer's
// entries are in memory, with their order and sizes; the keys changed since the last
// commit are written to the buffer's store (and so to its changelog) at the commit's cut,
// before the stores are logged (writeStore). The memory is rebuilt from the store when
// the task starts and when a transaction aborts: the store then holds what the last
// commit wrote, the runtime having discarded the aborted transaction's writes.
type suppressProcessor[K, V any] struct {
	cfg suppressConfig
	// ctx is the processor context, kept for emissions without a record in hand (align.go).
	ctx ProcessorContext[K, change[V]]
	t   *task
	n   *node
	ks  serde.Serde[K]
	vs  serde.Serde[V]
	st  *bufferKV
	// order is the buffered keys by buffer time then key; keys has each buffered key's
	// entry, and bytes is the sum of their sizes.
	order *btree.BTreeG[bufferKey]
	keys  map[string]*bufferedKey
	bytes int64
	// dirty are the keys changed since the last write to the store (an entry evicted since
	// has its dirty flag cleared); gone are the keys evicted since then whose entries the
	// store holds (a key buffered again since has an entry in keys, written instead).
	dirty []*bufferedKey
	gone  []string
	// evicted is the entry decoded by evict, reused.
	evicted bufferEntry
	// kapp and vapp are the serdes when they append to a buffer; kbuf, nbuf, obuf and
	// ebuf are the buffers of a record's key, new and old values and encoded entry (the
	// store copies what it keeps).
	kapp                   store.AppendSerializer[K]
	vapp                   store.AppendSerializer[V]
	kbuf, nbuf, obuf, ebuf []byte
	// endOff is the offset of the End field in K when K is a serde.Windowed, else -1
	// (windowEndOffset).
	endOff int
	// topic and topicLen are the last input topic whose UTF-16 length the size estimate
	// took, and that length.
	topic    string
	topicLen int64
	// observed is the largest record timestamp seen, -1 before the first (Java's
	// observedStreamTime, which is not kept across restarts); savedObserved is its value
	// at the last commit.
	observed, savedObserved int64
	// broken is set when the buffer could not be rebuilt after an abort.
	broken error
}

// rebuild reads the buffer from the store.
func (p *suppressProcessor[K, V]) rebuild() error {
	if p.order == nil {
		p.order = btree.NewG(16, bufferKeyLess)
	}
	p.order.Clear(false)
	p.keys, p.bytes = map[string]*bufferedKey{}, 0
	clear(p.dirty)
	p.dirty, p.gone = p.dirty[:0], nil
	it, err := p.st.All()
	if err != nil {
		return err
	}
	defer it.Close()
	for it.Next() {
		// The iterator's value is the caller's (a copy): the entry keeps it.
		enc := it.Value()
		e, err := decodeBufferEntry(enc)
		if err != nil {
			return err
		}
		k := string(it.Key())
		size := e.size(it.Key())
		p.order.ReplaceOrInsert(bufferKey{e.time, k})
		p.keys[k] = &bufferedKey{key: k, size: size, time: e.time, enc: enc, prior: e.prior, hasPrior: e.hasPrior, stored: true}
		p.bytes += size
	}
	return it.Err()
}

// writeStore implements storeWriter: at a commit's cut, before the stores are logged, the
// entries changed since the last one are put to the store, and those evicted deleted. A key
// buffered and evicted in between never reaches the store (nor its changelog).
func (p *suppressProcessor[K, V]) writeStore() error {
	if p.broken != nil {
		// The buffer in memory is not the store's: nothing more may be committed.
		return fmt.Errorf("operator %s: %w", p.n.name, p.broken)
	}
	for _, k := range p.gone {
		if _, ok := p.keys[k]; ok {
			continue // buffered again: its new entry is written below
		}
		p.kbuf = append(p.kbuf[:0], k...)
		if err := p.st.Delete(p.kbuf); err != nil {
			return fmt.Errorf("operator %s: writing its buffer store %q: %w", p.n.name, p.cfg.store, err)
		}
	}
	clear(p.gone)
	p.gone = p.gone[:0]
	for i, e := range p.dirty {
		if !e.dirty {
			continue // evicted since it changed
		}
		p.kbuf = append(p.kbuf[:0], e.key...)
		if err := p.st.Put(p.kbuf, e.enc); err != nil {
			p.dirty = p.dirty[i:] // written again at the next cut
			return fmt.Errorf("operator %s: writing its buffer store %q: %w", p.n.name, p.cfg.store, err)
		}
		e.dirty, e.stored = false, true
	}
	clear(p.dirty)
	p.dirty = p.dirty[:0]
	return nil
}

func (p *suppressProcessor[K, V]) committed() { p.savedObserved = p.observed }

func (p *suppressProcessor[K, V]) cut() func() {
	observed := p.observed
	return func() { p.savedObserved = observed }
}

// aborted goes back to the last commit: the runtime has discarded the store's writes since
// (those of the aborted transaction's cut), so the buffer is read again from the store.
func (p *suppressProcessor[K, V]) aborted() {
	p.observed = p.savedObserved
	if err := p.rebuild(); err != nil {
		p.broken = fmt.Errorf("reading the buffer store %q after an aborted transaction: %w", p.cfg.store, err)
	}
}

func (p *suppressProcessor[K, V]) process(ctx ProcessorContext[K, change[V]], r Record[K, change[V]]) error {
	if p.broken != nil {
		return p.broken
	}
	ts := unixMs(r.Timestamp)
	p.observed = max(p.observed, ts)
	p.ctx = ctx
	if err := p.buffer(r, ts); err != nil {
		return err
	}
	return p.enforce(ctx)
}

// buffer adds the update r to the buffer, replacing the key's buffered update if it has one
// (whose buffer time and prior value it keeps).
func (p *suppressProcessor[K, V]) buffer(r Record[K, change[V]], ts int64) error {
	kb, err := appendSerialize(p.kapp, p.ks, &p.kbuf, r.Key)
	if err != nil {
		return fmt.Errorf("serializing the key: %w", err)
	}
	if kb == nil {
		return errors.New("the key serializes to a null, which the suppression buffer cannot keep")
	}
	// The headers are encoded into the entry: no copy of them is kept.
	e := bufferEntry{time: ts, ts: ts, headers: r.Headers, hasOld: r.Value.hasOld, hasNew: r.Value.hasNew}
	if p.cfg.final {
		if p.endOff >= 0 {
			// The End field of the serde.Windowed key, read in place: any(r.Key) would
			// allocate a copy of the key for every record.
			e.time = (*time.Time)(unsafe.Add(unsafe.Pointer(&r.Key), p.endOff)).UnixMilli()
		} else {
			e.time = any(r.Key).(windowEnder).EndMs()
		}
	}
	if cur := p.t.cur; cur != nil {
		e.topic = cur.Topic
	}
	if e.hasNew {
		if e.new, err = appendSerialize(p.vapp, p.vs, &p.nbuf, r.Value.new); err != nil {
			return fmt.Errorf("serializing the value: %w", err)
		}
		e.hasNew = e.new != nil
	}
	if e.hasOld {
		if e.old, err = appendSerialize(p.vapp, p.vs, &p.obuf, r.Value.old); err != nil {
			return fmt.Errorf("serializing the old value: %w", err)
		}
		e.hasOld = e.old != nil
	}
	prev, buffered := p.keys[string(kb)]
	if buffered {
		// Updated in place below: the map is not written (a write would allocate the key).
		e.time, e.prior, e.hasPrior = prev.time, prev.prior, prev.hasPrior
	} else {
		e.prior, e.hasPrior, e.oldIsPrior = e.old, e.hasOld, true
	}
	// The entry is encoded apart first: its prior value may be in the key's current
	// encoding, which the new one replaces.
	var priorAt int
	p.ebuf, priorAt = e.appendEncodedAt(p.ebuf[:0])
	if e.topic != p.topic {
		p.topic, p.topicLen = e.topic, utf16Len(e.topic)
	}
	size := e.sizeWith(kb, p.topicLen)
	if buffered {
		p.bytes += size - prev.size
		prev.size = size
		prev.enc = append(prev.enc[:0], p.ebuf...)
		prev.prior = prev.enc[priorAt : priorAt+len(e.prior) : priorAt+len(e.prior)]
		if !prev.dirty {
			p.markDirty(prev)
		}
		return nil
	}
	p.bytes += size
	k := string(kb)
	enc := bytes.Clone(p.ebuf)
	bk := &bufferedKey{key: k, size: size, time: e.time, enc: enc, prior: enc[priorAt : priorAt+len(e.prior) : priorAt+len(e.prior)],
		hasPrior: e.hasPrior}
	p.keys[k] = bk
	p.markDirty(bk)
	p.order.ReplaceOrInsert(bufferKey{e.time, k})
	return nil
}

// markDirty adds b to the keys to write at the next cut. Entries evicted since they were
// added stay in the list (with their dirty flag cleared) until the cut; so that a long
// commit interval does not keep them all, the list drops them when it is full and they
// are most of it.
func (p *suppressProcessor[K, V]) markDirty(b *bufferedKey) {
	b.dirty = true
	if len(p.dirty) == cap(p.dirty) && len(p.dirty) > 2*len(p.keys)+64 {
		kept := p.dirty[:0]
		for _, e := range p.dirty {
			if e.dirty {
				kept = append(kept, e)
			}
		}
		clear(p.dirty[len(kept):])
		p.dirty = kept
	}
	p.dirty = append(p.dirty, b)
}

// appendSerialize serializes v with s, into *buf (reused, valid until the next call) when
// app, s as an AppendSerializer, is not nil; nil for a Kafka null.
func appendSerialize[T any](app store.AppendSerializer[T], s serde.Serde[T], buf *[]byte, v T) ([]byte, error) {
	if app == nil {
		return s.Serialize(v)
	}
	out, isNull, err := app.AppendSerialize((*buf)[:0], v)
	if err != nil || isNull {
		return nil, err
	}
	*buf = out
	if out == nil {
		out = []byte{} // empty, not a null
	}
	return out, nil
}

// enforce emits what is due, then, if the buffer is over its limits, emits its oldest
// records (eager buffer) or fails (strict buffer).
func (p *suppressProcessor[K, V]) enforce(ctx ProcessorContext[K, change[V]]) error {
	now := p.observed
	if p.cfg.final {
		now = p.t.eventTime(now) // a window's final result waits for the aligned time (align.go)
	}
	expiry := now - p.cfg.suppressMs
	for {
		first, ok := p.order.Min()
		if !ok || first.time > expiry {
			break
		}
		if err := p.evict(ctx); err != nil {
			return err
		}
	}
	if !p.overCapacity() {
		return nil
	}
	if !p.cfg.buf.emitEarly {
		return &BufferFullError{Operator: p.n.name, Records: int64(p.order.Len()), MaxRecords: p.cfg.buf.maxRecords,
			Bytes: p.bytes, MaxBytes: p.cfg.buf.maxBytes}
	}
	for p.order.Len() > 0 && p.overCapacity() {
		if err := p.evict(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (p *suppressProcessor[K, V]) overCapacity() bool {
	return int64(p.order.Len()) > p.cfg.buf.maxRecords || p.bytes > p.cfg.buf.maxBytes
}

// evict removes the buffer's first record and forwards it with its timestamp and headers,
// unless it is a delete that final results drop. The store's entry, if it has one, is
// deleted at the next commit's cut.
func (p *suppressProcessor[K, V]) evict(ctx ProcessorContext[K, change[V]]) error {
	bk, _ := p.order.DeleteMin()
	b, ok := p.keys[bk.key]
	if !ok {
		return fmt.Errorf("operator %s: internal error: its buffer lost the entry of a key", p.n.name)
	}
	delete(p.keys, bk.key)
	p.bytes -= b.size
	b.dirty = false
	if b.stored {
		p.gone = append(p.gone, bk.key)
	}
	e := &p.evicted
	*e = bufferEntry{headers: e.headers[:0]}
	if err := decodeBufferEntryInto(e, b.enc, false); err != nil {
		return fmt.Errorf("operator %s: a buffered entry: %w", p.n.name, err)
	}
	if !e.hasNew && p.cfg.final {
		return nil // safe to drop: a window that was never emitted needs no tombstone
	}
	key, err := p.ks.Deserialize([]byte(bk.key))
	if err != nil {
		return fmt.Errorf("deserializing a buffered key: %w", err)
	}
	var c change[V]
	if e.hasNew {
		if c.new, err = p.vs.Deserialize(e.new); err != nil {
			return fmt.Errorf("deserializing a buffered value: %w", err)
		}
		c.hasNew = true
	}
	if e.hasOld {
		if c.old, err = p.vs.Deserialize(e.old); err != nil {
			return fmt.Errorf("deserializing a buffered old value: %w", err)
		}
		c.hasOld = true
	}
	var headers []Header
	if len(e.headers) > 0 {
		headers = slices.Clone(e.headers) // the record's own: e's are reused
	}
	ctx.Forward(Record[K, change[V]]{Key: key, Value: c, Timestamp: msTime(e.ts), Headers: headers})
	return nil
}

// typeName is the name of type T, for error messages.
func typeName[T any]() string { return reflect.TypeFor[T]().String() }
