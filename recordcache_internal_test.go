package kstream

import (
	"fmt"
	"testing"

	"github.com/kstream-go/kstream/internal/runtime"
	"github.com/kstream-go/kstream/serde"
)

// forwardCounter is a ProcessorContext that counts the records forwarded to it (the
// embedded interface is nil: the cache calls only Forward).
type forwardCounter[K, V any] struct {
	ProcessorContext[K, V]
	n int
}

func (f *forwardCounter[K, V]) Forward(Record[K, V]) { f.n++ }

// The default Config turns the record cache on at Kafka Streams' 10 MiB; a negative
// CacheMaxBytes turns it off; a set one is kept.
func TestCacheMaxBytesDefault(t *testing.T) {
	for _, c := range []struct{ set, want int64 }{{0, 10 << 20}, {-1, 0}, {1, 1}, {64 << 20, 64 << 20}} {
		if got := (Config{CacheMaxBytes: c.set}).cacheMaxBytes(); got != c.want {
			t.Errorf("CacheMaxBytes %d: budget %d, want %d", c.set, got, c.want)
		}
	}
	b := NewBuilder()
	Count(Stream(b, "in", serde.String(), serde.String()).GroupByKey(), "counts")
	_, _, rc, err := compile(b, Config{ApplicationID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	// One budget: the read caches' default 32 MiB and the record caches' default 10 MiB.
	if got := rc.Caches.ReadShare(); got != 42<<20 {
		t.Errorf("read share of the default budget %d, want 42 MiB", got)
	}
}

// A record cache reports the bytes it holds to the instance's one cache budget as it
// fills, in steps of cacheReportBytes, so that the read caches' share falls, and gives
// them back when it flushes (or discards, or closes).
func TestRecordCacheReportsToSharedBudget(t *testing.T) {
	shared := runtime.NewCacheBudget(4<<20, 1<<20)
	budget := &cacheBudget{max: 1 << 20, shared: shared}
	tk := &task{}
	c := newEmitCache[string, int64](tk, budget)
	ctx := &forwardCounter[string, change[int64]]{}
	const keys = 300
	perEntry := 0
	for i := range keys {
		k := fmt.Sprintf("key-%04d", i)
		perEntry = len(k) + cacheEntryOverhead
		c.put(ctx, []byte(k), k, change[int64]{new: int64(i), hasNew: true}, false, 1, nil)
		c.put(ctx, []byte(k), k, change[int64]{new: int64(i + 1), hasNew: true}, true, 2, nil) // no new bytes
	}
	bytes := int64(keys * perEntry)
	held := shared.Held()
	if held > bytes || held <= bytes-cacheReportBytes {
		t.Fatalf("the budget has %d bytes held, want within (%d, %d]", held, bytes-cacheReportBytes, bytes)
	}
	if want := 5<<20 - held; shared.ReadShare() != want {
		t.Fatalf("read share %d, want %d (5 MiB less what the record cache holds)", shared.ReadShare(), want)
	}
	if ctx.n != 0 {
		t.Fatalf("%d records forwarded before the flush", ctx.n)
	}
	c.flush()
	if ctx.n != keys || shared.Held() != 0 || shared.ReadShare() != 5<<20 {
		t.Fatalf("after the flush: %d forwarded (want %d), %d held (want 0), read share %d (want 5 MiB)", ctx.n, keys, shared.Held(), shared.ReadShare())
	}
	for i := range keys {
		k := fmt.Sprintf("key-%04d", i)
		c.put(ctx, []byte(k), k, change[int64]{new: 1, hasNew: true}, true, 3, nil)
	}
	if shared.Held() == 0 {
		t.Fatal("nothing held after the cache filled again")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if shared.Held() != 0 || budget.open.Load() != 0 {
		t.Fatalf("after Close: %d held, %d caches open; want 0 and 0", shared.Held(), budget.open.Load())
	}
}

// forwardKeys is a ProcessorContext that records the keys and values forwarded to it.
type forwardKeys struct {
	ProcessorContext[string, change[int64]]
	out []string
}

func (f *forwardKeys) Forward(r Record[string, change[int64]]) {
	f.out = append(f.out, fmt.Sprintf("%s=%d", r.Key, r.Value.new))
}

// A key updated again moves to the end of the flush order, as Kafka Streams' NamedCache
// moves it to the end of its dirty keys; a key updated many times between two flushes
// keeps one entry (the ones it leaves behind are compacted away), and the flush forwards
// each key's latest update once.
func TestRecordCacheOrderOfLatestUpdates(t *testing.T) {
	budget := &cacheBudget{max: 1 << 30, shared: runtime.NewCacheBudget(1<<30, 1<<20)}
	c := newEmitCache[string, int64](&task{}, budget)
	ctx := &forwardKeys{}
	put := func(k string, v int64) {
		c.put(ctx, []byte(k), k, change[int64]{new: v, hasNew: true}, false, v, nil)
	}
	put("a", 1)
	put("b", 2)
	put("c", 3)
	put("a", 4) // a moves after c
	for i := range int64(10_000) {
		put("hot", i) // one entry, whatever the updates
	}
	put("b", 5)
	if live := len(c.ents) - c.dead; live != 4 || len(c.ents) > 2*live+65 {
		t.Fatalf("%d entries, %d of them moved: want 4 live, the moved ones compacted", len(c.ents), c.dead)
	}
	c.flush()
	want := []string{"c=3", "a=4", "hot=9999", "b=5"}
	if fmt.Sprint(ctx.out) != fmt.Sprint(want) {
		t.Fatalf("flushed %v, want %v", ctx.out, want)
	}
	ctx.out = nil
	put("x", 1)
	put("y", 2)
	c.flush()
	if want := []string{"x=1", "y=2"}; fmt.Sprint(ctx.out) != fmt.Sprint(want) {
		t.Fatalf("after a flush: %v, want %v", ctx.out, want)
	}
}
