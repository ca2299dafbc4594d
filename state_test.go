package kstream_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
)

// restoreCounter is a RestoreListener that adds up restored records per store.
type restoreCounter struct {
	mu       sync.Mutex
	restored map[string]int64
	started  int
}

func (c *restoreCounter) OnRestoreStart(string, string, int32, int64, int64) {
	c.mu.Lock()
	c.started++
	c.mu.Unlock()
}

// OnBatchRestored adds up applied records: a restoration interrupted by a rebalance and
// resumed from its checkpoint is then counted exactly once per record.
func (c *restoreCounter) OnBatchRestored(store, _ string, _ int32, _ int64, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.restored == nil {
		c.restored = map[string]int64{}
	}
	c.restored[store] += int64(n)
}
func (c *restoreCounter) OnRestoreEnd(string, string, int32, int64) {}

func (c *restoreCounter) total(store string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.restored[store]
}

// lines writes n lines of words drawn from vocab and returns the true word counts.
func lines(t *testing.T, topic string, n int, seed uint64) map[string]int64 {
	t.Helper()
	vocab := strings.Fields("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon")
	rng := rand.New(rand.NewPCG(seed, seed+1))
	want := map[string]int64{}
	recs := make([]*kgo.Record, 0, n)
	for i := range n {
		ws := make([]string, 1+rng.IntN(6))
		for j := range ws {
			ws[j] = vocab[rng.IntN(len(vocab))] + fmt.Sprint(rng.IntN(50))
			want[ws[j]]++
		}
		recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "l%d", i), Value: []byte(strings.Join(ws, " "))})
	}
	cl := kafkatest.Client(t)
	for i := 0; i < len(recs); i += 10000 {
		kafkatest.Produce(t, cl, recs[i:min(i+10000, len(recs))]...)
	}
	return want
}

func wordCount(b *kstream.Builder, in, out string, opts ...kstream.StoreOption) {
	words := kstream.FlatMapValues(kstream.Stream(b, in, serde.String(), serde.String()), strings.Fields)
	kstream.Count(kstream.GroupBy(words, func(_, w string) string { return w }, serde.String()), "counts", opts...).
		ToStream().To(out, serde.String(), serde.Int64())
}

// readCounts reads out until every word of want has reached its count, and returns the last
// count seen per word.
func readCounts(t *testing.T, out string, want map[string]int64, d time.Duration) map[string]int64 {
	t.Helper()
	got := map[string]int64{}
	cl := kafkatest.Client(t, kgo.ConsumeTopics(out), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx := kafkatest.Context(t, d)
	reached := func() bool {
		for w, n := range want {
			if got[w] < n {
				return false
			}
		}
		return true
	}
	for !reached() && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			n, err := serde.Int64().Deserialize(r.Value)
			if err != nil {
				t.Errorf("bad count %x: %v", r.Value, err)
			}
			got[string(r.Key)] = max(got[string(r.Key)], n)
		})
	}
	return got
}

func checkCounts(t *testing.T, got, want map[string]int64) {
	t.Helper()
	for w, n := range want {
		if got[w] != n {
			t.Fatalf("word %q: counted %d, want %d", w, got[w], n)
		}
	}
	for w := range got {
		if _, ok := want[w]; !ok {
			t.Fatalf("unexpected word %q", w)
		}
	}
}

// Word count over 100k generated lines: exact counts for every word, with both backends.
func TestWordCount(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts []kstream.StoreOption
	}{{"pebble", nil}, {"memory", []kstream.StoreOption{kstream.InMemory()}}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := kafkatest.CreateTopic(t, "lines", 4, nil)
			out := kafkatest.CreateTopic(t, "counts", 4, nil)
			want := lines(t, in, 100_000, 1)
			b := kstream.NewBuilder()
			wordCount(b, in, out, tc.opts...)
			cfg := testConfig(t)
			cfg.StateDir = t.TempDir()
			start(t, newApp(t, b, cfg))
			checkCounts(t, readCounts(t, out, want, 2*time.Minute), want)
		})
	}
}

// The read caches of all the store partitions of an instance share one budget
// (Config.StoreCacheBytes): a count over 24 partitions and 20,000 keys, whose entries
// would take about 3 MB of cache, keeps its caches within a 128 KiB budget (a bound per
// store partition let them take 24 times the budget), and counts exactly.
func TestStoreCachesShareOneBudget(t *testing.T) {
	t.Parallel()
	const partitions, words, budget = 24, 20_000, 128 << 10
	in := kafkatest.CreateTopic(t, "lines", partitions, nil)
	out := kafkatest.CreateTopic(t, "counts", partitions, nil)
	want := map[string]int64{}
	var recs []*kgo.Record
	for round := range 2 { // every word twice: the second update reads the first
		for i := 0; i < words; i += 2 {
			a, b := fmt.Sprintf("w%05d", i), fmt.Sprintf("w%05d", i+1)
			want[a]++
			want[b]++
			recs = append(recs, &kgo.Record{Topic: in, Key: fmt.Appendf(nil, "l%d-%d", round, i), Value: []byte(a + " " + b)})
		}
	}
	cl := kafkatest.Client(t)
	for i := 0; i < len(recs); i += 5000 {
		kafkatest.Produce(t, cl, recs[i:min(i+5000, len(recs))]...)
	}
	b := kstream.NewBuilder()
	wordCount(b, in, out)
	cfg := testConfig(t)
	cfg.StoreCacheBytes = budget
	r := start(t, newApp(t, b, cfg))
	checkCounts(t, readCounts(t, out, want, 2*time.Minute), want)
	var held int64
	kafkatest.Eventually(t, 30*time.Second, "a commit of the counts", func() bool {
		held = r.app.Stats().StoreCacheBytes
		return held > 0
	})
	t.Logf("%d store partitions, %d keys: the read caches hold %d bytes of a %d-byte budget", partitions, words, held, budget)
	if held > budget {
		t.Fatalf("the read caches of %d store partitions hold %d bytes, over the instance's budget of %d", partitions, held, budget)
	}
}

// A restart with the same state directory restores only what the changelog gained after the
// local checkpoint; a restart with an empty directory restores everything. Both give exact
// counts.
func TestRestoreFromCheckpoint(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "lines", 2, nil)
	out := kafkatest.CreateTopic(t, "counts", 2, nil)
	cfg := testConfig(t)
	dirA, dirB := t.TempDir(), t.TempDir()
	totalLines := 0 // input lines so far
	runOnce := func(dir string, want map[string]int64) *restoreCounter {
		t.Helper()
		b := kstream.NewBuilder()
		wordCount(b, in, out)
		rc := &restoreCounter{}
		c := cfg
		c.StateDir = dir
		c.RestoreListener = rc
		r := start(t, newApp(t, b, c))
		checkCounts(t, readCounts(t, out, want, time.Minute), want)
		// Let the app commit what it processed (and checkpoint), then stop it.
		kafkatest.Eventually(t, 30*time.Second, "input committed", func() bool {
			var sum int64
			for _, o := range committedOffsets(t, cfg.ApplicationID, in) {
				sum += o
			}
			return sum == int64(totalLines)
		})
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
		return rc
	}

	// 1. Instance with directory A processes the first lines.
	totalLines = 2000
	want := lines(t, in, 2000, 7)
	if rc := runOnce(dirA, want); rc.total("counts") != 0 {
		t.Fatalf("first run restored %d records from an empty changelog", rc.total("counts"))
	}
	changelog := cfg.ApplicationID + "-counts-changelog"
	endA := sumEnds(t, changelog)

	// 2. Another instance, with directory B, processes more lines (its restore is complete).
	totalLines = 3000
	for w, n := range lines(t, in, 1000, 8) {
		want[w] += n
	}
	rcB := runOnce(dirB, want)
	if rcB.total("counts") != endA {
		t.Fatalf("empty directory restored %d records, want the whole changelog (%d)", rcB.total("counts"), endA)
	}
	endB := sumEnds(t, changelog)

	// 3. Back on directory A: only what B added to the changelog is restored.
	totalLines = 3500
	for w, n := range lines(t, in, 500, 9) {
		want[w] += n
	}
	rcA := runOnce(dirA, want)
	if got, wantRestored := rcA.total("counts"), endB-endA; got != wantRestored {
		t.Fatalf("restart on directory A restored %d records, want exactly the %d written after its checkpoint", got, wantRestored)
	}
	t.Logf("changelog ends: after A %d, after B %d; B restored %d, A restored %d", endA, endB, rcB.total("counts"), rcA.total("counts"))
}

func sumEnds(t *testing.T, topic string) int64 {
	t.Helper()
	var sum int64
	for _, o := range endOffsets(t, topic) {
		sum += o
	}
	return sum
}
