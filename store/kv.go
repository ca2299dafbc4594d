package store

import (
	"errors"
	"fmt"

	"github.com/kstream-go/kstream/serde"
)

// KeyValueStore is a typed key-value store over a [Backend]. Keys are ordered by their
// serialized bytes. It is used from one goroutine at a time (its task's).
type KeyValueStore[K, V any] struct {
	name string
	b    Backend
	ks   serde.Serde[K]
	vs   serde.Serde[V]
	// view is b when it can return values without copying them (a Buffer): Get
	// deserializes at once, and a serde keeps no reference to its input.
	view viewGetter
	// app is vs when it appends its bytes to a buffer: Put then serializes into vbuf,
	// which the backend copies.
	app  AppendSerializer[V]
	vbuf []byte
	// kapp is ks when it appends its bytes to a buffer: Get, Put and Delete then serialize
	// the key into kbuf, which the backend does not keep (see [Backend]).
	kapp AppendSerializer[K]
	kbuf []byte
}

// AppendSerializer is implemented by a serde that can append a value's bytes to a buffer,
// so that a store writing them (and copying them, as a [Backend] does) needs no allocation
// of its own. The built-in serdes of package serde for strings and integers implement it.
// A [KeyValueStore] uses it for its values; kstream's aggregations use it for their keys.
type AppendSerializer[T any] interface {
	// AppendSerialize appends the bytes Serialize would return for v to dst and returns
	// the extended slice; isNull reports a Kafka null (Serialize returning nil), which
	// appends nothing.
	AppendSerialize(dst []byte, v T) (out []byte, isNull bool, err error)
}

// NewKeyValueStore returns a typed view of b. name appears in errors.
func NewKeyValueStore[K, V any](name string, b Backend, ks serde.Serde[K], vs serde.Serde[V]) *KeyValueStore[K, V] {
	s := &KeyValueStore[K, V]{name: name, b: b, ks: ks, vs: vs}
	s.view, _ = b.(viewGetter)
	s.app, _ = vs.(AppendSerializer[V])
	s.kapp, _ = ks.(AppendSerializer[K])
	return s
}

// Name returns the store's name.
func (s *KeyValueStore[K, V]) Name() string { return s.name }

// key serializes k for a single read or write: into kbuf when the key serde appends (the
// bytes are valid until the next call), else with Serialize.
func (s *KeyValueStore[K, V]) key(k K) ([]byte, error) {
	if s.kapp == nil {
		return s.ownKey(k)
	}
	out, isNull, err := s.kapp.AppendSerialize(s.kbuf[:0], k)
	if err != nil {
		return nil, fmt.Errorf("store %s: serializing key: %w", s.name, err)
	}
	s.kbuf = out
	if isNull {
		return nil, nil // as Serialize returns it
	}
	if out == nil {
		out = []byte{} // an empty key (the buffer not allocated yet) is not a null one
	}
	return out, nil
}

// ownKey serializes k into bytes of its own, for the bounds of an iterator, which may keep
// them as long as it is open.
func (s *KeyValueStore[K, V]) ownKey(k K) ([]byte, error) {
	b, err := s.ks.Serialize(k)
	if err != nil {
		return nil, fmt.Errorf("store %s: serializing key: %w", s.name, err)
	}
	return b, nil
}

// Get returns the value of k; ok is false if k is absent.
func (s *KeyValueStore[K, V]) Get(k K) (v V, ok bool, err error) {
	kb, err := s.key(k)
	if err != nil {
		return v, false, err
	}
	return s.GetSerialized(kb)
}

// GetSerialized is [KeyValueStore.Get] of the key whose serialized form is kb: a caller
// that already serialized the key (to check it, or to read and then write it) saves doing
// it again.
func (s *KeyValueStore[K, V]) GetSerialized(kb []byte) (v V, ok bool, err error) {
	var vb []byte
	if s.view != nil {
		vb, ok, err = s.view.getView(kb)
	} else {
		vb, ok, err = s.b.Get(kb)
	}
	if err != nil || !ok {
		return v, false, err
	}
	v, err = s.vs.Deserialize(vb)
	if err != nil {
		return v, false, fmt.Errorf("store %s: deserializing value: %w", s.name, err)
	}
	return v, true, nil
}

// GetSerializedView returns the stored bytes of the key whose serialized form is kb,
// without copying them when the backend can (a [Buffer]): they are then the backend's,
// valid until the next call on the store or its backend, and must not be modified. It is
// for an operator that reads stored bytes as they are (the foreign-key join answers with a
// table's serialized value) and is done with them before it touches the store again.
func (s *KeyValueStore[K, V]) GetSerializedView(kb []byte) ([]byte, bool, error) {
	if s.view != nil {
		return s.view.getView(kb)
	}
	return s.b.Get(kb)
}

// Put writes k = v.
func (s *KeyValueStore[K, V]) Put(k K, v V) error {
	kb, err := s.key(k)
	if err != nil {
		return err
	}
	return s.PutSerialized(kb, v)
}

// PutSerialized is [KeyValueStore.Put] to the key whose serialized form is kb (see
// [KeyValueStore.GetSerialized]).
func (s *KeyValueStore[K, V]) PutSerialized(kb []byte, v V) error {
	var vb []byte
	if s.app != nil {
		out, isNull, err := s.app.AppendSerialize(s.vbuf[:0], v)
		if err != nil {
			return fmt.Errorf("store %s: serializing value: %w", s.name, err)
		}
		if !isNull {
			s.vbuf, vb = out, out
		}
	} else {
		var err error
		if vb, err = s.vs.Serialize(v); err != nil {
			return fmt.Errorf("store %s: serializing value: %w", s.name, err)
		}
	}
	if vb == nil {
		vb = []byte{}
	}
	return s.b.Set(kb, vb)
}

// PutIfAbsent writes k = v unless k has a value, and returns the value k had.
func (s *KeyValueStore[K, V]) PutIfAbsent(k K, v V) (old V, had bool, err error) {
	old, had, err = s.Get(k)
	if err != nil || had {
		return old, had, err
	}
	return old, false, s.Put(k, v)
}

// Delete removes k.
func (s *KeyValueStore[K, V]) Delete(k K) error {
	kb, err := s.key(k)
	if err != nil {
		return err
	}
	return s.b.Delete(kb)
}

// DeleteSerialized is [KeyValueStore.Delete] of the key whose serialized form is kb (see
// [KeyValueStore.GetSerialized]).
func (s *KeyValueStore[K, V]) DeleteSerialized(kb []byte) error { return s.b.Delete(kb) }

// Range iterates over keys in [from, to) in the order of their serialized bytes.
func (s *KeyValueStore[K, V]) Range(from, to K) (*KeyValueIterator[K, V], error) {
	fb, tb, err := s.bounds(from, to)
	if err != nil {
		return nil, err
	}
	return s.iter(s.b.Range(fb, tb))
}

// ReverseRange iterates over keys in [from, to) in descending order.
func (s *KeyValueStore[K, V]) ReverseRange(from, to K) (*KeyValueIterator[K, V], error) {
	fb, tb, err := s.bounds(from, to)
	if err != nil {
		return nil, err
	}
	return s.iter(s.b.ReverseRange(fb, tb))
}

func (s *KeyValueStore[K, V]) bounds(from, to K) (fb, tb []byte, err error) {
	if fb, err = s.ownKey(from); err != nil {
		return nil, nil, err
	}
	tb, err = s.ownKey(to)
	return fb, tb, err
}

// All iterates over every key in ascending order.
func (s *KeyValueStore[K, V]) All() (*KeyValueIterator[K, V], error) {
	return s.iter(s.b.Range(nil, nil))
}

// PrefixScan iterates over the keys whose serialized form starts with the serialized prefix
// (for example every string key starting with "user-").
func (s *KeyValueStore[K, V]) PrefixScan(prefix K) (*KeyValueIterator[K, V], error) {
	pb, err := s.ownKey(prefix)
	if err != nil {
		return nil, err
	}
	return s.iter(s.b.PrefixScan(pb))
}

// ApproximateNumEntries estimates the number of keys.
func (s *KeyValueStore[K, V]) ApproximateNumEntries() (int64, error) { return s.b.ApproximateCount() }

func (s *KeyValueStore[K, V]) iter(it Iterator, err error) (*KeyValueIterator[K, V], error) {
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", s.name, err)
	}
	return &KeyValueIterator[K, V]{s: s, it: it}, nil
}

// KeyValueIterator walks a typed store. Call Next before Key and Value, and Close when done;
// a decoding or storage error ends the iteration and is returned by Err.
type KeyValueIterator[K, V any] struct {
	s   *KeyValueStore[K, V]
	it  Iterator
	k   K
	v   V
	err error
}

// Next advances to the next key; it returns false at the end or on an error.
func (i *KeyValueIterator[K, V]) Next() bool {
	if i.err != nil || !i.it.Next() {
		return false
	}
	k, err := i.s.ks.Deserialize(i.it.Key())
	if err != nil {
		i.err = fmt.Errorf("store %s: deserializing key: %w", i.s.name, err)
		return false
	}
	v, err := i.s.vs.Deserialize(i.it.Value())
	if err != nil {
		i.err = fmt.Errorf("store %s: deserializing value: %w", i.s.name, err)
		return false
	}
	i.k, i.v = k, v
	return true
}

// Key returns the current key.
func (i *KeyValueIterator[K, V]) Key() K { return i.k }

// Value returns the current value.
func (i *KeyValueIterator[K, V]) Value() V { return i.v }

// Err returns the error that ended the iteration, if any.
func (i *KeyValueIterator[K, V]) Err() error { return errors.Join(i.err, i.it.Err()) }

// Close releases the iterator.
func (i *KeyValueIterator[K, V]) Close() error { return i.it.Close() }
