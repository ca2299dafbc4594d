package registry

import (
	"context"
	"fmt"
	"sync"
)

// flight is a cache whose misses run one load per key at a time: callers that miss while a
// load of their key is under way wait for its result. A failed load is not kept.
type flight[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]*flightEntry[V]
}

type flightEntry[V any] struct {
	done chan struct{}
	v    V
	err  error
}

func (f *flight[K, V]) get(ctx context.Context, key K, load func() (V, error)) (V, error) {
	f.mu.Lock()
	if f.m == nil {
		f.m = make(map[K]*flightEntry[V])
	}
	e, ok := f.m[key]
	if !ok {
		e = &flightEntry[V]{done: make(chan struct{})}
		f.m[key] = e
		f.mu.Unlock()
		e.v, e.err = load()
		if e.err != nil {
			f.mu.Lock()
			delete(f.m, key)
			f.mu.Unlock()
		}
		close(e.done)
		return e.v, e.err
	}
	f.mu.Unlock()
	select {
	case <-e.done:
		return e.v, e.err
	case <-ctx.Done():
		var zero V
		return zero, fmt.Errorf("%w: gave up waiting for another request's answer: %w", ErrRegistryUnavailable, ctx.Err())
	}
}

// put stores v under key unless a value or a load is there already.
func (f *flight[K, V]) put(key K, v V) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = make(map[K]*flightEntry[V])
	}
	if _, ok := f.m[key]; ok {
		return
	}
	e := &flightEntry[V]{done: make(chan struct{}), v: v}
	close(e.done)
	f.m[key] = e
}
