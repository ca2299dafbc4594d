package kstream_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/store"
)

// winT0 is the time of the window store tests (a multiple of every window size they use).
var winT0 = time.UnixMilli(1_700_000_000_000)

// winAt is winT0 plus ms milliseconds.
func winAt(ms int64) time.Time { return winT0.Add(time.Duration(ms) * time.Millisecond) }

// windowPutter is a processor that puts each record's value into the window store "ws",
// in the window of size 10s holding its timestamp, and deletes the window for the value
// "-". It keeps the store handle, which the tests read between pipes (the driver runs
// every record to its end before Pipe returns).
type windowPutter struct {
	ws *store.WindowStore[string, string]
}

func (p *windowPutter) Init(ctx kstream.ProcessorContext[string, string]) error {
	ws, err := kstream.GetWindowStore[string, string](ctx, "ws")
	p.ws = ws
	return err
}

func (p *windowPutter) Process(_ kstream.ProcessorContext[string, string], r kstream.Record[string, string]) error {
	start := r.Timestamp.Truncate(10 * time.Second)
	if r.Value == "-" {
		return p.ws.Delete(r.Key, start)
	}
	return p.ws.Put(r.Key, r.Value, start)
}

// windowDriver runs a Process operator with windowPutter over the window store st, and
// returns its input topic and the processor.
func windowDriver(t *testing.T, st kstream.StoreBuilder) (*kstreamtest.InputTopic[string, string], *windowPutter) {
	t.Helper()
	p := &windowPutter{}
	b := kstream.NewBuilder()
	kstream.Process(kstream.Stream(b, "in", serde.String(), serde.String()), func() kstream.Processor[string, string, string, string] {
		return p
	}, kstream.Named("putter"), kstream.WithStores(st))
	d, err := kstreamtest.New(b, kstream.Config{ApplicationID: "papi-windows"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String()), p
}

// winEntries reads an iterator to its end as "key@start-end=value" lines (times in ms
// after winT0), closing it and failing on its error.
func winEntries(t *testing.T, it *store.WindowedIterator[string, string], err error) string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var out []string
	for it.Next() {
		k := it.Key()
		out = append(out, fmt.Sprintf("%s@%d-%d=%s", k.Key, k.Start.Sub(winT0).Milliseconds(), k.End.Sub(winT0).Milliseconds(), it.Value()))
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, " ")
}

// winsOf returns winEntries for t, to be called with a scan's two results.
func winsOf(t *testing.T) func(*store.WindowedIterator[string, string], error) string {
	return func(it *store.WindowedIterator[string, string], err error) string {
		t.Helper()
		return winEntries(t, it, err)
	}
}

func pipeAll(t *testing.T, in *kstreamtest.InputTopic[string, string], recs ...any) {
	t.Helper()
	for i := 0; i+2 < len(recs)+1; i += 3 {
		if err := in.PipeAt(recs[i].(string), recs[i+1].(string), winAt(int64(recs[i+2].(int)))); err != nil {
			t.Fatal(err)
		}
	}
}

// A window store declared with WindowStore and read with GetWindowStore does what Kafka
// Streams' WindowStore does: a put replaces a window's value, fetches by key and time range
// come by window start (backward: in reverse), key-range and all-key scans by key then
// start, window ends are start + window size, and a delete removes a window.
func TestWindowStoreProcessorAPIFetches(t *testing.T) {
	for _, opts := range [][]kstream.StoreOption{nil, {kstream.InMemory()}} {
		in, p := windowDriver(t, kstream.WindowStore("ws", serde.String(), serde.String(), time.Hour, 10*time.Second, opts...))
		pipeAll(t, in,
			"a", "a0", 1000,
			"b", "b0", 2000,
			"a", "a10", 15000,
			"c", "c20", 29999,
			"a", "a20", 20000,
			"b", "b10", 10000,
			"a", "a0'", 9999, // replaces a0
			"d", "d0", 0,
			"d", "-", 5, // deletes d's window 0
		)
		ws := p.ws
		if v, ok, err := ws.Fetch("a", winAt(0)); err != nil || !ok || v != "a0'" {
			t.Fatalf("Fetch(a, 0) = %q %v %v, want a0'", v, ok, err)
		}
		if _, ok, err := ws.Fetch("d", winAt(0)); err != nil || ok {
			t.Fatalf("Fetch(d, 0) after a delete: ok %v, err %v", ok, err)
		}
		if _, ok, _ := ws.Fetch("a", winAt(5000)); ok {
			t.Fatal("Fetch(a, 5000): a window that was never put")
		}
		for _, c := range []struct {
			name string
			got  func() (*store.WindowedIterator[string, string], error)
			want string
		}{
			{"FetchRange(a, 0, 20000)", func() (*store.WindowedIterator[string, string], error) {
				return ws.FetchRange("a", winAt(0), winAt(20000))
			}, "a@0-10000=a0' a@10000-20000=a10 a@20000-30000=a20"},
			{"FetchRange(a, 1, 19999)", func() (*store.WindowedIterator[string, string], error) {
				return ws.FetchRange("a", winAt(1), winAt(19999))
			}, "a@10000-20000=a10"},
			{"BackwardFetchRange(a, 0, 20000)", func() (*store.WindowedIterator[string, string], error) {
				return ws.BackwardFetchRange("a", winAt(0), winAt(20000))
			}, "a@20000-30000=a20 a@10000-20000=a10 a@0-10000=a0'"},
			{"FetchKeyRange(a, b, 0, 10000)", func() (*store.WindowedIterator[string, string], error) {
				return ws.FetchKeyRange("a", "b", winAt(0), winAt(10000))
			}, "a@0-10000=a0' a@10000-20000=a10 b@0-10000=b0 b@10000-20000=b10"},
			{"BackwardFetchKeyRange(a, b, 0, 10000)", func() (*store.WindowedIterator[string, string], error) {
				return ws.BackwardFetchKeyRange("a", "b", winAt(0), winAt(10000))
			}, "b@10000-20000=b10 b@0-10000=b0 a@10000-20000=a10 a@0-10000=a0'"},
			{"FetchAll(10000, 20000)", func() (*store.WindowedIterator[string, string], error) {
				return ws.FetchAll(winAt(10000), winAt(20000))
			}, "a@10000-20000=a10 a@20000-30000=a20 b@10000-20000=b10 c@20000-30000=c20"},
			{"BackwardFetchAll(10000, 20000)", func() (*store.WindowedIterator[string, string], error) {
				return ws.BackwardFetchAll(winAt(10000), winAt(20000))
			}, "c@20000-30000=c20 b@10000-20000=b10 a@20000-30000=a20 a@10000-20000=a10"},
			{"All", ws.All, "a@0-10000=a0' a@10000-20000=a10 a@20000-30000=a20 b@0-10000=b0 b@10000-20000=b10 c@20000-30000=c20"},
			{"BackwardAll", ws.BackwardAll, "c@20000-30000=c20 b@10000-20000=b10 b@0-10000=b0 a@20000-30000=a20 a@10000-20000=a10 a@0-10000=a0'"},
		} {
			it, err := c.got()
			if got := winEntries(t, it, err); got != c.want {
				t.Errorf("opts %d, %s:\n got %s\nwant %s", len(opts), c.name, got, c.want)
			}
		}
	}
}

// A window store keeps a window for its retention after the window's start, in the
// store's stream time (the largest window start put): reads stop returning windows that
// start at or before stream time minus retention, a put of such a window is dropped, and
// the test driver's view of the store agrees.
func TestWindowStoreProcessorAPIRetention(t *testing.T) {
	wins := winsOf(t)
	p := &windowPutter{}
	b := kstream.NewBuilder()
	kstream.Process(kstream.Stream(b, "in", serde.String(), serde.String()), func() kstream.Processor[string, string, string, string] {
		return p
	}, kstream.WithStores(kstream.WindowStore("ws", serde.String(), serde.String(), time.Minute, 10*time.Second)))
	d, err := kstreamtest.New(b, kstream.Config{ApplicationID: "papi-windows"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	in := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String())
	pipeAll(t, in, "a", "a0", 0, "a", "a10", 10000, "a", "a20", 20000)
	if got := wins(p.ws.FetchRange("a", winAt(0), winAt(100000))); got != "a@0-10000=a0 a@10000-20000=a10 a@20000-30000=a20" {
		t.Fatalf("before expiry: %s", got)
	}
	// Stream time 70000: the window starting at 10000 is at the retention edge (70000 -
	// 60000) and expires with the one at 0.
	pipeAll(t, in, "b", "b70", 70000)
	if got := wins(p.ws.FetchRange("a", winAt(0), winAt(100000))); got != "a@20000-30000=a20" {
		t.Fatalf("after stream time 70000: %s, want only a@20000", got)
	}
	if _, ok, err := p.ws.Fetch("a", winAt(10000)); ok || err != nil {
		t.Fatalf("Fetch of an expired window: ok %v err %v", ok, err)
	}
	// Stream time 110000: a put into the window at 0, whose segment is before that of the
	// retention edge (50000), is dropped and counted; one into a live window is kept.
	before := p.ws.DroppedExpired()
	pipeAll(t, in, "b", "b110", 110000, "a", "late", 5000, "a", "a60", 60000)
	if got := p.ws.DroppedExpired() - before; got != 1 {
		t.Fatalf("DroppedExpired grew by %d, want 1", got)
	}
	const live = "a@60000-70000=a60 b@70000-80000=b70 b@110000-120000=b110"
	if got := wins(p.ws.All()); got != live {
		t.Fatalf("All:\n got %s\nwant %s", got, live)
	}
	view, err := kstreamtest.WindowStore(d, "ws", 0, serde.String(), serde.String())
	if err != nil {
		t.Fatal(err)
	}
	if got := wins(view.All()); got != live {
		t.Fatalf("the driver's view: %s", got)
	}
	if st, ok, err := view.ObservedStreamTime(); err != nil || !ok || !st.Equal(winAt(110000)) {
		t.Fatalf("the driver's view: stream time %v %v %v", st, ok, err)
	}
}

// With RetainDuplicates every put of a key and window is kept, in the order put; Fetch
// returns the first, Delete removes them all.
func TestWindowStoreProcessorAPIRetainDuplicates(t *testing.T) {
	wins := winsOf(t)
	in, p := windowDriver(t, kstream.WindowStore("ws", serde.String(), serde.String(), time.Hour, 10*time.Second, kstream.RetainDuplicates()))
	pipeAll(t, in, "a", "x", 1000, "a", "y", 2000, "b", "z", 3000, "a", "x", 4000, "a", "w", 12000)
	if got := wins(p.ws.FetchRange("a", winAt(0), winAt(10000))); got != "a@0-10000=x a@0-10000=y a@0-10000=x a@10000-20000=w" {
		t.Fatalf("FetchRange: %s", got)
	}
	if got := wins(p.ws.BackwardFetchRange("a", winAt(0), winAt(10000))); got != "a@10000-20000=w a@0-10000=x a@0-10000=y a@0-10000=x" {
		t.Fatalf("BackwardFetchRange: %s", got)
	}
	if v, ok, err := p.ws.Fetch("a", winAt(0)); err != nil || !ok || v != "x" {
		t.Fatalf("Fetch = %q %v %v, want the first, x", v, ok, err)
	}
	pipeAll(t, in, "a", "-", 500)
	if got := wins(p.ws.All()); got != "a@10000-20000=w b@0-10000=z" {
		t.Fatalf("after Delete(a, 0): %s", got)
	}
}

// sessionizer merges each record into the sessions of its key within gap 5s, with the
// session store "ss": the Processor API version of a session aggregation that joins the
// values with "+". It keeps the store handle for the test.
type sessionizer struct {
	ss *store.SessionStore[string, string]
}

func (p *sessionizer) Init(ctx kstream.ProcessorContext[string, string]) error {
	ss, err := kstream.GetSessionStore[string, string](ctx, "ss")
	p.ss = ss
	return err
}

func (p *sessionizer) Process(ctx kstream.ProcessorContext[string, string], r kstream.Record[string, string]) error {
	const gap = 5 * time.Second
	it, err := p.ss.FindSessions(r.Key, r.Timestamp.Add(-gap), r.Timestamp.Add(gap))
	if err != nil {
		return err
	}
	start, end, agg := r.Timestamp, r.Timestamp, r.Value
	var merged []serde.Windowed[string]
	for it.Next() {
		w := it.Key()
		merged = append(merged, w)
		if w.Start.Before(start) {
			start = w.Start
		}
		if w.End.After(end) {
			end = w.End
		}
		agg = it.Value() + "+" + agg
	}
	if err := errors.Join(it.Err(), it.Close()); err != nil {
		return err
	}
	for _, w := range merged {
		if err := p.ss.Remove(w); err != nil {
			return err
		}
	}
	return p.ss.Put(serde.Windowed[string]{Key: r.Key, Start: start, End: end}, agg)
}

// A session store declared with SessionStore and read with GetSessionStore does what Kafka
// Streams' SessionStore does: FindSessions finds the sessions a record merges with, Remove
// and Put replace them, fetches come by session end then start (backward: in reverse),
// and a session leaves the store once it ended retention before stream time.
func TestSessionStoreProcessorAPI(t *testing.T) {
	p := &sessionizer{}
	b := kstream.NewBuilder()
	kstream.Process(kstream.Stream(b, "in", serde.String(), serde.String()), func() kstream.Processor[string, string, string, string] {
		return p
	}, kstream.WithStores(kstream.SessionStore("ss", serde.String(), serde.String(), 30*time.Second)))
	d, err := kstreamtest.New(b, kstream.Config{ApplicationID: "papi-sessions"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	in := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String())
	pipeAll(t, in,
		"a", "1", 0,
		"a", "2", 3000, // extends [0, 0] to [0, 3000]
		"a", "3", 20000, // a new session
		"b", "x", 1000,
		"a", "4", 15000, // joins [20000, 20000] (within the gap), not [0, 3000]
	)
	all := winsOf(t)
	if got, want := all(p.ss.Fetch("a")), "a@0-3000=1+2 a@15000-20000=3+4"; got != want {
		t.Fatalf("Fetch(a):\n got %s\nwant %s", got, want)
	}
	if got, want := all(p.ss.BackwardFetch("a")), "a@15000-20000=3+4 a@0-3000=1+2"; got != want {
		t.Fatalf("BackwardFetch(a):\n got %s\nwant %s", got, want)
	}
	if got, want := all(p.ss.FindSessions("a", winAt(2000), winAt(10000))), "a@0-3000=1+2"; got != want {
		t.Fatalf("FindSessions(a, 2000, 10000): %s, want %s", got, want)
	}
	if got, want := all(p.ss.FetchKeyRange("a", "b")), "a@0-3000=1+2 a@15000-20000=3+4 b@1000-1000=x"; got != want {
		t.Fatalf("FetchKeyRange(a, b):\n got %s\nwant %s", got, want)
	}
	if got, want := all(p.ss.BackwardFindSessionsKeyRange("a", "b", winAt(0), winAt(15000))), "b@1000-1000=x a@15000-20000=3+4 a@0-3000=1+2"; got != want {
		t.Fatalf("BackwardFindSessionsKeyRange(a, b, 0, 15000):\n got %s\nwant %s", got, want)
	}
	if v, ok, err := p.ss.FetchSession("a", winAt(15000), winAt(20000)); err != nil || !ok || v != "3+4" {
		t.Fatalf("FetchSession(a, 15000, 20000) = %q %v %v", v, ok, err)
	}
	// Stream time 40000: sessions ending at or before 10000 expire.
	pipeAll(t, in, "c", "y", 40000)
	if got, want := all(p.ss.FetchKeyRange("a", "c")), "a@15000-20000=3+4 c@40000-40000=y"; got != want {
		t.Fatalf("after stream time 40000:\n got %s\nwant %s", got, want)
	}
	view, err := kstreamtest.SessionStore(d, "ss", 0, serde.String(), serde.String())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := all(view.Fetch("a")), "a@15000-20000=3+4"; got != want {
		t.Fatalf("the driver's view: %s, want %s", got, want)
	}
}

// The builders' mistakes are Build errors that say what is wrong, and the getters refuse a
// store of another kind or other types.
func TestWindowAndSessionStoreErrors(t *testing.T) {
	build := func(st kstream.StoreBuilder) error {
		b := kstream.NewBuilder()
		kstream.Process(kstream.Stream(b, "in", serde.String(), serde.String()), func() kstream.Processor[string, string, string, string] {
			return kstream.ProcessorFunc[string, string, string, string](func(kstream.ProcessorContext[string, string], kstream.Record[string, string]) error { return nil })
		}, kstream.WithStores(st))
		_, err := b.Build()
		return err
	}
	for _, c := range []struct {
		st   kstream.StoreBuilder
		want string
	}{
		{kstream.WindowStore("w1", serde.String(), serde.String(), time.Second, time.Minute),
			"The retention period of the window store w1 must be no smaller than its window size. Got size=[60000], retention=[1000]"},
		{kstream.WindowStore("w2", serde.String(), serde.String(), -time.Second, 0), "the retention period must not be negative"},
		{kstream.WindowStore("w3", serde.String(), serde.String(), time.Second, time.Microsecond), "the window size must be a whole number of milliseconds"},
		{kstream.WindowStore[string, string]("w4", nil, serde.String(), time.Second, time.Second), "key and value serdes are required"},
		{kstream.SessionStore("s1", serde.String(), serde.String(), -time.Second), "the retention period must not be negative"},
		{kstream.KeyValueStore("kv", serde.String(), serde.String(), kstream.RetainDuplicates()), `store "kv": option RetainDuplicates does not apply to it; it applies to WindowStore`},
		{kstream.SessionStore("s2", serde.String(), serde.String(), time.Second, kstream.RetainDuplicates()), `store "s2": option RetainDuplicates does not apply`},
		{kstream.KeyValueStore("kv2", serde.String(), serde.String(), kstream.Named("x")), `store "kv2": option Named does not apply to it`},
		{kstream.WindowStore("w5", serde.String(), serde.String(), time.Hour, time.Second, kstream.WithRetention(time.Hour)), `store "w5": option WithRetention does not apply`},
	} {
		if err := build(c.st); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Build error %v, want one containing %q", err, c.want)
		}
	}

	// The getters check the kind and the types.
	var errs []error
	b := kstream.NewBuilder()
	kstream.Process(kstream.Stream(b, "in", serde.String(), serde.String()), func() kstream.Processor[string, string, string, string] {
		return kstream.ProcessorFunc[string, string, string, string](func(ctx kstream.ProcessorContext[string, string], _ kstream.Record[string, string]) error {
			_, err1 := kstream.GetWindowStore[string, int64](ctx, "ws")
			_, err2 := kstream.GetKeyValueStore[string, string](ctx, "ws")
			_, err3 := kstream.GetSessionStore[string, string](ctx, "ws")
			_, err4 := kstream.GetWindowStore[string, string](ctx, "ss")
			_, err5 := kstream.GetWindowStore[string, string](ctx, "nope")
			errs = []error{err1, err2, err3, err4, err5}
			return nil
		})
	}, kstream.WithStores(
		kstream.WindowStore("ws", serde.String(), serde.String(), time.Hour, time.Second),
		kstream.SessionStore("ss", serde.String(), serde.String(), time.Hour)))
	d, err := kstreamtest.New(b, kstream.Config{ApplicationID: "papi-errors"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String()).Pipe("k", "v"); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"not a WindowStore of these key and value types", "not a KeyValueStore", "not a SessionStore", "not a WindowStore", `has no store named "nope"`} {
		if errs[i] == nil || !strings.Contains(errs[i].Error(), want) {
			t.Errorf("getter %d: error %v, want one containing %q", i+1, errs[i], want)
		}
	}
}
