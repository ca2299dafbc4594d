package kstream_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() { kafkatest.RegisterChild("sjoin-app", runStreamJoinChild) }

// streamJoinTopology left-joins topic left with topic right within 500ms windows (grace
// 200ms) and writes "<left>+<right>" (or "<left>+-" for a non-match) to out.
func streamJoinTopology(left, right, out string) *kstream.Builder {
	b := kstream.NewBuilder()
	l := kstream.Stream(b, left, serde.String(), serde.String())
	r := kstream.Stream(b, right, serde.String(), serde.String())
	w := kstream.JoinWindowsOf(500 * time.Millisecond).WithGrace(200 * time.Millisecond)
	kstream.LeftJoinWindowed(l, r, func(_ string, lv, rv string, found bool) string {
		if !found {
			rv = "-"
		}
		return lv + "+" + rv
	}, w).To(out, serde.String(), serde.String())
	return b
}

// runStreamJoinChild runs streamJoinTopology in a child process until it is killed,
// configured by APP_ID, STATE_DIR, LEFT, RIGHT and OUT, under exactly-once.
func runStreamJoinChild() error {
	cfg := childConfig()
	cfg.Guarantee = kstream.ExactlyOnce
	app, err := kstream.New(streamJoinTopology(os.Getenv("LEFT"), os.Getenv("RIGHT"), os.Getenv("OUT")), cfg)
	if err != nil {
		return err
	}
	return app.Run(context.Background())
}

// A stream-stream left join survives SIGKILL under exactly-once: killed again and again
// while windows are open and restarted (once with an empty state directory, restoring its
// three stores from their changelogs), it gives every left record exactly one result,
// read read_committed: the match with its right record, or, for a left record without one,
// the non-match emitted after its window closed.
func TestStreamLeftJoinSurvivesKillsExactlyOnce(t *testing.T) {
	t.Parallel()
	streamLeftJoinSurvivesKills(t, kstream.GroupProtocolClassic)
}

// The same as a streams group (KIP-1071) on Apache Kafka.
func TestStreamLeftJoinSurvivesKillsExactlyOnceStreams(t *testing.T) {
	needStreamsBroker(t)
	t.Parallel()
	streamLeftJoinSurvivesKills(t, kstream.GroupProtocolStreams)
}

func streamLeftJoinSurvivesKills(t *testing.T, p kstream.GroupProtocol) {
	const parts, keys, stepMs = 3, 1000, 2
	records, kills := 6_000, 2 // KSTREAM_TEST_LONG=1 runs more
	// finish bounds the wait of the last child for every result: the long form on a real
	// broker under -race, beside 7 other parallel tests on 2 cores, once needed more than
	// 120 s (16k of 30k left records had their result then, the rest still coming in order),
	// and on a machine that ran everything 1.3-2x slower, more than 300 s (both variants of
	// the test: about 25k of 30k after 300 s, still coming in order at about 100 a second).
	// The wait ends as soon as every result is in.
	finish := 120 * time.Second
	if os.Getenv("KSTREAM_TEST_LONG") != "" {
		records, kills, finish = 30_000, 6, 480*time.Second
	}
	left := kafkatest.CreateTopic(t, "left", parts, nil)
	right := kafkatest.CreateTopic(t, "right", parts, nil)
	out := kafkatest.CreateTopic(t, "out", parts, nil)
	app := kafkatest.Name(t, "app")
	protoEnv := useProtocol(t, p, app, nil)
	env := func(dir string) []string {
		return append([]string{"APP_ID=" + app, "STATE_DIR=" + dir, "LEFT=" + left, "RIGHT=" + right, "OUT=" + out}, protoEnv...)
	}

	var mu sync.Mutex
	got := map[string][]string{} // left value -> results
	cl := kafkatest.Client(t, kgo.ConsumeTopics(out), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), readCommitted)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				v := string(r.Value)
				lv, _, _ := strings.Cut(v, "+")
				if strings.HasPrefix(lv, "flush") {
					return
				}
				got[lv] = append(got[lv], string(r.Key)+"="+v)
			})
			mu.Unlock()
		}
	}()

	// Left record i has key k(i) (each key recurs every keys*stepMs = 2s, far outside the
	// windows) and a right record 100ms before it (i%4 == 0), 100ms after it (i%4 == 1) or
	// none. Event time near the wall clock, so that a real broker keeps the changelogs.
	want := map[string]string{}
	key := func(i int) string { return fmt.Sprintf("k%04d", i%keys) }
	base := time.Now().Add(-time.Hour).UnixMilli()
	const batch = 500
	var batches [][]*kgo.Record
	for i := 0; i < records; i += batch {
		recs := make([]*kgo.Record, 0, 2*batch)
		for j := i; j < i+batch; j++ {
			ts := base + int64(j*stepMs)
			lv, rv := fmt.Sprintf("l%d", j), fmt.Sprintf("r%d", j)
			want[lv] = key(j) + "=" + lv + "+-"
			rts := ts - 100
			if j%4 == 1 {
				rts = ts + 100
			}
			if j%4 <= 1 {
				want[lv] = key(j) + "=" + lv + "+" + rv
				recs = append(recs, &kgo.Record{Topic: right, Key: []byte(key(j)), Value: []byte(rv), Timestamp: time.UnixMilli(rts)})
			}
			recs = append(recs, &kgo.Record{Topic: left, Key: []byte(key(j)), Value: []byte(lv), Timestamp: time.UnixMilli(ts)})
		}
		batches = append(batches, recs)
	}
	feedDone := make(chan struct{})
	go func() {
		defer close(feedDone)
		pcl := kafkatest.Client(t)
		for _, recs := range batches {
			if err := pcl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				t.Errorf("producing input: %v", err)
				return
			}
			time.Sleep(time.Duration(kills) * 7 * time.Second / time.Duration(len(batches)))
		}
		// Then stream time moves past every window, on every partition, through flush
		// records whose own results are ignored: every pending non-match is emitted.
		for step := int64(1); step <= 3; step++ {
			var recs []*kgo.Record
			for k := range 4 * parts {
				recs = append(recs, &kgo.Record{Topic: left, Key: []byte(fmt.Sprintf("flush%d", k)), Value: []byte(fmt.Sprintf("flush%d", k)),
					Timestamp: time.UnixMilli(base + int64(records*stepMs) + step*1000)})
			}
			if err := pcl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				t.Errorf("producing input: %v", err)
			}
		}
	}()

	done := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for lv := range want {
			if len(got[lv]) == 0 {
				return false
			}
		}
		return true
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(7, 8))
	var last *kafkatest.Child
	for i := 0; i <= kills; i++ {
		if i == kills/2 {
			dir = t.TempDir() // once with an empty state directory: restored from the changelogs
		}
		ch := kafkatest.StartChild(t, "sjoin-app", env(dir)...)
		last = ch
		kafkatest.Eventually(t, 90*time.Second, fmt.Sprintf("child %d running", i), func() bool {
			return childRunning(ch.Output(), p)
		})
		if i == kills {
			<-feedDone
			// Not Eventually: on a timeout, the check below says which records lack a result.
			// Progress is logged every 15 s, and a child that ended stops the wait.
			began, lastLog := time.Now(), time.Now()
			for deadline := time.Now().Add(finish); !done() && time.Now().Before(deadline); {
				if ended, err := ch.Exited(); ended {
					t.Errorf("the last child ended while results were missing: %v", err)
					break
				}
				if time.Since(lastLog) > 15*time.Second {
					lastLog = time.Now()
					mu.Lock()
					t.Logf("%v after the last start: %d of %d left records have a result", time.Since(began).Round(time.Second), len(got), len(want))
					mu.Unlock()
				}
				time.Sleep(100 * time.Millisecond)
			}
			time.Sleep(time.Second) // a duplicate would arrive now
			ch.Kill(t)
			break
		}
		time.Sleep(time.Duration(500+rng.IntN(1500)) * time.Millisecond)
		ch.Kill(t)
		if t.Failed() {
			break
		}
	}
	<-feedDone
	cancel()

	mu.Lock()
	defer mu.Unlock()
	bad, matches := 0, 0
	for lv, w := range want {
		g := got[lv]
		if len(g) != 1 || g[0] != w {
			bad++
			if bad <= 10 {
				t.Errorf("left record %s: results %q, want exactly [%s]", lv, g, w)
			}
		}
		if !strings.HasSuffix(w, "+-") {
			matches++
		}
	}
	for lv := range got {
		if _, ok := want[lv]; !ok {
			t.Errorf("results %q for left record %s, which was never produced", got[lv], lv)
		}
	}
	t.Logf("%d left records (%d with a match), %d wrong", len(want), matches, bad)
	if bad > 0 {
		// The last child's warnings and errors, one line each, so that a CI summary that
		// keeps only the test's own lines still shows them.
		n := 0
		for _, line := range strings.Split(last.Output(), "\n") {
			if (strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") || strings.Contains(line, "stale") || strings.Contains(line, "kafkatest:")) && n < 60 {
				t.Logf("last child: %s", line)
				n++
			}
		}
	}
}

// Under exactly-once, a transaction that aborts takes the join's stores and its clock back
// to the last commit: an output too large for its topic aborts the transaction (the
// production error handler says Continue, so the instance goes on and skips that output on
// the replay), and the replayed records give the same matches and non-matches, each once.
// (With the clock left at the aborted stream time, a replayed left record would be emitted
// at once as a non-match before its match.)
func TestStreamLeftJoinAbortExactlyOnce(t *testing.T) {
	t.Parallel()
	left := kafkatest.CreateTopic(t, "left", 1, nil)
	right := kafkatest.CreateTopic(t, "right", 1, nil)
	limit := "2000"
	out := kafkatest.CreateTopic(t, "out", 1, map[string]*string{"max.message.bytes": &limit})
	base := time.Now().Add(-time.Hour).UnixMilli()
	r := func(topic, k, v string, ms int64) *kgo.Record {
		return &kgo.Record{Topic: topic, Key: []byte(k), Value: []byte(v), Timestamp: time.UnixMilli(base + ms)}
	}
	oneByOne(t,
		r(left, "a", "L1", 0), r(right, "a", "R1", 300), r(left, "b", "L2", 500), r(left, "c", "L3", 1000),
		r(right, "c", "R3", 1200), r(right, "d", "R4", 1400), r(left, "d", "big", 1500), r(left, "e", "L5", 2100),
		r(right, "e", "R5", 2200), r(left, "f", "L6", 3000), r(left, "g", "L7", 6000), r(left, "h", "L8", 20000))

	b := kstream.NewBuilder()
	kstream.LeftJoinWindowed(kstream.Stream(b, left, serde.String(), serde.String()), kstream.Stream(b, right, serde.String(), serde.String()),
		func(_ string, lv, rv string, found bool) string {
			if lv == "big" {
				return strings.Repeat("x", 5000)
			}
			if !found {
				rv = "-"
			}
			return lv + "+" + rv
		}, kstream.JoinWindowsOf(time.Second).WithGrace(500*time.Millisecond)).To(out, serde.String(), serde.String())
	cfg := testConfig(t)
	cfg.StateDir = t.TempDir()
	cfg.Guarantee = kstream.ExactlyOnce
	cfg.ProductionErrorHandler = kstream.LogAndContinue()
	app := newApp(t, b, cfg)
	start(t, app)

	kafkatest.Consume(t, out, 6, 60*time.Second, readCommitted)
	time.Sleep(time.Second) // a duplicate would arrive now
	got := kafkatest.Drain(t, out, time.Second, 10*time.Second, readCommitted)
	var lines []string
	for _, rec := range got {
		lines = append(lines, fmt.Sprintf("%s|%s|%d", rec.Key, rec.Value, rec.Timestamp.UnixMilli()-base))
	}
	want := []string{"a|L1+R1|300", "c|L3+R3|1200", "b|L2+-|500", "e|L5+R5|2200", "f|L6+-|3000", "g|L7+-|6000"}
	if strings.Join(lines, " ") != strings.Join(want, " ") {
		t.Errorf("read_committed output\n got %q\nwant %q", lines, want)
	}
	if st := app.Stats(); st.TransactionsAborted == 0 {
		t.Errorf("stats %+v: the large output aborted no transaction", st)
	}
}
