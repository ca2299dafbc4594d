package kstream

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/store"
)

// change is one update of a table row as it flows between table operators: the row's new
// value and, when the sending operator forwards old values, the value it replaced. An absent
// side is a Kafka null: hasNew false is a delete (a tombstone), hasOld false means the row
// did not exist or the old value is not sent. It corresponds to Kafka Streams' Change.
type change[V any] struct {
	new, old       V
	hasNew, hasOld bool
	// stale is Java's !Change.isLatest: the update is older than its key's latest version
	// in a versioned table (see [Versioned]).
	stale bool
}

// setNew sets the new value to v, or to absent when v is nil (a nil pointer, map, slice or
// interface: a null, as for Java's operators whose function returns null).
func (c *change[V]) setNew(v V) { c.new, c.hasNew = v, !isNil(v) }

// setOld is setNew for the old value.
func (c *change[V]) setOld(v V) { c.old, c.hasOld = v, !isNil(v) }

// withoutOld returns c without its old value unless sendOld, as Kafka Streams'
// TimestampedTupleForwarder forwards a change.
func (c change[V]) withoutOld(sendOld bool) change[V] {
	if !sendOld {
		var zero V
		c.old, c.hasOld = zero, false
	}
	return c
}

// isNil reports whether v is a nil pointer, map, slice or interface: the values that
// serde.JSON and serde.Nullable write as a Kafka null, and that table operators treat as one.
func isNil[T any](v T) bool {
	rv := reflect.ValueOf(&v).Elem()
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

// isZero reports whether v is the zero value of T.
func isZero[T any](v T) bool { return reflect.ValueOf(&v).Elem().IsZero() }

// nullValue reports whether r carries a Kafka null value: a tombstone or a nil value.
func nullValue[K, V any](r Record[K, V]) bool { return r.IsTombstone() || isNil(r.Value) }

// unixMs is t in Unix milliseconds, the unit of Kafka timestamps.
func unixMs(t time.Time) int64 { return t.UnixMilli() }

// changeSerde writes a change on a repartition topic (between a table's groupBy and its
// aggregation) in the format of Kafka Streams' ChangedSerializer, so that the topic reads the
// same as a Java application's:
//
//	old value only:  {old bytes}{0x00}
//	new value only:  {new bytes}{0x01}
//	both:            {varint len(new bytes)}{new bytes}{old bytes}{0x02}
//
// where the value bytes come from the inner serde and the varint is Kafka's zig-zag varint
// (ByteUtils.writeVarint; the same bytes as Go's binary.AppendVarint). A change with neither
// value is an error, as in Java. The deserializer also reads the flags 3, 4 and 5 of
// ChangedDeserializer (the same layouts with an is-latest byte before the flag), which
// versioned tables use.
type changeSerde[V any] struct{ inner serde.Serde[V] }

// WithContext passes ctx to the inner serde.
func (s changeSerde[V]) WithContext(ctx context.Context) serde.Serde[change[V]] {
	return changeSerde[V]{serde.WithContext(s.inner, ctx)}
}

// ForTopic binds the inner serde to topic, as Java's ChangedSerializer passes its topic on.
func (s changeSerde[V]) ForTopic(topic string, isKey bool) serde.Serde[change[V]] {
	return changeSerde[V]{serde.ForTopic(s.inner, topic, isKey)}
}

func (s changeSerde[V]) Serialize(c change[V]) ([]byte, error) {
	var nb, ob []byte
	var err error
	if c.hasNew {
		if nb, err = s.inner.Serialize(c.new); err != nil {
			return nil, err
		}
	}
	if c.hasOld {
		if ob, err = s.inner.Serialize(c.old); err != nil {
			return nil, err
		}
	}
	switch {
	case c.hasNew && c.hasOld:
		out := binary.AppendVarint(make([]byte, 0, binary.MaxVarintLen32+len(nb)+len(ob)+1), int64(len(nb)))
		out = append(append(append(out, nb...), ob...), 2)
		return out, nil
	case c.hasNew:
		return append(append(make([]byte, 0, len(nb)+1), nb...), 1), nil
	case c.hasOld:
		return append(append(make([]byte, 0, len(ob)+1), ob...), 0), nil
	}
	return nil, errors.New("kstream: a table change with neither a new nor an old value cannot be serialized")
}

func (s changeSerde[V]) Deserialize(b []byte) (change[V], error) {
	var c change[V]
	if len(b) == 0 {
		return c, errors.New("kstream: empty table change")
	}
	flag, body := b[len(b)-1], b[:len(b)-1]
	if flag >= 3 && flag <= 5 { // the same layouts as 0..2, with an is-latest byte
		if len(body) == 0 {
			return c, fmt.Errorf("kstream: table change with flag %d has no is-latest byte", flag)
		}
		body, flag = body[:len(body)-1], flag-3
	}
	var nb, ob []byte
	switch flag {
	case 0:
		ob = body
	case 1:
		nb = body
	case 2:
		n, k := binary.Varint(body)
		if k <= 0 || n < 0 || int64(len(body)-k) < n {
			return c, errors.New("kstream: table change: bad length of the new value")
		}
		nb, ob = body[k:k+int(n)], body[k+int(n):]
	default:
		return c, fmt.Errorf("kstream: table change: unknown encoding flag %d", flag)
	}
	var err error
	if nb != nil {
		if c.new, err = s.inner.Deserialize(nb); err != nil {
			return c, err
		}
		c.hasNew = true
	}
	if ob != nil {
		if c.old, err = s.inner.Deserialize(ob); err != nil {
			return c, err
		}
		c.hasOld = true
	}
	return c, nil
}

// tsValue is a value with its timestamp (Unix milliseconds), as a table's store keeps it
// (Kafka Streams' ValueAndTimestamp).
type tsValue[V any] struct {
	v  V
	ts int64
}

// tsSerde stores a tsValue as an 8-byte big-endian timestamp followed by the value's bytes,
// the format of Kafka Streams' timestamped stores (see runtime.StoreSpec.Timestamped).
type tsSerde[V any] struct{ inner serde.Serde[V] }

func (s tsSerde[V]) Serialize(v tsValue[V]) ([]byte, error) {
	b, err := s.inner.Serialize(v.v)
	if err != nil {
		return nil, err
	}
	return append(binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(b)), uint64(v.ts)), b...), nil
}

// AppendSerialize implements store.AppendSerializer: Serialize appended to dst, without
// allocating when the inner serde appends too.
func (s tsSerde[V]) AppendSerialize(dst []byte, v tsValue[V]) ([]byte, bool, error) {
	dst = binary.BigEndian.AppendUint64(dst, uint64(v.ts))
	if app, ok := s.inner.(store.AppendSerializer[V]); ok {
		out, _, err := app.AppendSerialize(dst, v.v)
		return out, false, err
	}
	b, err := s.inner.Serialize(v.v)
	return append(dst, b...), false, err
}

func (s tsSerde[V]) Deserialize(b []byte) (tsValue[V], error) {
	if len(b) < 8 {
		return tsValue[V]{}, fmt.Errorf("kstream: a table store value has %d bytes, fewer than its 8-byte timestamp", len(b))
	}
	v, err := s.inner.Deserialize(b[8:])
	return tsValue[V]{v: v, ts: int64(binary.BigEndian.Uint64(b))}, err
}

// tableKV is the typed store of a table.
type tableKV[K, V any] = store.KeyValueStore[K, tsValue[V]]

// tableStoreDef declares the timestamped store of a table.
func tableStoreDef[K, V any](name string, ks serde.Serde[K], vs serde.Serde[V], opts []StoreOption) *storeDef {
	d := &storeDef{name: name, persistent: true, logged: true, timestamped: true}
	applyStoreOpts(d, opts)
	ks, vs = storeSerde(d, ks, true), storeSerde(d, vs, false)
	d.key, d.value = ks, vs
	d.typed = func(b store.Backend) any { return store.NewKeyValueStore(name, b, ks, tsSerde[V]{vs}) }
	if d.query == nil {
		d.query = newQueryCodec(KeyValueKind, ks, vs, true)
	}
	return d
}

// taskTableStore returns task t's instance of the table store named name.
func taskTableStore[K, V any](t *task, name string) (*tableKV[K, V], error) {
	s, ok := t.stores[name].(*tableKV[K, V])
	if !ok {
		return nil, fmt.Errorf("kstream: internal error: task %s has no table store %q of these types (it has a %T)", t.id, name, t.stores[name])
	}
	return s, nil
}

// getTS reads k from a table store.
func getTS[K, V any](st *tableKV[K, V], k K) (v V, ts int64, ok bool, err error) {
	tv, ok, err := st.Get(k)
	return tv.v, tv.ts, ok, err
}

// putTS writes k = v with timestamp ts to a table store, or deletes k when !present.
func putTS[K, V any](st *tableKV[K, V], k K, v V, present bool, ts int64) error {
	if !present {
		return st.Delete(k)
	}
	return st.Put(k, tsValue[V]{v: v, ts: ts})
}

// getTSSerialized is getTS of the key whose serialized form is kb.
func getTSSerialized[K, V any](st *tableKV[K, V], kb []byte) (v V, ts int64, ok bool, err error) {
	tv, ok, err := st.GetSerialized(kb)
	return tv.v, tv.ts, ok, err
}

// putTSSerialized is putTS to the key whose serialized form is kb.
func putTSSerialized[K, V any](st *tableKV[K, V], kb []byte, v V, present bool, ts int64) error {
	if !present {
		return st.DeleteSerialized(kb)
	}
	return st.PutSerialized(kb, tsValue[V]{v: v, ts: ts})
}

// valueGetter reads a table's current value of a key with its timestamp: Kafka Streams'
// KTableValueGetter. A table derived without a store of its own (a filter, a mapValues, a
// join) reads through to the stores of its parents and applies its function.
type valueGetter[K, V any] func(k K) (v V, ts int64, ok bool, err error)

// storeGetter is the value getter of a table kept in the store named name.
func storeGetter[K, V any](name string) func(t *task) (valueGetter[K, V], error) {
	return func(t *task) (valueGetter[K, V], error) {
		st, err := taskTableStore[K, V](t, name)
		if err != nil {
			return nil, err
		}
		return func(k K) (V, int64, bool, error) { return getTS(st, k) }, nil
	}
}

// msTime is the time of a Kafka timestamp in Unix milliseconds.
func msTime(ms int64) time.Time { return time.UnixMilli(ms) }
