package kstream_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
)

// patternOf returns a pattern matching the topics kafkatest.CreateTopic makes for this test
// with a base in bases ("patA", "patB"...), and no other topic.
func patternOf(t *testing.T, sample, base string) *regexp.Regexp {
	t.Helper()
	mid := sample[len(base):strings.LastIndex(sample, "-")]
	return regexp.MustCompile(`pat[A-Z]` + regexp.QuoteMeta(mid) + `-[0-9]+`)
}

// TestPatternSourceOnBroker reads two topics through one pattern source: the records of
// both are processed, by two tasks (partition p of both topics in task 0_p).
func TestPatternSourceOnBroker(t *testing.T) {
	t.Parallel()
	a := kafkatest.CreateTopic(t, "patA", 2, nil)
	b2 := kafkatest.CreateTopic(t, "patB", 2, nil)
	other := kafkatest.CreateTopic(t, "other", 2, nil) // does not match
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	re := patternOf(t, a, "patA")

	b := kstream.NewBuilder()
	s := kstream.StreamPattern(b, re, serde.String(), serde.String())
	kstream.MapValues(s, func(v string) string { return "P" + v }).To(out, nil, nil)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if d := topo.Describe(); !strings.Contains(d, "(topics: "+re.String()+")") {
		t.Fatalf("Describe does not print the pattern:\n%s", d)
	}
	app := newApp(t, b, testConfig(t))
	r := start(t, app)
	kafkatest.Eventually(t, 60*time.Second, "running with 2 tasks", func() bool {
		return r.app.State() == kstream.StateRunning && len(r.app.Tasks()) == 2
	})
	cl := kafkatest.Client(t)
	var recs []*kgo.Record
	for i := range 6 {
		topic := []string{a, b2, other}[i%3]
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("v%d", i))})
	}
	kafkatest.Produce(t, cl, recs...)
	got := kafkatest.Drain(t, out, 3*time.Second, 60*time.Second)
	var lines []string
	for _, rec := range got {
		lines = append(lines, string(rec.Key)+"="+string(rec.Value))
	}
	slices.Sort(lines)
	want := []string{"k0=Pv0", "k1=Pv1", "k3=Pv3", "k4=Pv4"}
	if !slices.Equal(lines, want) {
		t.Fatalf("out = %v, want %v (the records of the two matching topics)", lines, want)
	}
}

// TestPatternSourceCopartitioned joins a pattern source with a table: a matching topic
// with another partition count than the table's fails at start, naming the topics.
func TestPatternSourceCopartitioned(t *testing.T) {
	t.Parallel()
	a := kafkatest.CreateTopic(t, "patA", 2, nil)
	kafkatest.CreateTopic(t, "patB", 3, nil)
	tbl := kafkatest.CreateTopic(t, "table", 2, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	b := kstream.NewBuilder()
	s := kstream.StreamPattern(b, patternOf(t, a, "patA"), serde.String(), serde.String())
	tab := kstream.Table(b, tbl, serde.String(), serde.String(), "table-store")
	kstream.Join(s, tab, func(_, v, w string) string { return v + w }).To(out, serde.String(), serde.String())
	app := newApp(t, b, testConfig(t))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := app.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "co-partitioned") || !strings.Contains(err.Error(), tbl) {
		t.Fatalf("Run = %v, want a co-partitioning error naming %s", err, tbl)
	}
}

// TestPatternSourcePicksUpNewTopics counts the keys of a pattern source over two instances,
// and creates a second matching topic while they run: both pick it up (the topic watcher),
// the group rebalances, and its records are counted on top of the first topic's, in the
// same tasks and stores (same partition count, so the same keys in the same tasks).
func TestPatternSourcePicksUpNewTopics(t *testing.T) {
	t.Parallel()
	for _, g := range []kstream.Guarantee{kstream.AtLeastOnce, kstream.ExactlyOnce} {
		t.Run(g.String(), func(t *testing.T) {
			t.Parallel()
			pickUpNewTopics(t, g)
		})
	}
}

func pickUpNewTopics(t *testing.T, g kstream.Guarantee) {
	a := kafkatest.CreateTopic(t, "patA", 2, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	re := patternOf(t, a, "patA")
	b := kstream.NewBuilder()
	s := kstream.StreamPattern(b, re, serde.String(), serde.String())
	kstream.Count(s.GroupByKey(), "counts").ToStream().To(out, serde.String(), serde.Int64())
	cfg := testConfig(t)
	cfg.Guarantee = g
	r1 := start(t, newApp(t, b, cfg))
	cfg.StateDir = t.TempDir()
	r2 := start(t, newApp(t, b, cfg))
	kafkatest.Eventually(t, 60*time.Second, "two instances running with a task each", func() bool {
		return r1.app.State() == kstream.StateRunning && r2.app.State() == kstream.StateRunning &&
			len(r1.app.Tasks()) == 1 && len(r2.app.Tasks()) == 1
	})
	const keys = 20
	cl := kafkatest.Client(t)
	produce := func(topic string) {
		var recs []*kgo.Record
		for k := range keys {
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("k%d", k)), Value: []byte("v")})
		}
		kafkatest.Produce(t, cl, recs...)
	}
	produce(a)
	waitCounts(t, out, keys, 1)

	b2 := kafkatest.CreateTopic(t, "patB", 2, nil) // matches, created after the start
	produce(b2)
	waitCounts(t, out, keys, 2)
	if n := len(r1.app.Tasks()) + len(r2.app.Tasks()); n != 2 {
		t.Fatalf("%d tasks after the new topic, want 2 (same partition count)", n)
	}
}

// waitCounts consumes the count topic out until the latest count of each of keys keys
// (k0, k1...) is want, or fails after a minute with what it saw.
func waitCounts(t *testing.T, out string, keys int, want int64) {
	t.Helper()
	cl := kafkatest.Client(t, kgo.ConsumeTopics(out), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	latest := map[string]int64{}
	ctx := kafkatest.Context(t, 60*time.Second)
	for {
		done := len(latest) == keys
		for _, n := range latest {
			done = done && n == want
		}
		if done {
			return
		}
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("counts %v, want %d keys at %d", latest, keys, want)
		}
		fs.EachRecord(func(rec *kgo.Record) {
			n, _ := serde.Int64().Deserialize(rec.Value)
			latest[string(rec.Key)] = n
		})
	}
}

// TestPatternSourceNewTopicMorePartitions creates, while a stateless pattern source runs,
// a matching topic with more partitions than the first: the sub-topology gets new tasks for
// the new partitions, and the records of every partition are processed.
func TestPatternSourceNewTopicMorePartitions(t *testing.T) {
	t.Parallel()
	a := kafkatest.CreateTopic(t, "patA", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	b := kstream.NewBuilder()
	kstream.StreamPattern(b, patternOf(t, a, "patA"), serde.String(), serde.String()).To(out, nil, nil)
	r := start(t, newApp(t, b, testConfig(t)))
	kafkatest.Eventually(t, 60*time.Second, "running with 1 task", func() bool {
		return r.app.State() == kstream.StateRunning && len(r.app.Tasks()) == 1
	})
	c := kafkatest.CreateTopic(t, "patC", 3, nil)
	kafkatest.Eventually(t, 60*time.Second, "3 tasks after the new topic", func() bool {
		return len(r.app.Tasks()) == 3
	})
	cl := kafkatest.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for p := range int32(3) {
		recs = append(recs, &kgo.Record{Topic: c, Partition: p, Key: []byte(fmt.Sprintf("p%d", p)), Value: []byte("v")})
	}
	recs = append(recs, &kgo.Record{Topic: a, Partition: 0, Key: []byte("a"), Value: []byte("v")})
	kafkatest.Produce(t, cl, recs...)
	got := kafkatest.Drain(t, out, 3*time.Second, 60*time.Second)
	var keys []string
	for _, rec := range got {
		keys = append(keys, string(rec.Key))
	}
	slices.Sort(keys)
	if want := []string{"a", "p0", "p1", "p2"}; !slices.Equal(keys, want) {
		t.Fatalf("out keys = %v, want %v", keys, want)
	}
}

// TestPatternSourceNewTopicNotCopartitioned joins a pattern source with a table and creates,
// while it runs, a matching topic with another partition count than the table's: the
// instance stops with an error naming the topic, as a start with it would.
func TestPatternSourceNewTopicNotCopartitioned(t *testing.T) {
	t.Parallel()
	a := kafkatest.CreateTopic(t, "patA", 2, nil)
	tbl := kafkatest.CreateTopic(t, "table", 2, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	b := kstream.NewBuilder()
	s := kstream.StreamPattern(b, patternOf(t, a, "patA"), serde.String(), serde.String())
	tab := kstream.Table(b, tbl, serde.String(), serde.String(), "table-store")
	kstream.Join(s, tab, func(_, v, w string) string { return v + w }).To(out, serde.String(), serde.String())
	stopsOnNewTopic(t, b, "co-partitioned")
}

// stopsOnNewTopic runs b until it is running, creates a topic "patB" of 3 partitions that
// its pattern source matches, and checks that Run then returns an error naming the topic
// and containing want.
func stopsOnNewTopic(t *testing.T, b *kstream.Builder, want string) {
	t.Helper()
	r := start(t, newApp(t, b, testConfig(t)))
	kafkatest.Eventually(t, 60*time.Second, "running", func() bool { return r.app.State() == kstream.StateRunning })
	bad := kafkatest.CreateTopic(t, "patB", 3, nil)
	select {
	case <-r.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("the instance still runs a minute after topic %s matched its pattern", bad)
	}
	if r.err == nil || !strings.Contains(r.err.Error(), want) || !strings.Contains(r.err.Error(), bad) {
		t.Fatalf("Run = %v, want an error naming %s and saying %q", r.err, bad, want)
	}
}

// TestPatternSourceNewTopicTooManyPartitionsForState counts over a pattern source and
// creates, while it runs, a matching topic with more partitions than the count has tasks:
// the changelogs cannot grow, so the instance stops with an error naming the topic.
func TestPatternSourceNewTopicTooManyPartitionsForState(t *testing.T) {
	t.Parallel()
	a := kafkatest.CreateTopic(t, "patA", 2, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	b := kstream.NewBuilder()
	s := kstream.StreamPattern(b, patternOf(t, a, "patA"), serde.String(), serde.String())
	kstream.Count(s.GroupByKey(), "counts").ToStream().To(out, serde.String(), serde.Int64())
	stopsOnNewTopic(t, b, "changelogs")
}
