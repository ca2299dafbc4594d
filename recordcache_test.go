package kstream_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
)

// With Config.CacheMaxBytes, a count forwards each key's latest count once per commit
// instead of every update (Kafka Streams' record cache): 2,000 records of 5 keys come out as
// a handful of updates whose last per key is exact, under both guarantees and with the
// default Config (the cache is on by default, 10 MiB). A cache with room for one entry
// forwards every update, as does a negative CacheMaxBytes. WithoutCaching turns a store's
// cache off.
func TestRecordCacheDeduplicatesUpdates(t *testing.T) {
	t.Parallel()
	const keys, perKey = 5, 400
	for _, tc := range []struct {
		name      string
		guarantee kstream.Guarantee
		cache     int64
		opts      []kstream.StoreOption
		maxOut    int // the most output records expected
	}{
		{"default", kstream.AtLeastOnce, 0, nil, keys * perKey / 10}, // 0: what a Config that does not set it has
		{"at-least-once", kstream.AtLeastOnce, 10 << 20, nil, keys * perKey / 10},
		{"off", kstream.AtLeastOnce, -1, nil, keys * perKey},
		{"exactly-once", kstream.ExactlyOnce, 10 << 20, nil, keys * perKey / 10},
		{"one-entry", kstream.AtLeastOnce, 1, nil, keys * perKey},
		{"without-caching", kstream.AtLeastOnce, 10 << 20, []kstream.StoreOption{kstream.WithoutCaching()}, keys * perKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := kafkatest.CreateTopic(t, "clicks", 1, nil)
			out := kafkatest.CreateTopic(t, "click-counts", 1, nil)
			var recs []*kgo.Record
			for i := range keys * perKey {
				recs = append(recs, &kgo.Record{Topic: in, Key: fmt.Appendf(nil, "k%d", i%keys), Value: []byte("v")})
			}
			kafkatest.Produce(t, kafkatest.ManualProducer(t), recs...)

			b := kstream.NewBuilder()
			counts := kstream.Count(kstream.Stream(b, in, serde.String(), serde.String()).GroupByKey(), "counts", tc.opts...)
			counts.ToStream().To(out, serde.String(), serde.Int64())
			cfg := testConfig(t)
			cfg.Guarantee, cfg.CacheMaxBytes = tc.guarantee, tc.cache
			if tc.cache >= 0 {
				// Every commit forwards what the cache holds: how many updates come out
				// depends on how many commits the processing spans, which on a loaded
				// machine was enough for a sliding count to pass the bound below (10,070
				// and 15,896 on Apache Kafka under -race, at 200 ms commits). With commits
				// 5 s apart the run spans one or two.
				cfg.CommitInterval = 5 * time.Second
			}
			start(t, newApp(t, b, cfg))

			n := consumeCounts(t, out, keys, perKey, func(r *kgo.Record, latest map[string]int64) {
				c, err := serde.Int64().Deserialize(r.Value)
				if err != nil {
					t.Errorf("offset %d: %v", r.Offset, err)
				}
				if c <= latest[string(r.Key)] {
					t.Errorf("key %s: count %d after %d", r.Key, c, latest[string(r.Key)])
				}
				latest[string(r.Key)] = c
			})
			t.Logf("%d records in, %d updates out", keys*perKey, n)
			if n > tc.maxOut {
				t.Errorf("%d updates out, want at most %d", n, tc.maxOut)
			}
			if tc.maxOut == keys*perKey && n != keys*perKey {
				t.Errorf("%d updates out, want every one of the %d", n, keys*perKey)
			}
		})
	}
}

// Exactly-once with the record cache through producer fences: a fenced producer's
// transaction aborts, and the updates the cache held for it are dropped with the store
// writes (the records are processed again). Read read_committed, every key's counts
// strictly increase and end at its number of records, with far fewer updates than records.
func TestRecordCacheExactlyOnceThroughFences(t *testing.T) {
	t.Parallel()
	in, out, cfg := eosSetup(t)
	cfg.CacheMaxBytes = 0 // the default, 10 MiB (testConfig turns the cache off)
	app := newApp(t, countTopology(in, out), cfg)
	r := start(t, app)
	outputs := collect(t, out, readCommitted)
	kafkatest.Eventually(t, 60*time.Second, "RUNNING", func() bool { return app.State() == kstream.StateRunning })
	var mu sync.Mutex
	want := map[string]int64{}
	done := make(chan struct{})
	const records = 15000
	go func() { defer close(done); feed(t, in, records, 50, 100*time.Millisecond, 11, &mu, want) }()
	txnID := app.Stats().TransactionalID
	const fences = 2
	for i := range fences {
		// A producer that initializes the same transactional id fences the instance's.
		kafkatest.Eventually(t, 60*time.Second, "a commit since the last fence", func() bool { return app.Stats().Commits > int64(i*10) })
		cl := kafkatest.Client(t, kgo.TransactionalID(txnID), kgo.TransactionTimeout(10*time.Second))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if _, _, err := cl.ProducerID(ctx); err != nil {
			t.Fatalf("fence %d: %v", i, err)
		}
		cancel()
		cl.Close()
		n := int64(i + 1)
		// An instance learns of the fence when it next uses its producer: once the feed has
		// ended it has nothing to write, so each check writes one more record (the feed
		// may end before a fence under load: the in-process -race tier timed out so).
		nudge := kafkatest.Client(t)
		kafkatest.Eventually(t, 60*time.Second, "the instance handles the fence", func() bool {
			if app.Stats().ProducerFences >= n {
				return true
			}
			mu.Lock()
			want["nudge"]++
			mu.Unlock()
			kafkatest.Produce(t, nudge, &kgo.Record{Topic: in, Key: []byte("nudge"), Value: []byte("v")})
			return false
		})
	}
	<-done
	mu.Lock()
	defer mu.Unlock()
	kafkatest.Eventually(t, 120*time.Second, "every count", func() bool { return outputs.reached(want) })
	if err, done := r.wait(10 * time.Millisecond); done {
		t.Fatalf("Run returned: %v", err)
	}
	outputs.mu.Lock()
	defer outputs.mu.Unlock()
	total := 0
	for k, n := range want {
		s := outputs.seqs[k]
		total += len(s)
		for i := 1; i < len(s); i++ {
			if s[i] <= s[i-1] {
				t.Errorf("key %s: counts %v do not increase", k, s)
				break
			}
		}
		if len(s) == 0 || s[len(s)-1] != n {
			t.Errorf("key %s: last count %v, want %d", k, s, n)
		}
	}
	t.Logf("%d records, %d updates out, %d fences", records, total, app.Stats().ProducerFences)
	if total >= records/2 {
		t.Errorf("%d updates out for %d records: the cache held nothing back", total, records)
	}
}

// Session and sliding-window counts are cached too, as in Kafka Streams: 2,000 records of 5
// keys, all within one session per key, come out as a handful of updates whose last per key
// is exact, under both guarantees; without the cache, one per update (a session count
// forwards a removal and a new session for every record). A sliding count forwards far
// fewer updates with the cache than without.
func TestRecordCacheSessionAndSlidingWindows(t *testing.T) {
	t.Parallel()
	const keys = 5
	for _, tc := range []struct {
		name      string
		sliding   bool
		guarantee kstream.Guarantee
		cache     int64
	}{
		{"session", false, kstream.AtLeastOnce, 0},
		{"session-exactly-once", false, kstream.ExactlyOnce, 0},
		{"session-off", false, kstream.AtLeastOnce, -1},
		{"sliding", true, kstream.AtLeastOnce, 0},
		{"sliding-exactly-once", true, kstream.ExactlyOnce, 0},
		{"sliding-off", true, kstream.AtLeastOnce, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// A sliding count updates every window that holds a record: about perKey²/2
			// updates per key without the cache, which -race makes slow at 400.
			perKey := 400
			if tc.sliding {
				perKey = 100
			}
			in := kafkatest.CreateTopic(t, "clicks", 1, nil)
			out := kafkatest.CreateTopic(t, "click-counts", 1, nil)
			var recs []*kgo.Record
			for i := range keys * perKey {
				// One millisecond apart: one session per key (gap 1 minute), and every
				// record within the sliding window (1 minute) of the first.
				recs = append(recs, &kgo.Record{Topic: in, Key: fmt.Appendf(nil, "k%d", i%keys), Value: []byte("v"),
					Timestamp: baseTime.Add(time.Duration(i) * time.Millisecond)})
			}
			kafkatest.Produce(t, kafkatest.ManualProducer(t), recs...)

			b := kstream.NewBuilder()
			g := kstream.Stream(b, in, serde.String(), serde.String()).GroupByKey()
			var ws serde.Serde[serde.Windowed[string]]
			if tc.sliding {
				kstream.WindowedCount(g.WindowedBy(kstream.SlidingWindowsOf(time.Minute)), "counts").ToStream().To(out, nil, serde.Int64())
				ws = serde.TimeWindowed(serde.String(), time.Minute)
			} else {
				kstream.SessionCount(g.WindowedBySession(kstream.SessionWindowsOf(time.Minute)), "counts").ToStream().To(out, nil, serde.Int64())
				ws = serde.SessionWindowed(serde.String())
			}
			cfg := testConfig(t)
			cfg.Guarantee, cfg.CacheMaxBytes = tc.guarantee, tc.cache
			if tc.cache >= 0 {
				// Every commit forwards what the cache holds: how many updates come out
				// depends on how many commits the processing spans, which on a loaded
				// machine was enough for a sliding count to pass the bound below (10,070
				// and 15,896 on Apache Kafka under -race, at 200 ms commits). With commits
				// 5 s apart the run spans one or two.
				cfg.CommitInterval = 5 * time.Second
			}
			start(t, newApp(t, b, cfg))

			n := consumeCounts(t, out, keys, perKey, func(r *kgo.Record, latest map[string]int64) {
				if r.Value == nil {
					return // a session's removal
				}
				w, err := ws.Deserialize(r.Key)
				if err != nil {
					t.Errorf("offset %d: %v", r.Offset, err)
					return
				}
				c, _ := serde.Int64().Deserialize(r.Value)
				latest[w.Key] = max(latest[w.Key], c) // the key's latest count, of any window
			})
			t.Logf("%d records in, %d updates out", keys*perKey, n)
			// A session count's updates go to one session per key. Every record of a sliding
			// count makes windows of its own (its left and right windows: about 2 per
			// record), which a cache cannot merge, and updates the earlier windows that hold
			// it, which it can: at 400 records per key, 401,000 updates without the cache
			// and 8,000-10,000 with it.
			maxOut := keys * perKey / 5
			if tc.sliding {
				// A third of the 25,250 without the cache; 1,000-4,300 seen with it at 200 ms
				// commits, more when the processing spans more commits (under -race).
				maxOut = keys * perKey * perKey / 2 / 3
			}
			if tc.cache >= 0 && n > maxOut {
				t.Errorf("%d updates out, want at most %d with the cache", n, maxOut)
			}
			if tc.cache < 0 && n < keys*perKey {
				t.Errorf("%d updates out, want at least one per record without the cache", n)
			}
		})
	}
}

// consumeCounts reads the count topic out, read_committed, passing each record to note
// with the latest count of each key, until every one of keys keys (k0, k1...) has the
// count perKey, or fails after a minute. It returns the number of records read.
func consumeCounts(t *testing.T, out string, keys, perKey int, note func(r *kgo.Record, latest map[string]int64)) int {
	t.Helper()
	cl := kafkatest.Client(t, kgo.ConsumeTopics(out), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	latest := map[string]int64{}
	n := 0
	done := func() bool {
		for k := range keys {
			if latest[fmt.Sprintf("k%d", k)] != int64(perKey) {
				return false
			}
		}
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for !done() && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			n++
			note(r, latest)
		})
	}
	if !done() {
		t.Fatalf("final counts %v, want %d for each of %d keys", latest, perKey, keys)
	}
	return n
}
