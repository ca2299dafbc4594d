package kstream_test

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
)

// wordStores counts the values of topic by value into the store "counts", and the
// same values per 10-second window into "win-counts" and per session (gap 5 s) into
// "session-counts".
func wordStores(topic string, opts ...kstream.StoreOption) *kstream.Builder {
	b := kstream.NewBuilder()
	words := kstream.Stream(b, topic, serde.String(), serde.String())
	byWord := kstream.GroupBy(words, func(_, w string) string { return w }, serde.String(), kstream.Named("by-word"))
	kstream.Count(byWord, "counts", opts...)
	kstream.WindowedCount(byWord.WindowedBy(kstream.TimeWindowsOf(10*time.Second)), "win-counts")
	kstream.SessionCount(byWord.WindowedBySession(kstream.SessionWindowsOf(5*time.Second)), "session-counts")
	return b
}

// words produces n records to topic: word w<i%keys> at baseTime+i ms, and returns each
// word's count.
func produceWords(t *testing.T, topic string, n, keys int) map[string]int64 {
	t.Helper()
	want := map[string]int64{}
	var recs []*kgo.Record
	for i := range n {
		w := fmt.Sprintf("w%03d", i%keys)
		want[w]++
		recs = append(recs, rec(topic, fmt.Sprintf("k%d", i), w, i))
	}
	kafkatest.Produce(t, kafkatest.Client(t), recs...)
	return want
}

// A running instance answers Get, Range, All, PrefixScan and ApproximateNumEntries from
// its stores, and window and session fetches; errors say what is wrong.
func TestQueryLocalStores(t *testing.T) {
	t.Parallel()
	for _, mem := range []bool{false, true} {
		t.Run(map[bool]string{false: "pebble", true: "memory"}[mem], func(t *testing.T) {
			t.Parallel()
			in := kafkatest.CreateTopic(t, "words", 4, nil)
			var opts []kstream.StoreOption
			if mem {
				opts = append(opts, kstream.InMemory())
			}
			cfg := testConfig(t)
			cfg.StateDir = t.TempDir()
			cfg.ApplicationServer = "127.0.0.1:1"
			app := newApp(t, wordStores(in, opts...), cfg)
			if _, err := kstream.QueryStore[string, int64](app, "counts"); err != nil {
				t.Fatal(err) // a store is obtained before Run; reads fail until it runs
			}
			st, _ := kstream.QueryStore[string, int64](app, "counts")
			_, _, err := st.Get("w000")
			var se *kstream.StoreUnavailableError
			if !errors.As(err, &se) || se.Reason != kstream.NotRunning || !se.Retryable() || !errors.Is(err, kstream.ErrStoreUnavailable) {
				t.Fatalf("before Run: %v, want a retryable NotRunning StoreUnavailableError", err)
			}
			start(t, app)
			want := produceWords(t, in, 400, 40)
			kafkatest.Eventually(t, 60*time.Second, "every count queryable", func() bool {
				for w, n := range want {
					if got, ok, err := st.Get(w); err != nil || !ok || got != n {
						return false
					}
				}
				return true
			})
			if _, ok, err := st.Get("absent"); ok || err != nil {
				t.Errorf("Get(absent) = %v, %v", ok, err)
			}
			var keys []string
			if err := st.All(func(k string, v int64) bool {
				if v != want[k] {
					t.Errorf("All: %s = %d, want %d", k, v, want[k])
				}
				keys = append(keys, k)
				return true
			}); err != nil {
				t.Fatal(err)
			}
			sorted := slices.Sorted(func(yield func(string) bool) {
				for k := range want {
					if !yield(k) {
						return
					}
				}
			})
			if !slices.Equal(keys, sorted) {
				t.Errorf("All returned %d keys %v..., want %d in order", len(keys), keys[:min(5, len(keys))], len(sorted))
			}
			var rev []string
			if err := st.ReverseAll(func(k string, _ int64) bool { rev = append(rev, k); return true }); err != nil {
				t.Fatal(err)
			}
			slices.Reverse(rev)
			if !slices.Equal(rev, sorted) {
				t.Errorf("ReverseAll is not All reversed")
			}
			var rng []string
			if err := st.Range("w010", "w013", func(k string, _ int64) bool { rng = append(rng, k); return true }); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(rng, []string{"w010", "w011", "w012", "w013"}) {
				t.Errorf("Range(w010, w013) = %v (bounds are inclusive)", rng)
			}
			var first []string
			if err := st.ReverseRange("w010", "w039", func(k string, _ int64) bool { first = append(first, k); return len(first) < 2 }); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(first, []string{"w039", "w038"}) {
				t.Errorf("ReverseRange stopped by fn = %v", first)
			}
			var pre []string
			if err := st.PrefixScan([]byte("w02"), func(k string, _ int64) bool { pre = append(pre, k); return true }); err != nil {
				t.Fatal(err)
			}
			if len(pre) != 10 || pre[0] != "w020" || pre[9] != "w029" {
				t.Errorf("PrefixScan(w02) = %v", pre)
			}
			if n, err := st.ApproximateNumEntries(); err != nil || n != 40 {
				t.Errorf("ApproximateNumEntries = %d, %v; want 40", n, err)
			}
			// Only partition 0, and a partition that does not exist here.
			p0, _ := kstream.QueryStore[string, int64](app, "counts", kstream.QueryPartitions(0))
			n0 := 0
			if err := p0.All(func(k string, _ int64) bool {
				md, _ := app.KeyMetadata("counts", k)
				if md.Partition != 0 {
					t.Errorf("QueryPartitions(0) returned %s of partition %d", k, md.Partition)
				}
				n0++
				return true
			}); err != nil || n0 == 0 || n0 == 40 {
				t.Errorf("partition 0 alone: %d keys, %v", n0, err)
			}
			p9, _ := kstream.QueryStore[string, int64](app, "counts", kstream.QueryPartitions(9))
			if err := p9.All(func(string, int64) bool { return true }); !errors.As(err, &se) || se.Reason != kstream.NotHosted || se.Partition != 9 {
				t.Errorf("partition 9: %v, want NotHosted", err)
			}

			// Windows: every word's records fall in the first 10-second window.
			ws, err := kstream.QueryWindowStore[string, int64](app, "win-counts")
			if err != nil {
				t.Fatal(err)
			}
			kafkatest.Eventually(t, 30*time.Second, "window counts", func() bool {
				var got []string
				err := ws.Fetch("w007", baseTime.Add(-time.Minute), baseTime.Add(time.Minute), func(w serde.Windowed[string], v int64) bool {
					got = append(got, fmt.Sprintf("%s@%d-%d=%d", w.Key, w.Start.Sub(baseTime).Milliseconds(), w.End.Sub(baseTime).Milliseconds(), v))
					return true
				})
				return err == nil && slices.Equal(got, []string{fmt.Sprintf("w007@%d-%d=10", -baseTime.UnixMilli()%10000, -baseTime.UnixMilli()%10000+10000)})
			})
			all := 0
			if err := ws.FetchAll(baseTime.Add(-time.Minute), baseTime.Add(time.Minute), func(_ serde.Windowed[string], v int64) bool { all += int(v); return true }); err != nil || all != 400 {
				t.Errorf("FetchAll: total %d, %v; want 400", all, err)
			}
			ss, err := kstream.QuerySessionStore[string, int64](app, "session-counts")
			if err != nil {
				t.Fatal(err)
			}
			var sessions []int64
			if err := ss.Fetch("w005", func(w serde.Windowed[string], v int64) bool {
				sessions = append(sessions, v, w.Start.Sub(baseTime).Milliseconds(), w.End.Sub(baseTime).Milliseconds())
				return true
			}); err != nil || !slices.Equal(sessions, []int64{10, 5, 365}) {
				t.Errorf("session fetch = %v, %v; want one session of 10 from 5 to 365 ms", sessions, err)
			}

			// Errors name what is wrong.
			if _, err := kstream.QueryStore[string, int64](app, "nope"); !errors.As(err, &se) || se.Reason != kstream.UnknownStore || se.Retryable() {
				t.Errorf("unknown store: %v", err)
			}
			if _, err := kstream.QueryStore[string, string](app, "counts"); err == nil {
				t.Errorf("wrong value type accepted")
			}
			if _, err := kstream.QueryStore[string, int64](app, "win-counts"); err == nil {
				t.Errorf("a window store opened as a key-value store")
			}
			if _, err := kstream.QueryStore[string, int64](app, "by-word-repartition"); err == nil {
				t.Errorf("an internal name accepted as a store")
			}

			// Key discovery on a single instance: every key is here.
			md := app.Metadata()
			if len(md) != 1 || !md[0].Self || md[0].Host != "127.0.0.1:1" || len(md[0].Active) != 8 || !slices.Equal(md[0].Stores, []string{"counts", "session-counts", "win-counts"}) {
				t.Errorf("Metadata = %+v", md)
			}
			km, err := app.KeyMetadata("counts", "w001")
			if err != nil || km.Active != "127.0.0.1:1" || km.Partition < 0 || km.Partition > 3 {
				t.Errorf("KeyMetadata = %+v, %v", km, err)
			}
			if _, err := app.KeyMetadata("counts", 7); err == nil {
				t.Errorf("KeyMetadata accepted an int key for a string store")
			}
			lps := app.LocalStorePartitions()
			if len(lps) != 12 {
				t.Errorf("LocalStorePartitions = %d entries, want 3 stores x 4 partitions", len(lps))
			}
			for _, lp := range lps {
				if lp.Standby || lp.Restoring || lp.Lag != 0 {
					t.Errorf("local partition %+v", lp)
				}
			}
		})
	}
}

// Two instances with a standby each: a key is read at its owner, the other instance says
// NotHosted (retryable) unless stale stores are allowed, where its standby answers with the
// same value once caught up; KeyMetadata names the owner and the standby at both
// instances. When one instance stops, the other takes its tasks over and answers for every
// key; while it does, concurrent readers see only right values or retryable errors.
func TestQueryTwoInstancesStandbyAndRebalance(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "words", 6, nil)
	appID := kafkatest.Name(t, "app")
	var apps []*kstream.App
	var runs []*running
	for i := range 2 {
		cfg := testConfig(t)
		cfg.ApplicationID = appID
		cfg.StateDir = t.TempDir()
		cfg.NumStandbys = 1
		cfg.ApplicationServer = fmt.Sprintf("host%d:80", i)
		app := newApp(t, wordStores(in), cfg)
		apps = append(apps, app)
		runs = append(runs, start(t, app))
	}
	want := produceWords(t, in, 600, 60)
	stores := make([]*kstream.ReadOnlyKeyValueStore[string, int64], 2)
	stale := make([]*kstream.ReadOnlyKeyValueStore[string, int64], 2)
	for i, a := range apps {
		stores[i], _ = kstream.QueryStore[string, int64](a, "counts")
		stale[i], _ = kstream.QueryStore[string, int64](a, "counts", kstream.StaleStores(0))
	}
	kafkatest.Eventually(t, 90*time.Second, "every key at its owner, and both instances agree on the owners", func() bool {
		for w, n := range want {
			owners := 0
			var hosts []string
			for i, a := range apps {
				v, ok, err := stores[i].Get(w)
				if err == nil && ok && v == n {
					owners++
				}
				km, err := a.KeyMetadata("counts", w)
				if err != nil {
					return false
				}
				hosts = append(hosts, km.Active)
			}
			if owners != 1 || hosts[0] != hosts[1] || hosts[0] == "" {
				return false
			}
		}
		return true
	})
	for w, n := range want {
		// The owner is read again around the read at the non-owner: on a loaded machine a
		// rebalance (a missed heartbeat) can move the key's partition in between, and the
		// read then rightly succeeds at its new owner; the key is asked again.
		var km kstream.KeyMetadata
		var other int
		var err error
		for range 20 {
			km, _ = apps[0].KeyMetadata("counts", w)
			other = 0
			if km.Active == "host0:80" {
				other = 1
			}
			_, _, err = stores[other].Get(w)
			if after, _ := apps[0].KeyMetadata("counts", w); after.Active == km.Active && km.Active != "" {
				break
			}
		}
		if !slices.Equal(km.Standbys, []string{fmt.Sprintf("host%d:80", other)}) {
			t.Errorf("%s: standbys %v, want the other instance", w, km.Standbys)
		}
		var se *kstream.StoreUnavailableError
		if !errors.As(err, &se) || (se.Reason != kstream.NotHosted && se.Reason != kstream.Rebalancing) || !se.Retryable() {
			t.Errorf("%s at the non-owner (the owner is %s): %v, want NotHosted", w, km.Active, err)
		}
		kafkatest.Eventually(t, 30*time.Second, "standby caught up", func() bool {
			v, ok, err := stale[other].Get(w)
			return err == nil && ok && v == n
		})
	}
	standbys := 0
	for _, a := range apps {
		for _, lp := range a.LocalStorePartitions() {
			if lp.Standby && lp.Store == "counts" {
				standbys++
				if lp.Lag != 0 || lp.Position <= 0 {
					t.Errorf("standby %+v: want lag 0 and a position", lp)
				}
			}
		}
	}
	if standbys != 6 {
		t.Errorf("%d standby partitions of counts, want 6", standbys)
	}

	// Readers at instance 0 while instance 1 leaves: right values or retryable errors.
	var stop atomic.Bool
	var wg sync.WaitGroup
	var wrong, unavailable, right atomic.Int64
	var wrongMsg atomic.Value
	for range 2 {
		wg.Go(func() {
			for !stop.Load() {
				for w, n := range want {
					v, ok, err := stores[0].Get(w)
					var se *kstream.StoreUnavailableError
					switch {
					case err == nil && ok && v == n:
						right.Add(1)
					case errors.As(err, &se) && se.Retryable():
						unavailable.Add(1)
					default:
						wrong.Add(1)
						wrongMsg.Store(fmt.Sprintf("%s: %d %v %v", w, v, ok, err))
					}
				}
			}
		})
	}
	if err := runs[1].stop(); err != nil {
		t.Fatal(err)
	}
	kafkatest.Eventually(t, 90*time.Second, "instance 0 answers every key", func() bool {
		for w, n := range want {
			if v, ok, err := stores[0].Get(w); err != nil || !ok || v != n {
				return false
			}
		}
		return true
	})
	stop.Store(true)
	wg.Wait()
	if wrong.Load() > 0 {
		t.Errorf("%d wrong answers during the rebalance, e.g. %v", wrong.Load(), wrongMsg.Load())
	}
	t.Logf("during the rebalance: %d right answers, %d retryable not-available", right.Load(), unavailable.Load())
	kafkatest.Eventually(t, 60*time.Second, "metadata of one instance with every task", func() bool {
		md := apps[0].Metadata()
		return len(md) == 1 && len(md[0].Active) == 12 && md[0].Self
	})
}

// A global table's store is queryable at every instance, all of it, once bootstrapped.
func TestQueryGlobalStore(t *testing.T) {
	t.Parallel()
	gt := kafkatest.CreateTopic(t, "global", 3, nil)
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	cl := kafkatest.Client(t)
	var recs []*kgo.Record
	for i := range 30 {
		recs = append(recs, rec(gt, fmt.Sprintf("g%02d", i), fmt.Sprintf("v%d", i), i))
	}
	kafkatest.Produce(t, cl, recs...)
	b := kstream.NewBuilder()
	g := kstream.GlobalTable(b, gt, serde.String(), serde.String(), "global-store")
	kstream.JoinGlobal(kstream.Stream(b, in, serde.String(), serde.String()), g,
		func(k, _ string) string { return k }, func(_, v, gv string) string { return v + gv }).To(out, serde.String(), serde.String())
	cfg := testConfig(t)
	cfg.StateDir = t.TempDir()
	cfg.ApplicationServer = "me:1"
	app := newApp(t, b, cfg)
	start(t, app)
	st, err := kstream.QueryStore[string, string](app, "global-store")
	if err != nil {
		t.Fatal(err)
	}
	kafkatest.Eventually(t, 60*time.Second, "global store queryable", func() bool {
		v, ok, err := st.Get("g07")
		return err == nil && ok && v == "v7"
	})
	n := 0
	if err := st.All(func(k, v string) bool {
		if k != fmt.Sprintf("g%02d", n) || v != fmt.Sprintf("v%d", n) {
			t.Errorf("All entry %d: %s=%s", n, k, v)
		}
		n++
		return true
	}); err != nil || n != 30 {
		t.Errorf("All: %d entries, %v", n, err)
	}
	km, err := app.KeyMetadata("global-store", "g01")
	if err != nil || km.Active != "me:1" {
		t.Errorf("KeyMetadata of a global store = %+v, %v", km, err)
	}
	infos := app.QueryableStores()
	if len(infos) != 1 || !infos[0].Global || infos[0].Name != "global-store" {
		t.Errorf("QueryableStores = %+v", infos)
	}
}

// A query never sees half of a commit: a processor writes the same sequence number to two
// keys for every record, and concurrent scans must always find both keys equal. Persistent
// stores reach the engine one commit at a time (one atomic batch); under exactly-once a
// memory store does too.
func TestQueryNeverSeesATornCommit(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		eos  bool
		opts []kstream.StoreOption
	}{{"pebble", false, nil}, {"pebble-eos", true, nil}, {"memory-eos", true, []kstream.StoreOption{kstream.InMemory()}}, {"memory-alos", false, []kstream.StoreOption{kstream.InMemory()}}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			in := kafkatest.CreateTopic(t, "in", 1, nil)
			b := kstream.NewBuilder()
			s := kstream.Stream(b, in, serde.String(), serde.String())
			kstream.Process(s, func() kstream.Processor[string, string, string, string] {
				return kstream.ProcessorFunc[string, string, string, string](func(ctx kstream.ProcessorContext[string, string], r kstream.Record[string, string]) error {
					st, err := kstream.GetKeyValueStore[string, string](ctx, "pair")
					if err != nil {
						return err
					}
					if err := st.Put("a", r.Value); err != nil {
						return err
					}
					time.Sleep(200 * time.Microsecond) // widen the window a torn read would need
					return st.Put("b", r.Value)
				})
			}, kstream.WithStores(kstream.KeyValueStore("pair", serde.String(), serde.String(), c.opts...)))
			cfg := testConfig(t)
			cfg.StateDir = t.TempDir()
			cfg.CommitInterval = 5 * time.Millisecond
			if c.eos {
				cfg.Guarantee = kstream.ExactlyOnce
			}
			app := newApp(t, b, cfg)
			start(t, app)
			st, err := kstream.QueryStore[string, string](app, "pair")
			if err != nil {
				t.Fatal(err)
			}
			const n = 200
			var scans, torn atomic.Int64
			done := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				for {
					select {
					case <-done:
						return
					default:
					}
					var vals []string
					if err := st.All(func(_ string, v string) bool { vals = append(vals, v); return true }); err != nil {
						continue // not running yet
					}
					scans.Add(1)
					if len(vals) == 2 && vals[0] != vals[1] || len(vals) == 1 {
						if torn.Add(1) == 1 {
							t.Errorf("torn read: %v", vals)
						}
					}
					runtime.Gosched() // four subtests spin at once: let the applications run
				}
			})
			cl := kafkatest.Client(t)
			// Ten records a produce: the store still changes at many commits (5 ms apart),
			// and the test does not wait for 200 round trips while its scanner spins (it
			// timed out so under a load of 14).
			for i := 0; i < n; i += 10 {
				var recs []*kgo.Record
				for j := i; j < min(i+10, n); j++ {
					recs = append(recs, rec(in, "k", fmt.Sprintf("%06d", j), j))
				}
				kafkatest.Produce(t, cl, recs...)
			}
			kafkatest.Eventually(t, 120*time.Second, "the last record in the store", func() bool {
				v, ok, err := st.Get("b")
				return err == nil && ok && v == fmt.Sprintf("%06d", n-1)
			})
			close(done)
			wg.Wait()
			t.Logf("%d scans, %d torn", scans.Load(), torn.Load())
			if torn.Load() > 0 || scans.Load() < 100 {
				t.Errorf("%d torn reads in %d scans", torn.Load(), scans.Load())
			}
		})
	}
}
