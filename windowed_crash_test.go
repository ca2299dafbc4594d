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

func init() { kafkatest.RegisterChild("window-app", runWindowChild) }

// windowTopology counts the records of each key of in per 1-second tumbling window (grace
// 200ms) and writes one final result per window to out, keyed "<key>@<window start ms>":
// with emit = "close", through EmitOnWindowClose; with "suppress", through
// Suppress(UntilWindowCloses).
func windowTopology(in, out, emit string) *kstream.Builder {
	b := kstream.NewBuilder()
	w := kstream.Stream(b, in, serde.String(), serde.String()).GroupByKey().
		WindowedBy(kstream.TimeWindowsOf(time.Second).WithGrace(200 * time.Millisecond))
	if emit == "close" {
		w = w.EmitOnWindowClose()
	}
	counts := kstream.WindowedCount(w, "wcounts")
	finals := windowFinals(counts, emit)
	kstream.Map(finals.ToStream(), func(k serde.Windowed[string], n int64) (string, int64) {
		return fmt.Sprintf("%s@%d", k.Key, k.StartMs()), n
	}).To(out, serde.String(), serde.Int64())
	return b
}

// runWindowChild runs windowTopology in a child process until it is killed, configured by
// APP_ID, STATE_DIR, IN, OUT, EMIT and GUARANTEE=eos.
func runWindowChild() error {
	cfg := childConfig()
	app, err := kstream.New(windowTopology(os.Getenv("IN"), os.Getenv("OUT"), os.Getenv("EMIT")), cfg)
	if err != nil {
		return err
	}
	return app.Run(context.Background())
}

// windowCrash feeds windowTopology while its child process is killed with SIGKILL at random
// moments, restarted with its state directory (once with an empty one); then records far in
// the future close every window. It returns every final result per "<key>@<start>" and
// the true counts.
func windowCrash(t *testing.T, eos bool, emit string) (got map[string][]int64, want map[string]int64) {
	return windowCrashAs(t, kstream.GroupProtocolClassic, eos, emit)
}

// windowCrashAs is windowCrash with the group protocol p.
func windowCrashAs(t *testing.T, p kstream.GroupProtocol, eos bool, emit string) (got map[string][]int64, want map[string]int64) {
	const parts, keys, stepMs = 3, 200, 2
	records, kills := 12_000, 2 // the short form; KSTREAM_TEST_LONG=1 (and CI's real-Kafka tier) runs more
	if os.Getenv("KSTREAM_TEST_LONG") != "" {
		records, kills = 60_000, 6
	}
	in := kafkatest.CreateTopic(t, "in", parts, nil)
	out := kafkatest.CreateTopic(t, "out", parts, nil)
	app := kafkatest.Name(t, "app")
	protoEnv := useProtocol(t, p, app, nil)
	env := func(dir string) []string {
		e := append([]string{"APP_ID=" + app, "STATE_DIR=" + dir, "IN=" + in, "OUT=" + out, "EMIT=" + emit}, protoEnv...)
		if eos {
			e = append(e, "GUARANTEE=eos")
		}
		return e
	}
	var mu sync.Mutex
	got = map[string][]int64{}
	opts := []kgo.Opt{kgo.ConsumeTopics(out), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}
	if eos {
		opts = append(opts, readCommitted)
	}
	cl := kafkatest.Client(t, opts...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				if strings.HasPrefix(string(r.Key), "flush") {
					return
				}
				n, _ := serde.Int64().Deserialize(r.Value)
				got[string(r.Key)] = append(got[string(r.Key)], n)
			})
			mu.Unlock()
		}
	}()

	want = map[string]int64{}
	key := func(i int) string { return fmt.Sprintf("k%03d", (i*7919)%keys) }
	// Event time near the wall clock: the changelog of a window store is compact,delete with
	// a retention of the store's plus a day, so a real broker deletes records with older
	// timestamps (and a restore would find nothing), as it would in production.
	base := time.Now().Add(-time.Hour).UnixMilli() / 1000 * 1000
	feedDone := make(chan struct{})
	go func() {
		defer close(feedDone)
		pcl := kafkatest.Client(t)
		const batch = 1000
		for i := 0; i < records; i += batch {
			recs := make([]*kgo.Record, 0, batch)
			for j := i; j < i+batch; j++ {
				ts := base + int64(j*stepMs)
				want[fmt.Sprintf("%s@%d", key(j), ts/1000*1000)]++
				recs = append(recs, &kgo.Record{Topic: in, Key: []byte(key(j)), Value: []byte("v"), Timestamp: time.UnixMilli(ts)})
			}
			if err := pcl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				t.Errorf("producing input: %v", err)
				return
			}
			time.Sleep(time.Duration(kills) * 7 * time.Second / time.Duration(records/batch))
		}
		// Then time moves on by steps shorter than the grace plus what the retention adds
		// (a bigger jump would expire windows before they close, as in Kafka Streams),
		// through flush keys covering every partition whose own windows are ignored:
		// every window of the input closes.
		for step := int64(1); step <= 5; step++ {
			var recs []*kgo.Record
			for k := range 4 * parts {
				recs = append(recs, &kgo.Record{Topic: in, Key: []byte(fmt.Sprintf("flush%d", k)), Value: []byte("v"),
					Timestamp: time.UnixMilli(base + int64(records*stepMs) + step*300)})
			}
			if err := pcl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				t.Errorf("producing input: %v", err)
			}
		}
	}()

	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(5, 6))
	done := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for w := range want {
			if len(got[w]) == 0 {
				return false
			}
		}
		return true
	}
	for i := 0; i <= kills; i++ {
		if i == kills/2 {
			dir = t.TempDir() // once with an empty state directory
		}
		ch := kafkatest.StartChild(t, "window-app", env(dir)...)
		kafkatest.Eventually(t, 90*time.Second, fmt.Sprintf("child %d running", i), func() bool {
			return childRunning(ch.Output(), p)
		})
		if i == kills {
			<-feedDone
			// Not Eventually: on a timeout, checkFinals below reports which windows lack
			// their final result.
			for deadline := time.Now().Add(120 * time.Second); !done() && time.Now().Before(deadline); {
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
	res := make(map[string][]int64, len(got))
	for k, v := range got {
		res[k] = v
	}
	return res, want
}

// checkFinals checks the final results of a window crash run: every window has one (none
// for a window that does not exist); under exactly-once exactly one, with the true count;
// under at-least-once at least one, and with lastAtLeast the last at least the true count.
//
// The last check holds for EmitOnWindowClose, whose final results are read from the window
// store, but not always for Suppress under at-least-once: a window that the store had
// expired by its own stream time when the task crashed has lost its value, and the buffer,
// restored from its changelog without its later updates, may emit it again below its count
// (seen on Apache Kafka under load as [3 2] for a window of 3 records). Within the store's
// retention the aggregation's rewind to the committed stream time closes the gap (see
// TestSuppressFinalNotBelowCountAfterCrashAtLeastOnce and docs/windows.md); exactly-once
// closes it in full.
func checkFinals(t *testing.T, eos, lastAtLeast bool, got map[string][]int64, want map[string]int64) {
	t.Helper()
	dups, bad, lower := 0, 0, 0
	for w, n := range want {
		g := got[w]
		switch {
		case len(g) == 0:
			bad++
			if bad <= 5 {
				t.Errorf("window %s: no final result (count %d)", w, n)
			}
		case eos && (len(g) != 1 || g[0] != n):
			bad++
			if bad <= 5 {
				t.Errorf("window %s: final results %v, want exactly [%d]", w, g, n)
			}
		case !eos && lastAtLeast && g[len(g)-1] < n:
			bad++
			if bad <= 5 {
				t.Errorf("window %s: final results %v, want the last at least %d", w, g, n)
			}
		case len(g) > 1:
			dups++
			if g[len(g)-1] < n {
				lower++
			}
		}
	}
	for w := range got {
		if _, ok := want[w]; !ok {
			t.Errorf("final result for window %s, which has no record", w)
		}
	}
	t.Logf("%d windows, %d wrong, %d with more than one final result (%d of them with the last below the true count)", len(want), bad, dups, lower)
}

// Final results survive SIGKILL: a windowed count emitting on window close, killed again
// and again in the middle of open windows and restarted (once with an empty state
// directory), gives every window exactly one final result with its true count under
// exactly-once.
func TestWindowFinalResultsSurviveKillsExactlyOnce(t *testing.T) {
	t.Parallel()
	got, want := windowCrash(t, true, "close")
	checkFinals(t, true, true, got, want)
}

// The same as a streams group (KIP-1071) on Apache Kafka.
func TestWindowFinalResultsSurviveKillsExactlyOnceStreams(t *testing.T) {
	needStreamsBroker(t)
	t.Parallel()
	got, want := windowCrashAs(t, kstream.GroupProtocolStreams, true, "close")
	checkFinals(t, true, true, got, want)
}

// The same under at-least-once: no window loses its final result.
func TestWindowFinalResultsSurviveKillsAtLeastOnce(t *testing.T) {
	t.Parallel()
	got, want := windowCrash(t, false, "close")
	checkFinals(t, false, true, got, want)
}

// Suppress(UntilWindowCloses) across the same kills: its buffer, kept in a changelogged
// store, neither loses nor duplicates a final result under exactly-once.
func TestSuppressSurvivesKillsExactlyOnce(t *testing.T) {
	t.Parallel()
	got, want := windowCrash(t, true, "suppress")
	checkFinals(t, true, true, got, want)
}

// The same as a streams group (KIP-1071) on Apache Kafka.
func TestSuppressSurvivesKillsExactlyOnceStreams(t *testing.T) {
	needStreamsBroker(t)
	t.Parallel()
	got, want := windowCrashAs(t, kstream.GroupProtocolStreams, true, "suppress")
	checkFinals(t, true, true, got, want)
}

// The same under at-least-once: no window loses its final result (a repeated one may count
// fewer records: see checkFinals).
func TestSuppressSurvivesKillsAtLeastOnce(t *testing.T) {
	t.Parallel()
	got, want := windowCrash(t, false, "suppress")
	checkFinals(t, false, false, got, want)
}
