package kstream

import (
	"errors"
	"fmt"
	"time"

	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/store"
)

// RetainDuplicates makes a window store declared with [WindowStore] keep every value put
// for the same key and window start, each under its own sequence number, instead of
// replacing the window's value: Kafka Streams' retainDuplicates (the store of a
// stream-stream join). Fetches then return all of them, in the order they were put; a put
// of a value that serializes to null does nothing, and Delete removes every value of the
// window. Applies to [WindowStore] only.
func RetainDuplicates() StoreOption {
	return storeOpt{"RetainDuplicates", func(d *storeDef) { d.retainDups = true }}
}

// WindowStore declares a typed window store named name for the Processor API, as Kafka
// Streams' Stores.windowStoreBuilder(Stores.persistentWindowStore(name, retention,
// windowSize, retainDuplicates), ks, vs) does: pass it to [Process] with [WithStores], and
// reach it in the processor with [GetWindowStore].
//
// Each entry is a key, a window start and a value (see [store.WindowStore] for the
// operations: Put, Fetch, FetchRange, FetchKeyRange, FetchAll, All and their Backward
// forms). windowSize only sets the end of the windows that scans return (start plus
// windowSize). The store keeps a window for retention after its start, in stream time: the
// store's own, the largest window start put so far; a put of a window that has expired is
// dropped, reads never return one, and expired segments (of max(retention/2, 1 minute),
// Java's default) leave the store as a whole. retention must not be smaller than
// windowSize; both are whole milliseconds.
//
// The store is persistent (Pebble, under Config.StateDir) and logged to
// "<application.id>-<name>-changelog", a compact,delete topic retained for retention plus
// one day, in Kafka Streams' format (keys: serialized key, 8-byte window start, 4-byte
// sequence number), so that a restarted or moved task restores it; [InMemory],
// [WithoutChangelog] and [RetainDuplicates] change that. The store is not timestamped: its
// values are stored as vs serializes them, as in Java's windowStoreBuilder (not
// timestampedWindowStoreBuilder).
func WindowStore[K, V any](name string, ks serde.Serde[K], vs serde.Serde[V], retention, windowSize time.Duration, opts ...StoreOption) StoreBuilder {
	d := &storeDef{name: name, persistent: true, logged: true, accepts: []string{"RetainDuplicates"}}
	applyStoreOpts(d, opts)
	op := fmt.Sprintf("WindowStore %q", name)
	retMs, err := millis("the retention period", retention)
	if err == nil {
		var sizeMs int64
		sizeMs, err = millis("the window size", windowSize)
		if err == nil && sizeMs > retMs {
			// Stores.persistentWindowStore's message.
			err = fmt.Errorf("The retention period of the window store %s must be no smaller than its window size. Got size=[%d], retention=[%d]", name, sizeMs, retMs)
		}
	}
	if ks == nil || vs == nil {
		err = errors.Join(err, fmt.Errorf("key and value serdes are required: %w", ErrNoSerde))
	}
	o := store.WindowOptions{Retention: retention, WindowSize: windowSize, RetainDuplicates: d.retainDups}
	if err == nil {
		d.codec, err = store.NewWindowChangelog(o)
	}
	if err != nil {
		d.err = fmt.Errorf("%s: %w", op, err)
		d.typed = func(store.Backend) any { return d.err }
		return storeBuilder{d}
	}
	ks, vs = storeSerde(d, ks, true), storeSerde(d, vs, false)
	d.key, d.value = ks, vs
	d.query = newQueryCodec(WindowKind, ks, vs, false)
	d.typed = func(b store.Backend) any {
		ws, err := store.NewWindowStore(name, b, ks, vs, o)
		if err != nil {
			return err
		}
		return ws
	}
	return storeBuilder{d}
}

// SessionStore declares a typed session store named name for the Processor API, as Kafka
// Streams' Stores.sessionStoreBuilder(Stores.persistentSessionStore(name, retention), ks,
// vs) does: pass it to [Process] with [WithStores], and reach it in the processor with
// [GetSessionStore].
//
// Each entry is a key, a session window [start, end] and a value (see [store.SessionStore]
// for the operations: Put, Remove, FetchSession, FindSessions, Fetch, FetchKeyRange,
// FindSessionsKeyRange and their Backward forms). The store keeps a session for retention
// after its end, in stream time: the store's own, the largest session end written so far;
// a put of a session that has expired is dropped and reads never return one. retention is
// whole milliseconds.
//
// The store is persistent and logged to "<application.id>-<name>-changelog" (compact,delete,
// retained for retention plus one day, in Kafka Streams' format: serialized key, 8-byte
// session end, 8-byte session start) unless [InMemory] or [WithoutChangelog] say otherwise.
func SessionStore[K, V any](name string, ks serde.Serde[K], vs serde.Serde[V], retention time.Duration, opts ...StoreOption) StoreBuilder {
	d := &storeDef{name: name, persistent: true, logged: true}
	applyStoreOpts(d, opts)
	op := fmt.Sprintf("SessionStore %q", name)
	_, err := millis("the retention period", retention)
	if ks == nil || vs == nil {
		err = errors.Join(err, fmt.Errorf("key and value serdes are required: %w", ErrNoSerde))
	}
	o := store.SessionOptions{Retention: retention}
	if err == nil {
		d.codec, err = store.NewSessionChangelog(o)
	}
	if err != nil {
		d.err = fmt.Errorf("%s: %w", op, err)
		d.typed = func(store.Backend) any { return d.err }
		return storeBuilder{d}
	}
	ks, vs = storeSerde(d, ks, true), storeSerde(d, vs, false)
	d.key, d.value = ks, vs
	d.query = newQueryCodec(SessionKind, ks, vs, false)
	d.typed = func(b store.Backend) any {
		ss, err := store.NewSessionStore(name, b, ks, vs, o)
		if err != nil {
			return err
		}
		return ss
	}
	return storeBuilder{d}
}

// GetWindowStore returns the typed window store named name, which must have been declared
// with [WindowStore] and connected to the processor with [WithStores] (with the same key
// and value types). Call it in Init and keep the store: it is the task's for the life of
// the processor, used from the task's goroutine only. Its iterators must be closed.
func GetWindowStore[K, V any](ctx interface {
	Store(name string) (any, error)
}, name string) (*store.WindowStore[K, V], error) {
	s, err := ctx.Store(name)
	if err != nil {
		return nil, err
	}
	switch s := s.(type) {
	case *store.WindowStore[K, V]:
		return s, nil
	case error:
		return nil, fmt.Errorf("kstream: window store %q: %w", name, s)
	}
	return nil, fmt.Errorf("kstream: store %q is a %T, not a WindowStore of these key and value types", name, s)
}

// GetSessionStore returns the typed session store named name, which must have been
// declared with [SessionStore] and connected to the processor with [WithStores] (with the
// same key and value types). See [GetWindowStore].
func GetSessionStore[K, V any](ctx interface {
	Store(name string) (any, error)
}, name string) (*store.SessionStore[K, V], error) {
	s, err := ctx.Store(name)
	if err != nil {
		return nil, err
	}
	switch s := s.(type) {
	case *store.SessionStore[K, V]:
		return s, nil
	case error:
		return nil, fmt.Errorf("kstream: session store %q: %w", name, s)
	}
	return nil, fmt.Errorf("kstream: store %q is a %T, not a SessionStore of these key and value types", name, s)
}
