// Package store defines kstream's state stores: a small bytes-level backend interface that
// storage engines implement (store/memory, store/pebble), and typed key-value stores over it.
//
// A [DB] is one storage engine instance per process. It holds the data of every store
// partition the process runs, each in its own namespace (store name, partition), so that one
// engine's memory budget serves every task. A [Backend] is one namespace.
//
// Each namespace also keeps a checkpoint: the changelog offset up to which its data is
// complete. A [Batch] writes data and the new checkpoint atomically, so after a crash the
// data is exactly as of the checkpoint, never ahead of it or behind it.
//
// Keys are ordered by their bytes (bytewise lexicographic), as in Kafka Streams' RocksDB
// stores; typed range queries therefore follow the order of the serialized keys.
//
// Over a Backend, [KeyValueStore] is a typed key-value store, and [WindowStore] and
// [SessionStore] are Kafka Streams' window and session stores: entries in time segments that
// expire with the observed stream time, each expired segment leaving with one
// [Backend.DeleteRange] (see segmented.go for their key layout). Their backend keys are not
// their changelog keys: a [ChangelogCodec] ([NewWindowChangelog], [NewSessionChangelog]) maps
// one to the other, so that their changelogs are byte for byte Kafka Streams' and can be
// restored from.
package store

import "errors"

// ErrClosed is returned by operations on a closed DB, backend or iterator.
var ErrClosed = errors.New("store: closed")

// NoCheckpoint is the checkpoint of a namespace that has never been checkpointed.
const NoCheckpoint int64 = -1

// DB is a storage engine holding many store partitions. It is safe for concurrent use;
// distinct namespaces may be used from distinct goroutines at once.
type DB interface {
	// Open returns the backend of one store partition, creating it empty if it does not
	// exist. Opening the same namespace twice returns backends over the same data.
	Open(name string, partition int32) (Backend, error)
	// Drop deletes every key and the checkpoint of one store partition.
	Drop(name string, partition int32) error
	// Close releases the engine. Backends and iterators must not be used afterwards.
	Close() error
}

// Syncer is implemented by a [DB] whose commits can be buffered in the process (Pebble's
// write-ahead log keeps its last partial block in memory until a sync): Sync makes every
// commit so far durable, so that even a killed process keeps them.
type Syncer interface {
	Sync() error
}

// Backend is one store partition: an ordered map of byte keys to byte values with a
// checkpoint. Its methods may be called from one goroutine at a time (the task's).
//
// Slices passed in may be reused by the caller after the call returns. Slices returned by
// Get are owned by the caller; slices returned by an iterator are valid until its next
// call of Next or Close.
//
// A store has no null keys: a nil key passed in is the empty key, the same as an empty
// slice, and the empty key is one key like any other (a changelog writes it as an empty
// key, never a null one). Only the bounds of Range, ReverseRange and DeleteRange give nil
// a meaning of its own (unbounded).
type Backend interface {
	// Get returns the value of key; ok is false when the key is absent. The caller may
	// reuse key once it returns.
	Get(key []byte) (value []byte, ok bool, err error)
	// Set writes one key. A nil value is stored as an empty value (use Delete to remove).
	// Set copies key and value: the caller may reuse both once it returns (the typed stores
	// and the FK join's subscription store write from reused buffers).
	Set(key, value []byte) error
	// Delete removes one key; deleting an absent key is not an error. The caller may reuse
	// key once it returns.
	Delete(key []byte) error
	// DeleteRange removes every key in [from, to); a nil bound is unbounded, and an empty
	// range (from >= to) removes nothing. Its cost does not grow with the number of keys
	// it removes in a persistent engine (Pebble writes one range tombstone); the memory
	// engine removes the keys one by one. Window and session stores drop expired segments
	// with it.
	DeleteRange(from, to []byte) error
	// Range iterates over keys in [from, to) in ascending order; a nil bound is unbounded.
	Range(from, to []byte) (Iterator, error)
	// ReverseRange iterates over keys in [from, to) in descending order.
	ReverseRange(from, to []byte) (Iterator, error)
	// PrefixScan iterates in ascending order over the keys that start with prefix.
	PrefixScan(prefix []byte) (Iterator, error)
	// NewBatch returns an empty batch of writes to this backend.
	NewBatch() Batch
	// ApproximateCount estimates the number of keys (exact for the memory backend).
	ApproximateCount() (int64, error)
	// Checkpoint returns the offset recorded by the last committed batch, or NoCheckpoint.
	Checkpoint() (int64, error)
}

// Batch collects writes that Commit applies atomically, together with a new checkpoint:
// after Commit either all of them are visible (and durable, for a persistent engine) or,
// after a crash, none. Reads through the backend do not see a batch before Commit.
type Batch interface {
	// Set adds a write of key = value (copied).
	Set(key, value []byte)
	// Delete adds a removal of key; writes apply in the order they were added.
	Delete(key []byte)
	// DeleteRange adds a removal of every key in [from, to) (bounds as in
	// [Backend.DeleteRange], copied). It applies in order with the other writes: it removes
	// the keys the batch set before it, not those it sets after it.
	DeleteRange(from, to []byte)
	// SetCheckpoint records offset as the backend's checkpoint when the batch commits.
	SetCheckpoint(offset int64)
	// Len is the number of writes in the batch (a range deletion counts as one; the
	// checkpoint is not counted).
	Len() int
	// Commit applies the batch. The batch is empty afterwards and may be reused.
	Commit() error
	// Reset discards the batch's writes and checkpoint.
	Reset()
}

// Iterator walks keys in order over a snapshot taken when it was created: writes made while
// it is open are not seen and never disturb it. Call Next before the first Key, and Close
// when done (closing twice is harmless); Err reports the error that ended the iteration
// early, if any: iteration never just stops on an error.
type Iterator interface {
	// Next advances to the next key; it returns false at the end or on an error.
	Next() bool
	// Key is the current key, valid until the next Next or Close. It is never nil while
	// the iterator is on a key: the empty key is an empty slice (a store has no null keys).
	Key() []byte
	// Value is the current value, valid until the next Next or Close; an empty value is
	// an empty slice, not nil.
	Value() []byte
	// Err returns the error that ended the iteration, if any.
	Err() error
	// Close releases the iterator.
	Close() error
}
