package kstream

import (
	"fmt"
	"slices"
	"time"

	"github.com/kstream-go/kstream/serde"
)

// ReadOnlyKeyValueStore reads a key-value store of a running application, over the
// partitions this instance hosts: Kafka Streams' ReadOnlyKeyValueStore as returned by
// KafkaStreams.store. Get reads the key's partition; scans merge every hosted partition (or
// those of [QueryPartitions]) in the order of the serialized keys. Every call checks where
// the partitions are hosted now, and fails with a [StoreUnavailableError] for a partition
// that is not (see [App.KeyMetadata] for where to ask instead). Safe for concurrent use.
type ReadOnlyKeyValueStore[K, V any] struct {
	raw *RawStore
	ks  serde.Serde[K]
	vs  serde.Serde[V]
}

// QueryStore returns the key-value store named name of a for reading; K and V must be the
// store's key and value types (those of its serdes). A versioned store is read as its
// latest values (Get only).
func QueryStore[K, V any](a *App, name string, opts ...QueryOption) (*ReadOnlyKeyValueStore[K, V], error) {
	raw, err := a.RawStore(name, opts...)
	if err != nil {
		return nil, err
	}
	if k := raw.d.query.kind; k != KeyValueKind && k != VersionedKind {
		return nil, fmt.Errorf("kstream: store %q is a %s store, not a key-value store", name, k)
	}
	ks, vs, err := typedSerdes[K, V](raw.d)
	if err != nil {
		return nil, err
	}
	return &ReadOnlyKeyValueStore[K, V]{raw: raw, ks: ks, vs: vs}, nil
}

// typedSerdes returns the serdes of d as serdes of K and V, or an error naming the types.
func typedSerdes[K, V any](d *storeDef) (serde.Serde[K], serde.Serde[V], error) {
	ks, ok := d.query.keySerde.(typedSerde[K])
	if !ok {
		var k K
		return nil, nil, fmt.Errorf("kstream: store %q: its keys are not of type %T (its key serde is a %T)", d.name, k, d.query.keySerde)
	}
	vs, ok := d.query.valueSerde.(typedSerde[V])
	if !ok {
		var v V
		return nil, nil, fmt.Errorf("kstream: store %q: its values are not of type %T (its value serde is a %T)", d.name, v, d.query.valueSerde)
	}
	return ks.Serde, vs.Serde, nil
}

func (s *ReadOnlyKeyValueStore[K, V]) key(k K) ([]byte, error) {
	kb, err := s.ks.Serialize(k)
	if err != nil {
		return nil, fmt.Errorf("kstream: store %q: serializing key: %w", s.raw.d.name, err)
	}
	if kb == nil {
		return nil, fmt.Errorf("kstream: store %q: a null key", s.raw.d.name)
	}
	return kb, nil
}

func (s *ReadOnlyKeyValueStore[K, V]) value(b []byte) (V, error) {
	v, err := s.vs.Deserialize(b)
	if err != nil {
		return v, fmt.Errorf("kstream: store %q: deserializing a value: %w", s.raw.d.name, err)
	}
	return v, nil
}

// Get returns the value of k; ok is false when k is absent.
func (s *ReadOnlyKeyValueStore[K, V]) Get(k K) (v V, ok bool, err error) {
	kb, err := s.key(k)
	if err != nil {
		return v, false, err
	}
	rv, ok, err := s.raw.Get(kb)
	if err != nil || !ok {
		return v, false, err
	}
	v, err = s.value(rv.Value)
	return v, err == nil, err
}

// scan decodes raw entries for fn.
func (s *ReadOnlyKeyValueStore[K, V]) scan(run func(func(RawEntry) bool) error, fn func(K, V) bool) error {
	var derr error
	err := run(func(e RawEntry) bool {
		k, err := s.ks.Deserialize(e.Key)
		if err != nil {
			derr = fmt.Errorf("kstream: store %q partition %d: deserializing a key: %w", s.raw.d.name, e.Partition, err)
			return false
		}
		v, err := s.value(e.Value)
		if err != nil {
			derr = err
			return false
		}
		return fn(k, v)
	})
	if err != nil {
		return err
	}
	return derr
}

// Range calls fn for the keys from from to to, both included (as Kafka Streams' range), in
// the order of their serialized forms, until fn returns false.
func (s *ReadOnlyKeyValueStore[K, V]) Range(from, to K, fn func(K, V) bool) error {
	return s.rangeScan(from, to, false, fn)
}

// ReverseRange is Range in descending order.
func (s *ReadOnlyKeyValueStore[K, V]) ReverseRange(from, to K, fn func(K, V) bool) error {
	return s.rangeScan(from, to, true, fn)
}

func (s *ReadOnlyKeyValueStore[K, V]) rangeScan(from, to K, reverse bool, fn func(K, V) bool) error {
	fb, err := s.key(from)
	if err != nil {
		return err
	}
	tb, err := s.key(to)
	if err != nil {
		return err
	}
	// The bound is inclusive: the smallest key after tb is tb followed by a zero byte.
	upper := append(slices.Clip(tb), 0)
	return s.scan(func(f func(RawEntry) bool) error { return s.raw.Scan(fb, upper, reverse, f) }, fn)
}

// All calls fn for every key, in the order of their serialized forms, until fn returns
// false.
func (s *ReadOnlyKeyValueStore[K, V]) All(fn func(K, V) bool) error {
	return s.scan(func(f func(RawEntry) bool) error { return s.raw.Scan(nil, nil, false, f) }, fn)
}

// ReverseAll is All in descending order.
func (s *ReadOnlyKeyValueStore[K, V]) ReverseAll(fn func(K, V) bool) error {
	return s.scan(func(f func(RawEntry) bool) error { return s.raw.Scan(nil, nil, true, f) }, fn)
}

// PrefixScan calls fn for the keys whose serialized form starts with prefix (for string
// keys, the keys starting with that string), in order, until fn returns false. Kafka
// Streams' prefixScan(prefix, prefixKeySerializer) with the prefix already serialized.
func (s *ReadOnlyKeyValueStore[K, V]) PrefixScan(prefix []byte, fn func(K, V) bool) error {
	return s.scan(func(f func(RawEntry) bool) error { return s.raw.PrefixScan(prefix, f) }, fn)
}

// ApproximateNumEntries estimates the number of keys (exact for memory stores and small
// Pebble stores).
func (s *ReadOnlyKeyValueStore[K, V]) ApproximateNumEntries() (int64, error) {
	return s.raw.ApproximateCount()
}

// ReadOnlyWindowStore reads a window store (of a windowed aggregation) of a running
// application: Kafka Streams' ReadOnlyWindowStore. Safe for concurrent use.
type ReadOnlyWindowStore[K, V any] struct {
	raw *RawStore
	ks  serde.Serde[K]
	vs  serde.Serde[V]
}

// QueryWindowStore returns the window store named name of a for reading.
func QueryWindowStore[K, V any](a *App, name string, opts ...QueryOption) (*ReadOnlyWindowStore[K, V], error) {
	raw, err := a.RawStore(name, opts...)
	if err != nil {
		return nil, err
	}
	if k := raw.d.query.kind; k != WindowKind {
		return nil, fmt.Errorf("kstream: store %q is a %s store, not a window store", name, k)
	}
	ks, vs, err := typedSerdes[K, V](raw.d)
	if err != nil {
		return nil, err
	}
	return &ReadOnlyWindowStore[K, V]{raw: raw, ks: ks, vs: vs}, nil
}

// windows decodes raw window entries for fn.
func windowScan[K, V any](name string, ks serde.Serde[K], vs serde.Serde[V], run func(func(RawWindowEntry) bool) error, fn func(serde.Windowed[K], V) bool) error {
	var derr error
	err := run(func(e RawWindowEntry) bool {
		k, err := ks.Deserialize(e.Key)
		if err != nil {
			derr = fmt.Errorf("kstream: store %q partition %d: deserializing a key: %w", name, e.Partition, err)
			return false
		}
		v, err := vs.Deserialize(e.Value)
		if err != nil {
			derr = fmt.Errorf("kstream: store %q partition %d: deserializing a value: %w", name, e.Partition, err)
			return false
		}
		return fn(serde.Windowed[K]{Key: k, Start: e.Start, End: e.End}, v)
	})
	if err != nil {
		return err
	}
	return derr
}

// Fetch calls fn for the windows of k that start in [from, to] (both included), by start
// time, until fn returns false: Kafka Streams' fetch(key, timeFrom, timeTo).
func (s *ReadOnlyWindowStore[K, V]) Fetch(k K, from, to time.Time, fn func(serde.Windowed[K], V) bool) error {
	kb, err := s.ks.Serialize(k)
	if err != nil || kb == nil {
		return fmt.Errorf("kstream: store %q: serializing key: %w", s.raw.d.name, errOrNull(err))
	}
	return windowScan(s.raw.d.name, s.ks, s.vs, func(f func(RawWindowEntry) bool) error { return s.raw.WindowFetch(kb, from, to, f) }, fn)
}

// FetchAll calls fn for every window of every key that starts in [from, to], partition by
// partition, until fn returns false: Kafka Streams' fetchAll(timeFrom, timeTo).
func (s *ReadOnlyWindowStore[K, V]) FetchAll(from, to time.Time, fn func(serde.Windowed[K], V) bool) error {
	return windowScan(s.raw.d.name, s.ks, s.vs, func(f func(RawWindowEntry) bool) error { return s.raw.WindowFetchAll(from, to, f) }, fn)
}

// ReadOnlySessionStore reads a session store (of a session-windowed aggregation) of a
// running application: Kafka Streams' ReadOnlySessionStore. Safe for concurrent use.
type ReadOnlySessionStore[K, V any] struct {
	raw *RawStore
	ks  serde.Serde[K]
	vs  serde.Serde[V]
}

// QuerySessionStore returns the session store named name of a for reading.
func QuerySessionStore[K, V any](a *App, name string, opts ...QueryOption) (*ReadOnlySessionStore[K, V], error) {
	raw, err := a.RawStore(name, opts...)
	if err != nil {
		return nil, err
	}
	if k := raw.d.query.kind; k != SessionKind {
		return nil, fmt.Errorf("kstream: store %q is a %s store, not a session store", name, k)
	}
	ks, vs, err := typedSerdes[K, V](raw.d)
	if err != nil {
		return nil, err
	}
	return &ReadOnlySessionStore[K, V]{raw: raw, ks: ks, vs: vs}, nil
}

// Fetch calls fn for every session of k, by end then start time, until fn returns false:
// Kafka Streams' ReadOnlySessionStore.fetch(key).
func (s *ReadOnlySessionStore[K, V]) Fetch(k K, fn func(serde.Windowed[K], V) bool) error {
	kb, err := s.ks.Serialize(k)
	if err != nil || kb == nil {
		return fmt.Errorf("kstream: store %q: serializing key: %w", s.raw.d.name, errOrNull(err))
	}
	return windowScan(s.raw.d.name, s.ks, s.vs, func(f func(RawWindowEntry) bool) error { return s.raw.SessionFetch(kb, f) }, fn)
}

func errOrNull(err error) error {
	if err != nil {
		return err
	}
	return errNullKey
}

var errNullKey = fmt.Errorf("a null key")
