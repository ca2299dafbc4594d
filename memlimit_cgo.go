//go:build cgo

package kstream

// pebbleWithCgo: with cgo, Pebble allocates its block cache and memtables with C's malloc
// (its internal/manual package), outside the Go heap.
const pebbleWithCgo = true
