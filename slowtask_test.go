package kstream_test

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// slowTopology copies in to out (only the fast records with fastOnly) and sleeps slowSleep
// in its operator for every record whose key starts with "s-" (all in partition 0 in these
// tests: the slow task's). slowDone counts the slow records processed, fastDone the others.
func slowTopology(in, out string, slowSleep time.Duration, fastOnly bool, slowDone, fastDone *atomic.Int64) *kstream.Builder {
	b := kstream.NewBuilder()
	s := kstream.Stream(b, in, serde.String(), serde.String()).
		Peek(func(k, _ string) {
			if strings.HasPrefix(k, "s-") {
				time.Sleep(slowSleep)
				slowDone.Add(1)
				return
			}
			fastDone.Add(1)
		})
	if fastOnly {
		s = s.Filter(func(k, _ string) bool { return !strings.HasPrefix(k, "s-") })
	}
	s.To(out, serde.String(), serde.String())
	return b
}

// TestSlowTaskDoesNotHoldOthers: one task whose operator sleeps 10 ms per record, with 20 s
// of records to process, does not hold the other tasks of the instance to its pace. Fast
// records are written one at a time, each after the previous one was processed (so each
// needs a poll and a turn of its own): all 100 are processed while the slow task is still
// working through its backlog. When the poll loop waited for every task's turn (each as long
// as the commit interval, 1 s here, for the slow task), each of them waited for a slow turn,
// and the slow task finished its backlog first.
func TestSlowTaskDoesNotHoldOthers(t *testing.T) {
	t.Parallel()
	const parts, slowRecords, rounds = 6, 2000, 100
	in := kafkatest.CreateTopic(t, "in", parts, nil)
	out := kafkatest.CreateTopic(t, "out", parts, nil)
	prod := kafkatest.ManualProducer(t)
	var slow []*kgo.Record
	for i := range slowRecords {
		r := rec(in, fmt.Sprintf("s-%05d", i), "v", i)
		r.Partition = 0
		slow = append(slow, r)
	}
	kafkatest.Produce(t, prod, slow...)

	var slowDone, fastDone atomic.Int64
	cfg := testConfig(t)
	cfg.CommitInterval = time.Second
	app := newApp(t, slowTopology(in, out, 10*time.Millisecond, true, &slowDone, &fastDone), cfg)
	start(t, app)
	kafkatest.Eventually(t, 60*time.Second, "the slow task to start", func() bool { return slowDone.Load() > 0 })

	for i := range rounds {
		r := rec(in, fmt.Sprintf("f-%03d", i), strconv.Itoa(i), i)
		r.Partition = int32(1 + i%(parts-1))
		kafkatest.Produce(t, prod, r)
		kafkatest.Eventually(t, 60*time.Second, fmt.Sprintf("fast record %d to be processed", i), func() bool { return fastDone.Load() == int64(i+1) })
	}
	s := slowDone.Load()
	t.Logf("%d fast records processed one after the other while the slow task processed %d of its %d", rounds, s, slowRecords)
	if s >= slowRecords {
		t.Fatalf("the slow task finished its %d records before the other tasks processed %d records one at a time: it held them up", slowRecords, rounds)
	}
	recs := kafkatest.Consume(t, out, rounds, 30*time.Second)
	got := map[string]bool{}
	for _, r := range recs {
		k := string(r.Key)
		if got[k] || !strings.HasPrefix(k, "f-") || string(r.Value) != strconv.Itoa(mustAtoi(t, k[2:])) {
			t.Fatalf("unexpected output %s=%s (seen before: %v)", k, r.Value, got[k])
		}
		got[k] = true
	}
	if len(got) != rounds {
		t.Fatalf("got %d distinct outputs, want %d", len(got), rounds)
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("atoi %q: %v", s, err)
	}
	return n
}

// TestSlowTaskCommits: with a slow task, commits stay correct and are not held back: the
// committed offset of the slow partition never covers a record the slow task has not
// processed, it advances while the slow task works, the fast partitions are committed to
// their end meanwhile, and every record is output exactly once (under exactly-once, read
// committed).
func TestSlowTaskCommits(t *testing.T) {
	t.Parallel()
	for _, eos := range []bool{false, true} {
		name := "AtLeastOnce"
		if eos {
			name = "ExactlyOnce"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testSlowTaskCommits(t, eos)
		})
	}
}

func testSlowTaskCommits(t *testing.T, eos bool) {
	const parts, slowRecords, fastPerPart = 3, 300, 300
	in := kafkatest.CreateTopic(t, "in", parts, nil)
	out := kafkatest.CreateTopic(t, "out", parts, nil)
	prod := kafkatest.ManualProducer(t)
	var recs []*kgo.Record
	for i := range slowRecords {
		r := rec(in, fmt.Sprintf("s-%05d", i), "v", i)
		r.Partition = 0
		recs = append(recs, r)
	}
	for p := int32(1); p < parts; p++ {
		for i := range fastPerPart {
			r := rec(in, fmt.Sprintf("f-%d-%05d", p, i), "v", i)
			r.Partition = p
			recs = append(recs, r)
		}
	}
	kafkatest.Produce(t, prod, recs...)

	var slowDone, fastDone atomic.Int64
	cfg := testConfig(t)
	cfg.CommitInterval = 100 * time.Millisecond
	if eos {
		cfg.Guarantee = kstream.ExactlyOnce
		cfg.StateDir = t.TempDir()
	}
	app := newApp(t, slowTopology(in, out, 10*time.Millisecond, false, &slowDone, &fastDone), cfg)
	run := start(t, app)

	adm := kadm.NewClient(kafkatest.Client(t))
	ctx := kafkatest.Context(t, 2*time.Minute)
	committed := func() map[int32]int64 {
		resp, err := adm.FetchOffsets(ctx, cfg.ApplicationID)
		if err != nil {
			return nil
		}
		m := map[int32]int64{}
		for p := range int32(parts) {
			if o, ok := resp.Lookup(in, p); ok && o.Err == nil && o.At >= 0 {
				m[p] = o.At
			}
		}
		return m
	}
	var partial, fastDoneWhileSlow bool
	for slowDone.Load() < slowRecords {
		c := committed()
		processed := slowDone.Load() // after the committed offsets were read
		if c[0] > processed {
			t.Fatalf("the slow partition's committed offset %d covers records not processed (%d processed)", c[0], processed)
		}
		if processed < slowRecords {
			partial = partial || (c[0] > 0 && c[0] < slowRecords)
			fastDoneWhileSlow = fastDoneWhileSlow || (c[1] == fastPerPart && c[2] == fastPerPart)
		}
		if ctx.Err() != nil {
			t.Fatalf("the slow task processed %d of %d records in 2 minutes", slowDone.Load(), slowRecords)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !partial {
		t.Fatalf("no commit covered part of the slow partition while its task worked: commits waited for it")
	}
	if !fastDoneWhileSlow {
		t.Fatalf("the fast partitions were not committed to their end while the slow task worked")
	}
	kafkatest.Eventually(t, 30*time.Second, "every partition committed to its end", func() bool {
		c := committed()
		return c[0] == slowRecords && c[1] == fastPerPart && c[2] == fastPerPart
	})
	if err := run.stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	var opts []kgo.Opt
	if eos {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	total := slowRecords + fastPerPart*(parts-1)
	outs := kafkatest.Drain(t, out, time.Second, 30*time.Second, opts...)
	seen := map[string]int{}
	for _, r := range outs {
		seen[string(r.Key)]++
	}
	if len(outs) != total || len(seen) != total {
		t.Fatalf("output: %d records, %d distinct keys; want each of the %d inputs exactly once", len(outs), len(seen), total)
	}
	if st := app.Stats(); st.Commits == 0 {
		t.Fatalf("stats %+v: no commit", st)
	}
}
