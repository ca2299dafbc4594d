package kstream_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// readCommitted is the option of a consumer that sees only committed transactions.
var readCommitted = kgo.FetchIsolationLevel(kgo.ReadCommitted())

// Exactly-once without crashes: counts are exact, every commit is a transaction, and a
// read_committed reader sees each count once.
func TestExactlyOnceCounts(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 3, nil)
	out := kafkatest.CreateTopic(t, "out", 3, nil)
	cfg := testConfig(t)
	cfg.Guarantee = kstream.ExactlyOnce
	cfg.CommitInterval = 0 // the exactly-once default, 100ms
	cfg.StateDir = t.TempDir()
	app := newApp(t, countTopology(in, out), cfg)
	start(t, app)
	outputs := collect(t, out, readCommitted)
	want := map[string]int64{}
	produceCounts(t, in, 20000, 500, 3, want)
	kafkatest.Eventually(t, 60*time.Second, "exact counts", func() bool { return outputs.reached(want) })
	outputs.checkExact(t, want)
	st := app.Stats()
	if !st.ExactlyOnce || st.Commits == 0 || st.TransactionalID == "" {
		t.Fatalf("stats %+v: want exactly-once commits and a transactional id", st)
	}
	t.Logf("stats: %+v", st)
}

// crashRun is the configuration of a crash test: a counting child process killed with
// SIGKILL again and again while input arrives.
type crashRun struct {
	eos     bool
	records int // input records, written while the children run and die
	keys    int
	kills   int
	// protocol is the group protocol (classic by default).
	protocol kstream.GroupProtocol
}

// crashSize is the short form run by go test (5 kills); KSTREAM_TEST_LONG=1 (and the real-Kafka
// tier in CI) runs the long form: 1M records over 10k keys, 10 kills.
func crashSize() (records, keys, kills int) {
	if os.Getenv("KSTREAM_TEST_LONG") != "" {
		return 1_000_000, 10_000, 10
	}
	return 100_000, 2_000, 5
}

// restoredRe matches the restore lines the child prints (see restorePrinter).
var restoredRe = regexp.MustCompile(`RESTORED partition=(\d+) records=(\d+)`)

// runCrashes feeds the counting pipeline while a child process running it is killed with
// SIGKILL at random moments c.kills times, restarted each time with the same state
// directory except once with an empty one; a last child then finishes the input. It
// returns the output collector, the true counts, and each child's restored records per
// partition (nil entries for the first start and the empty-directory restart).
func runCrashes(t *testing.T, c crashRun) (*outputCollector, map[string]int64, []map[int32]int64, string) {
	t.Helper()
	const parts = 3
	in := kafkatest.CreateTopic(t, "in", parts, nil)
	out := kafkatest.CreateTopic(t, "out", parts, nil)
	app := kafkatest.Name(t, "app")
	protoEnv := useProtocol(t, c.protocol, app, nil)
	env := func(dir string) []string {
		e := append([]string{"APP_ID=" + app, "STATE_DIR=" + dir, "IN=" + in, "OUT=" + out, "COMMIT_MS=100"}, protoEnv...)
		if c.eos {
			e = append(e, "GUARANTEE=eos")
		}
		return e
	}
	var opts []kgo.Opt
	if c.eos {
		opts = append(opts, readCommitted)
	}
	outputs := collect(t, out, opts...)

	// The input arrives in batches while the children run and die.
	want := map[string]int64{}
	var wantMu sync.Mutex
	feedDone := make(chan struct{})
	go func() {
		defer close(feedDone)
		cl := kafkatest.Client(t)
		rng := rand.New(rand.NewPCG(11, 12))
		const batch = 1000
		// Spread over about the time the kills take (a restart waits about one session
		// timeout, 6s, for the dead member to leave the group).
		interval := time.Duration(c.kills) * 7 * time.Second / time.Duration(c.records/batch+1)
		for i := 0; i < c.records; i += batch {
			recs := make([]*kgo.Record, 0, batch)
			wantMu.Lock()
			for range min(batch, c.records-i) {
				k := fmt.Sprintf("k%05d", rng.IntN(c.keys))
				want[k]++
				recs = append(recs, &kgo.Record{Topic: in, Key: []byte(k), Value: []byte("v")})
			}
			wantMu.Unlock()
			if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				t.Errorf("producing input: %v", err)
				return
			}
			time.Sleep(interval)
		}
	}()

	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(21, 22))
	var restored []map[int32]int64
	parse := func(ch *kafkatest.Child, counted bool) {
		var m map[int32]int64
		if counted {
			m = map[int32]int64{}
			for _, g := range restoredRe.FindAllStringSubmatch(ch.Output(), -1) {
				p, _ := strconv.Atoi(g[1])
				n, _ := strconv.ParseInt(g[2], 10, 64)
				m[int32(p)] += n
			}
		}
		restored = append(restored, m)
	}
	for i := 0; i <= c.kills; i++ {
		counted := i > 0
		if i == c.kills/2 {
			dir, counted = t.TempDir(), false // once with an empty state directory
		}
		ch := kafkatest.StartChild(t, "count-app", env(dir)...)
		kafkatest.Eventually(t, 90*time.Second, fmt.Sprintf("child %d running", i), func() bool {
			return childRunning(ch.Output(), c.protocol)
		})
		if i == c.kills {
			<-feedDone
			wantMu.Lock()
			// At-least-once may count records twice: done when every count is at least
			// its true value.
			kafkatest.Eventually(t, 120*time.Second, "every count", func() bool { return outputs.reachedAtLeast(want, !c.eos) })
			wantMu.Unlock()
			ch.Kill(t)
			parse(ch, counted)
			break
		}
		time.Sleep(time.Duration(300+rng.IntN(1500)) * time.Millisecond)
		ch.Kill(t)
		parse(ch, counted)
		if t.Failed() {
			break
		}
	}
	<-feedDone
	return outputs, want, restored, app
}

// txnSizes returns, per partition of a changelog, the largest number of records between two
// transaction markers: what one transaction (one commit interval) wrote.
func txnSizes(t *testing.T, topic string) map[int32]int64 {
	t.Helper()
	largest, run := map[int32]int64{}, map[int32]int64{}
	for _, r := range kafkatest.Drain(t, topic, 2*time.Second, 60*time.Second, readCommitted, kgo.KeepControlRecords()) {
		if r.Attrs.IsControl() {
			largest[r.Partition] = max(largest[r.Partition], run[r.Partition])
			run[r.Partition] = 0
			continue
		}
		run[r.Partition]++
	}
	return largest
}

// Exactly-once across crashes: the counting pipeline's process is killed with SIGKILL at
// random moments, at least 10 times, and restarted with its state directory (once with an
// empty one). Read read_committed, every key's counts are exactly 1, 2, ..., n, and each
// restart restored at most what one transaction wrote to the changelog partition: local
// state is never wiped.
func TestExactlyOnceSurvivesKills(t *testing.T) {
	t.Parallel()
	exactlyOnceSurvivesKills(t, kstream.GroupProtocolClassic)
}

// The same as a streams group (KIP-1071) on Apache Kafka.
func TestExactlyOnceSurvivesKillsStreams(t *testing.T) {
	needStreamsBroker(t)
	t.Parallel()
	exactlyOnceSurvivesKills(t, kstream.GroupProtocolStreams)
}

func exactlyOnceSurvivesKills(t *testing.T, p kstream.GroupProtocol) {
	records, keys, kills := crashSize()
	outputs, want, restored, app := runCrashes(t, crashRun{eos: true, records: records, keys: keys, kills: kills, protocol: p})
	outputs.checkExact(t, want)
	bound := txnSizes(t, app+"-counts-changelog")
	var total int64
	for i, m := range restored {
		for p, n := range m {
			total += n
			if n > bound[p] {
				t.Errorf("start %d restored %d records of partition %d; one transaction wrote at most %d", i, n, p, bound[p])
			}
		}
	}
	t.Logf("%d records, %d keys, %d restarts: restored per start %v (largest transaction per partition %v)", records, keys, len(restored)-1, restored, bound)
}

// At-least-once across the same crashes: nothing is lost, every key's last count is at
// least its true count (records processed since the last commit count twice).
func TestAtLeastOnceSurvivesKills(t *testing.T) {
	t.Parallel()
	records, keys, kills := crashSize()
	outputs, want, _, _ := runCrashes(t, crashRun{records: records, keys: keys, kills: kills})
	outputs.mu.Lock()
	defer outputs.mu.Unlock()
	over := 0
	for k, n := range want {
		s := outputs.seqs[k]
		if len(s) == 0 || s[len(s)-1] < n {
			t.Errorf("key %s: last count %v, want at least %d", k, s[max(0, len(s)-1):], n)
			continue
		}
		if s[len(s)-1] > n {
			over++
		}
	}
	t.Logf("%d of %d keys counted some records twice (at-least-once)", over, len(want))
}

// feed writes n records over keys keys to topic in batches of 500 every interval, adding
// them to want; it returns when done (or the test failed).
func feed(t *testing.T, topic string, n, keys int, interval time.Duration, seed uint64, mu *sync.Mutex, want map[string]int64) {
	cl := kafkatest.Client(t)
	rng := rand.New(rand.NewPCG(seed, seed))
	for i := 0; i < n; i += 500 {
		recs := make([]*kgo.Record, 0, 500)
		mu.Lock()
		for range min(500, n-i) {
			k := fmt.Sprintf("k%05d", rng.IntN(keys))
			want[k]++
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(k), Value: []byte("v")})
		}
		mu.Unlock()
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Errorf("producing input: %v", err)
			return
		}
		time.Sleep(interval)
	}
}

// Two exactly-once instances; the one in a child process is killed with SIGKILL mid-run
// (with an open transaction and uncommitted work): the survivor takes its tasks over and
// every count is exact.
func TestExactlyOnceTwoInstancesOneKilled(t *testing.T) {
	t.Parallel()
	exactlyOnceTwoInstancesOneKilled(t, kstream.GroupProtocolClassic)
}

// The same as a streams group (KIP-1071) on Apache Kafka.
func TestExactlyOnceTwoInstancesOneKilledStreams(t *testing.T) {
	needStreamsBroker(t)
	t.Parallel()
	exactlyOnceTwoInstancesOneKilled(t, kstream.GroupProtocolStreams)
}

func exactlyOnceTwoInstancesOneKilled(t *testing.T, p kstream.GroupProtocol) {
	in := kafkatest.CreateTopic(t, "in", 4, nil)
	out := kafkatest.CreateTopic(t, "out", 4, nil)
	cfg := testConfig(t)
	cfg.Guarantee, cfg.CommitInterval, cfg.StateDir = kstream.ExactlyOnce, 0, t.TempDir()
	protoEnv := useProtocol(t, p, cfg.ApplicationID, &cfg)
	child := kafkatest.StartChild(t, "count-app", append([]string{"APP_ID=" + cfg.ApplicationID, "STATE_DIR=" + t.TempDir(),
		"IN=" + in, "OUT=" + out, "GUARANTEE=eos", "COMMIT_MS=100"}, protoEnv...)...)
	app := newApp(t, countTopology(in, out), cfg)
	start(t, app)
	outputs := collect(t, out, readCommitted)
	kafkatest.Eventually(t, 60*time.Second, "the tasks split between the instances", func() bool {
		return len(app.Tasks()) == 2 && app.State() == kstream.StateRunning
	})
	var mu sync.Mutex
	want := map[string]int64{}
	done := make(chan struct{})
	go func() { defer close(done); feed(t, in, 60000, 2000, 50*time.Millisecond, 5, &mu, want) }()
	time.Sleep(2 * time.Second) // mid-run
	child.Kill(t)
	<-done
	kafkatest.Eventually(t, 60*time.Second, "the survivor runs all four tasks", func() bool { return len(app.Tasks()) == 4 })
	kafkatest.Eventually(t, 90*time.Second, "every count", func() bool { return outputs.reached(want) })
	outputs.checkExact(t, want)
	t.Logf("survivor stats: %+v", app.Stats())
}

// A zombie: an exactly-once member frozen with SIGSTOP past its session timeout while the
// other takes its tasks over, then resumed with SIGCONT. Its late writes (its transaction
// was open when it froze, and it goes on processing what it had fetched) never appear to a
// read_committed reader: every count is exactly 1..n. It finds out (its transaction
// aborts, its partitions are lost) and rejoins.
func TestExactlyOnceZombieIsFenced(t *testing.T) {
	t.Parallel()
	exactlyOnceZombieIsFenced(t, kstream.GroupProtocolClassic)
}

// The same as a streams group (KIP-1071) on Apache Kafka: the zombie's member is removed
// from the streams group; its TxnOffsetCommit is refused (its member is unknown or its
// epoch fenced), so its transaction aborts.
func TestExactlyOnceZombieIsFencedStreams(t *testing.T) {
	needStreamsBroker(t)
	t.Parallel()
	exactlyOnceZombieIsFenced(t, kstream.GroupProtocolStreams)
}

func exactlyOnceZombieIsFenced(t *testing.T, p kstream.GroupProtocol) {
	in := kafkatest.CreateTopic(t, "in", 4, nil)
	out := kafkatest.CreateTopic(t, "out", 4, nil)
	cfg := testConfig(t)
	cfg.Guarantee, cfg.CommitInterval, cfg.StateDir = kstream.ExactlyOnce, 0, t.TempDir()
	protoEnv := useProtocol(t, p, cfg.ApplicationID, &cfg)
	// A long commit interval in the zombie keeps its transaction open when it freezes.
	zombie := kafkatest.StartChild(t, "count-app", append([]string{"APP_ID=" + cfg.ApplicationID, "STATE_DIR=" + t.TempDir(),
		"IN=" + in, "OUT=" + out, "GUARANTEE=eos", "COMMIT_MS=1500"}, protoEnv...)...)
	app := newApp(t, countTopology(in, out), cfg)
	start(t, app)
	outputs := collect(t, out, readCommitted)
	kafkatest.Eventually(t, 60*time.Second, "the tasks split between the instances", func() bool {
		return len(app.Tasks()) == 2 && app.State() == kstream.StateRunning
	})
	var mu sync.Mutex
	want := map[string]int64{}
	done := make(chan struct{})
	go func() { defer close(done); feed(t, in, 40000, 1000, 50*time.Millisecond, 7, &mu, want) }()
	time.Sleep(1200 * time.Millisecond)
	zombie.Stop(t)
	kafkatest.Eventually(t, 60*time.Second, "the other member takes every task", func() bool { return len(app.Tasks()) == 4 })
	time.Sleep(time.Second)
	zombie.Cont(t)
	<-done
	kafkatest.Eventually(t, 90*time.Second, "every count", func() bool { return outputs.reached(want) })
	kafkatest.Eventually(t, 30*time.Second, "the zombie notices", func() bool {
		o := zombie.Output()
		return strings.Contains(o, "partitions lost") || strings.Contains(o, "transaction aborted")
	})
	outputs.checkExact(t, want)
	if exited, err := zombie.Exited(); exited {
		t.Logf("the zombie stopped: %v", err)
	}
	t.Logf("stats of the member that took over: %+v", app.Stats())
}

// reachedAtLeast is reached, or with atLeast, whether every key's last count is at least its
// count in want.
func (c *outputCollector) reachedAtLeast(want map[string]int64, atLeast bool) bool {
	if !atLeast {
		return c.reached(want)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, n := range want {
		s := c.seqs[k]
		if len(s) == 0 || s[len(s)-1] < n {
			return false
		}
	}
	return true
}
