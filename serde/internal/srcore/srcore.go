// Package srcore holds the machinery that the Schema Registry serdes (packages serde/avro,
// serde/protobuf and serde/jsonschema) share and that is no part of their API: lazily
// resolved values that are not kept when the registry was unavailable, and per-schema-id
// caches that readers look up without locking.
package srcore

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/kstream-go/kstream/serde/registry"
)

// Lazy is a value computed on first use and kept, with its error, unless the error wraps
// registry.ErrRegistryUnavailable: then the next use computes it again.
type Lazy[V any] struct {
	mu sync.Mutex
	r  atomic.Pointer[result[V]]
}

type result[V any] struct {
	v   V
	err error
}

// Get returns the kept value and error, or computes them with f.
func (l *Lazy[V]) Get(f func() (V, error)) (V, error) {
	if r := l.r.Load(); r != nil {
		return r.v, r.err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if r := l.r.Load(); r != nil {
		return r.v, r.err
	}
	v, err := f()
	if err == nil || !errors.Is(err, registry.ErrRegistryUnavailable) {
		l.r.Store(&result[V]{v, err})
	}
	return v, err
}

// Set keeps v, unless a value is kept already.
func (l *Lazy[V]) Set(v V) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.r.Load() == nil {
		l.r.Store(&result[V]{v: v})
	}
}

// ByID caches a value per schema id, with its error unless the error wraps
// registry.ErrRegistryUnavailable or registry.ErrUnknownSchemaID (an id may become known).
// Hits take no lock.
type ByID[V any] struct {
	mu sync.Mutex
	m  atomic.Pointer[map[int]result[V]]
}

// Get returns the value for id, computing it with f on a miss.
func (c *ByID[V]) Get(id int, f func(id int) (V, error)) (V, error) {
	if m := c.m.Load(); m != nil {
		if r, ok := (*m)[id]; ok {
			return r.v, r.err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil {
		if r, ok := (*old)[id]; ok {
			return r.v, r.err
		}
	}
	v, err := f(id)
	if err != nil && (errors.Is(err, registry.ErrRegistryUnavailable) || errors.Is(err, registry.ErrUnknownSchemaID)) {
		return v, err
	}
	m := make(map[int]result[V], 1+lenOf(old))
	if old != nil {
		for k, r := range *old {
			m[k] = r
		}
	}
	m[id] = result[V]{v, err}
	c.m.Store(&m)
	return v, err
}

func lenOf[V any](m *map[int]result[V]) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

// Binding is the topic a serde is bound to by ForTopic, if any.
type Binding struct {
	Bound bool
	Topic string
	IsKey bool
}

// Subject returns the subject the strategy names for the binding and record name. An
// unbound serde with a strategy that needs a topic gets an error wrapping
// registry.ErrUnbound.
func (b Binding) Subject(s registry.SubjectNameStrategy, recordName string) (string, error) {
	if !b.Bound && s.NeedsTopic() {
		return "", fmt.Errorf("%w: the %v subject name strategy names the subject after the topic: "+
			"bind the serde with ForTopic, or use RecordName", registry.ErrUnbound, s)
	}
	return s.Subject(b.Topic, b.IsKey, recordName)
}

// Nilable reports whether T's values can be nil (pointers, maps, slices, interfaces).
func Nilable[T any]() bool {
	switch reflect.TypeFor[T]().Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Interface:
		return true
	}
	return false
}

// IsNil reports whether v, of a nilable type, is nil.
func IsNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Interface:
		return rv.IsNil()
	}
	return false
}
