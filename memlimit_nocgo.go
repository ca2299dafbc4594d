//go:build !cgo

package kstream

// pebbleWithCgo: without cgo, Pebble allocates its block cache and memtables on the Go
// heap (its internal/manual package falls back to make).
const pebbleWithCgo = false
