package runtime

import (
	"cmp"
	"sync/atomic"
)

// CacheBudget is an instance's one budget for the heap of its caches, as Kafka Streams'
// statestore.cache.max.bytes is one budget for the caches of its stores, which hold both
// the updates not yet forwarded and the entries read. Two kinds of caches draw on it:
//
//   - the record caches of the DSL's tables (the kstream package's Config.CacheMaxBytes),
//     which hold back updates not yet forwarded: together at most the record budget, so
//     that when a table forwards depends on that budget alone, as in Kafka Streams;
//   - the read caches of the store partitions (Config.StoreCacheBytes), which get the
//     rest: the whole budget, read + record, less what the record caches hold now,
//     divided among them: ReadShare is the equal share, which a cache's weight scales
//     (Runtime.weighStoreCachesLocked: more to the stores read more).
//
// Read and record caches together thus stay within read + record bytes, what the record
// caches do not use is read cache, and the equal share (ReadShare) never falls below the
// read budget alone divided among the read caches (the record caches hold at most the
// record budget), which is what it was before the two shared a budget. The record caches report what they hold
// (Hold) as it changes, so a read cache's bound follows them while the tasks run: a read
// cache keeps to a smaller bound as it inserts, and drops what exceeds it at its next
// commit (store.Buffer.WithSharedReadCache).
type CacheBudget struct {
	total   int64        // read + record budgets; the read caches' part is total - held
	readers atomic.Int64 // the read caches open
	held    atomic.Int64 // the bytes the record caches hold
	share   atomic.Int64 // each read cache's bound: (total - held) / readers
	noRead  bool         // no read caches (Config.StoreCacheBytes negative)
}

// NewCacheBudget returns the budget of an instance whose read caches have readBytes
// (Config.StoreCacheBytes: 0 is the default 32 MiB, negative none) and whose record
// caches have recordBytes (0 or negative: none).
func NewCacheBudget(readBytes int, recordBytes int64) *CacheBudget {
	b := &CacheBudget{noRead: readBytes < 0}
	if !b.noRead {
		b.total = int64(cmp.Or(readBytes, storeCacheBytes))
	}
	if recordBytes > 0 {
		b.total += recordBytes
	}
	b.reshare()
	return b
}

// Hold adds delta (negative: frees) to the bytes that the record caches hold, and moves
// the read caches' bound accordingly. Any goroutine may call it.
func (b *CacheBudget) Hold(delta int64) {
	b.held.Add(delta)
	b.reshare()
}

// Held returns the bytes that the record caches hold.
func (b *CacheBudget) Held() int64 { return b.held.Load() }

// ReadShare returns each read cache's bound now.
func (b *CacheBudget) ReadShare() int64 { return b.share.Load() }

// setReaders records that n read caches are open, each taking an equal share.
func (b *CacheBudget) setReaders(n int) {
	b.readers.Store(int64(n))
	b.reshare()
}

// reshare stores the read caches' bound computed from what the record caches hold and the
// read caches open. Calls may race: each stores its result, then computes again if what
// it computed from changed meanwhile, so that the last store is of the latest figures.
func (b *CacheBudget) reshare() {
	if b.noRead {
		return
	}
	for {
		held, n := b.held.Load(), b.readers.Load()
		b.share.Store(max(b.total-max(held, 0), 0) / max(n, 1))
		if b.held.Load() == held && b.readers.Load() == n {
			return
		}
	}
}
