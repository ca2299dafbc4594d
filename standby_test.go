package kstream_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() { kafkatest.RegisterChild("count-app", runCountChild) }

// countTopology counts the records of each key of in into the store "counts" and writes
// every new count to out.
func countTopology(in, out string) *kstream.Builder {
	b := kstream.NewBuilder()
	kstream.Count(kstream.Stream(b, in, serde.String(), serde.String()).GroupByKey(), "counts").
		ToStream().To(out, nil, nil)
	return b
}

// runCountChild runs the counting app in a child process until it is killed. It is
// configured by the environment: APP_ID, STATE_DIR, IN, OUT, NUM_STANDBYS, COMMIT_MS,
// REBALANCE_MS, SESSION_MS (default 6000), GUARANTEE=eos, GROUP_PROTOCOL=streams.
func runCountChild() error {
	standbys, _ := strconv.Atoi(os.Getenv("NUM_STANDBYS"))
	rebalanceMs, _ := strconv.Atoi(os.Getenv("REBALANCE_MS"))
	commitMs, _ := strconv.Atoi(os.Getenv("COMMIT_MS"))
	if commitMs == 0 {
		commitMs = 200
	}
	sessionMs, _ := strconv.Atoi(os.Getenv("SESSION_MS"))
	if sessionMs == 0 {
		sessionMs = 6000
	}
	cfg := kstream.Config{
		ApplicationID:     os.Getenv("APP_ID"),
		Brokers:           strings.Split(os.Getenv(kafkatest.EnvBrokers), ","),
		StateDir:          os.Getenv("STATE_DIR"),
		NumStandbys:       standbys,
		CommitInterval:    time.Duration(commitMs) * time.Millisecond,
		SessionTimeout:    time.Duration(sessionMs) * time.Millisecond,
		HeartbeatInterval: 200 * time.Millisecond,
		RebalanceTimeout:  time.Duration(rebalanceMs) * time.Millisecond,
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
		RestoreListener:   restorePrinter{},
		// Without the record cache (on by default), as testConfig: the tests assert
		// every update.
		CacheMaxBytes: -1,
	}
	if os.Getenv("GUARANTEE") == "eos" {
		cfg.Guarantee = kstream.ExactlyOnce
	}
	if os.Getenv("GROUP_PROTOCOL") == "streams" {
		cfg.GroupProtocol = kstream.GroupProtocolStreams
	}
	app, err := kstream.New(countTopology(os.Getenv("IN"), os.Getenv("OUT")), cfg)
	if err != nil {
		return err
	}
	return app.Run(context.Background())
}

// restorePrinter prints each finished restoration as a line the parent reads:
// "RESTORED partition=<p> from=<offset> records=<n>".
type restorePrinter struct{}

func (restorePrinter) OnRestoreStart(_, _ string, p int32, from, to int64) {
	fmt.Fprintf(os.Stderr, "RESTORE-START partition=%d from=%d to=%d\n", p, from, to)
}
func (restorePrinter) OnBatchRestored(string, string, int32, int64, int) {}
func (restorePrinter) OnRestoreEnd(_, _ string, p int32, n int64) {
	fmt.Fprintf(os.Stderr, "RESTORED partition=%d records=%d\n", p, n)
}

// standbyRecorder is a StandbyListener that keeps each changelog partition's position.
type standbyRecorder struct {
	mu        sync.Mutex
	pos       map[int32]int64 // last applied position per changelog partition
	suspended map[int32]string
	suspendAt map[int32]int64
}

func (s *standbyRecorder) OnUpdateStart(_, _ string, p int32, from int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pos == nil {
		s.pos, s.suspended, s.suspendAt = map[int32]int64{}, map[int32]string{}, map[int32]int64{}
	}
	s.pos[p] = from
}

func (s *standbyRecorder) OnBatchLoaded(_, _ string, p int32, end int64, _ int, _ int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pos[p] = end
}

func (s *standbyRecorder) OnUpdateSuspended(_, _ string, p int32, at int64, reason kstream.SuspendReason) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.suspended[p], s.suspendAt[p] = reason.String(), at
}

func (s *standbyRecorder) position(p int32) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.pos[p]
	return o, ok
}

// restoreRecorder is a RestoreListener that keeps, per partition, where restoration began and
// how many records it applied.
type restoreRecorder struct {
	mu       sync.Mutex
	from     map[int32]int64
	restored map[int32]int64
}

func (r *restoreRecorder) OnRestoreStart(_, _ string, p int32, from, _ int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.from == nil {
		r.from, r.restored = map[int32]int64{}, map[int32]int64{}
	}
	r.from[p] = from
}

func (r *restoreRecorder) OnBatchRestored(_, _ string, p int32, _ int64, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.restored[p] += int64(n)
}

func (r *restoreRecorder) OnRestoreEnd(string, string, int32, int64) {}

// outputCollector reads a topic from the start in the background and keeps every record's
// int64 value in order per key.
type outputCollector struct {
	mu   sync.Mutex
	seqs map[string][]int64
	n    int
}

func collect(t *testing.T, topic string, opts ...kgo.Opt) *outputCollector {
	t.Helper()
	c := &outputCollector{seqs: map[string][]int64{}}
	cl := kafkatest.Client(t, append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			c.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				n, err := serde.Int64().Deserialize(r.Value)
				if err != nil {
					n = -1
				}
				c.seqs[string(r.Key)] = append(c.seqs[string(r.Key)], n)
				c.n++
			})
			c.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

// reached reports whether every key's last count is its count in want.
func (c *outputCollector) reached(want map[string]int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, n := range want {
		s := c.seqs[k]
		if len(s) == 0 || s[len(s)-1] != n {
			return false
		}
	}
	return true
}

// overshot reports whether a key's count went past its count in want (a record counted
// twice): then reached never becomes true.
func (c *outputCollector) overshot(want map[string]int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, n := range want {
		if s := c.seqs[k]; len(s) > 0 && s[len(s)-1] > n {
			return true
		}
	}
	return false
}

// checkExact fails unless every key of want was emitted exactly 1, 2, ..., n.
func (c *outputCollector) checkExact(t *testing.T, want map[string]int64) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	bad := 0
	for k, n := range want {
		s := c.seqs[k]
		ok := int64(len(s)) == n
		for i := 0; ok && i < len(s); i++ {
			ok = s[i] == int64(i+1)
		}
		if !ok {
			if bad++; bad <= 5 {
				t.Errorf("key %s: emitted %v, want 1..%d", k, s[max(0, len(s)-8):], n)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d keys are not exactly 1..n", bad, len(want))
	}
}

// produceCounts writes n records over keys keys and adds them to want.
func produceCounts(t *testing.T, topic string, n, keys int, seed uint64, want map[string]int64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed))
	cl := kafkatest.Client(t)
	recs := make([]*kgo.Record, 0, n)
	for range n {
		k := fmt.Sprintf("k%05d", rng.IntN(keys))
		want[k]++
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(k), Value: []byte("v")})
	}
	for i := 0; i < len(recs); i += 5000 {
		kafkatest.Produce(t, cl, recs[i:min(i+5000, len(recs))]...)
	}
}

// committedAll reports whether group has committed the end offset of every partition of topic.
func committedAll(t *testing.T, group, topic string) bool {
	t.Helper()
	adm := kadm.NewClient(kafkatest.Client(t))
	ctx := kafkatest.Context(t, 10*time.Second)
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return false
	}
	for p, end := range endOffsets(t, topic) {
		o, ok := committed.Lookup(topic, p)
		if end > 0 && (!ok || o.At != end) {
			return false
		}
	}
	return true
}

// Two instances with NumStandbys 1: each keeps a standby of the other's tasks. The instance
// in a child process is killed with SIGKILL (no commit, no leaving the group); the survivor
// takes its tasks over from its standbys, restoring only what its standbys had not applied
// (nothing here: they were caught up), and every count is exact.
//
// At-least-once gives exact counts across a crash only if the crashed instance had no
// uncommitted work, so the kill comes after it committed everything; exactly-once removes
// that condition.
func TestStandbyFailover(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 4, nil)
	out := kafkatest.CreateTopic(t, "out", 4, nil)
	cfg := testConfig(t)
	cfg.NumStandbys = 1
	cfg.StateDir = t.TempDir()
	sl, rr := &standbyRecorder{}, &restoreRecorder{}
	cfg.StandbyListener, cfg.RestoreListener = sl, rr
	changelog := cfg.ApplicationID + "-counts-changelog"

	child := kafkatest.StartChild(t, "count-app", "APP_ID="+cfg.ApplicationID, "STATE_DIR="+t.TempDir(),
		"IN="+in, "OUT="+out, "NUM_STANDBYS=1")
	app := newApp(t, countTopology(in, out), cfg)
	start(t, app)
	outputs := collect(t, out)
	kafkatest.Eventually(t, 60*time.Second, "two active and two standby tasks on each instance", func() bool {
		return len(app.Tasks()) == 2 && len(app.StandbyTasks()) == 2 && app.State() == kstream.StateRunning
	})
	standbys := app.StandbyTasks()

	want := map[string]int64{}
	produceCounts(t, in, 20000, 1000, 1, want)
	kafkatest.Eventually(t, 60*time.Second, "counts of the first 20000 records", func() bool { return outputs.reached(want) })
	kafkatest.Eventually(t, 30*time.Second, "every input offset committed", func() bool { return committedAll(t, cfg.ApplicationID, in) })
	var ends map[int32]int64
	kafkatest.Eventually(t, 30*time.Second, "standbys caught up", func() bool {
		ends = endOffsets(t, changelog)
		for _, id := range standbys {
			if pos, ok := sl.position(id.Partition); !ok || pos != ends[id.Partition] {
				return false
			}
		}
		return true
	})
	atKill := map[int32]int64{}
	for _, id := range standbys {
		atKill[id.Partition], _ = sl.position(id.Partition)
		if atKill[id.Partition] == 0 {
			t.Fatalf("standby %v applied nothing; the test proves nothing", id)
		}
	}

	child.Kill(t)
	produceCounts(t, in, 10000, 1000, 2, want)
	kafkatest.Eventually(t, 60*time.Second, "the survivor runs all four tasks", func() bool {
		return len(app.Tasks()) == 4 && app.State() == kstream.StateRunning
	})
	kafkatest.Eventually(t, 60*time.Second, "counts of all 30000 records", func() bool { return outputs.reached(want) })
	outputs.checkExact(t, want)

	sl.mu.Lock()
	defer sl.mu.Unlock()
	rr.mu.Lock()
	defer rr.mu.Unlock()
	for _, id := range standbys {
		p := id.Partition
		if sl.suspended[p] != "promoted" || sl.suspendAt[p] != atKill[p] {
			t.Errorf("standby of partition %d: suspended %q at %d, want promoted at %d", p, sl.suspended[p], sl.suspendAt[p], atKill[p])
		}
		if from, ok := rr.from[p]; ok && from != atKill[p] {
			t.Errorf("partition %d: restore began at %d, want the standby's position %d", p, from, atKill[p])
		}
		if limit := ends[p] - atKill[p]; rr.restored[p] > limit {
			t.Errorf("partition %d: restored %d records, want at most the %d written after the standby's last update", p, rr.restored[p], limit)
		}
		t.Logf("partition %d: standby had applied %d of %d changelog records; the promoted task restored %d", p, atKill[p], ends[p], rr.restored[p])
	}
	keys := slices.Collect(func(yield func(int32) bool) {
		for _, id := range standbys {
			if !yield(id.Partition) {
				return
			}
		}
	})
	t.Logf("promoted partitions %v", keys)
}
