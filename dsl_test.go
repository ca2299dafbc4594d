package kstream_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// murmur2 is Kafka's Java client hash (org.apache.kafka.common.utils.Utils.murmur2),
// written here independently of franz-go so the tests check franz-go's partitioner.
func murmur2(data []byte) int32 {
	const m, r, seed = uint32(0x5bd1e995), 24, uint32(0x9747b28c)
	n := len(data)
	h := seed ^ uint32(n)
	for i := 0; i+4 <= n; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := n &^ 3
	switch n % 4 {
	case 3:
		h ^= uint32(data[tail+2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[tail+1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[tail])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// javaPartition is the partition Java's default partitioner picks for a keyed record.
func javaPartition(key []byte, partitions int32) int32 {
	return (murmur2(key) & 0x7fffffff) % partitions
}

// outRec is an output record reduced to what the DSL tests compare.
type outRec struct {
	Key, Value string
	TsMs       int64
	Headers    string
	Partition  int32
}

func (o outRec) String() string {
	return fmt.Sprintf("%s=%s@%d[%s]p%d", o.Key, o.Value, o.TsMs, o.Headers, o.Partition)
}

func reduce(recs []*kgo.Record) []outRec {
	out := make([]outRec, 0, len(recs))
	for _, r := range recs {
		var hs []string
		for _, h := range r.Headers {
			hs = append(hs, h.Key+":"+string(h.Value))
		}
		out = append(out, outRec{string(r.Key), string(r.Value), r.Timestamp.Sub(baseTime).Milliseconds(), strings.Join(hs, ","), r.Partition})
	}
	slices.SortFunc(out, func(a, b outRec) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// want builds the expected output record for key k, placing it where Java would.
func want(k, v string, tsMs int64, headers string, partitions int32) outRec {
	return outRec{k, v, tsMs, headers, javaPartition([]byte(k), partitions)}
}

func sorted(rs ...outRec) []outRec {
	slices.SortFunc(rs, func(a, b outRec) int { return strings.Compare(a.String(), b.String()) })
	return rs
}

func check(t *testing.T, got, wantRecs []outRec) {
	t.Helper()
	if !slices.Equal(got, wantRecs) {
		t.Fatalf("output mismatch\n got: %v\nwant: %v", got, wantRecs)
	}
}

const parts = 3

// input is the standard input of the DSL tests: three keys, distinct timestamps, a header.
func input(topic string) []*kgo.Record {
	return []*kgo.Record{
		rec(topic, "a", "apple", 1, "h", "1"),
		rec(topic, "b", "banana", 2),
		rec(topic, "c", "cherry", 3, "h", "3"),
		rec(topic, "a", "avocado", 4),
	}
}

// pipe creates an input and an output topic, builds the topology with build, writes in,
// runs the app and returns the n records that reach the output topic.
func pipe(t *testing.T, build func(b *kstream.Builder, in, out string), in []*kgo.Record, n int) []outRec {
	t.Helper()
	t.Parallel()
	inT := kafkatest.CreateTopic(t, "in", parts, nil)
	outT := kafkatest.CreateTopic(t, "out", parts, nil)
	for _, r := range in {
		r.Topic = inT
	}
	b := kstream.NewBuilder()
	build(b, inT, outT)
	start(t, newApp(t, b, testConfig(t)))
	kafkatest.Produce(t, kafkatest.Client(t), in...)
	got := kafkatest.Consume(t, outT, n, 30*time.Second)
	// Nothing more may arrive.
	if extra := kafkatest.ConsumeAtMost(t, outT, n+1, 500*time.Millisecond); len(extra) > n {
		t.Fatalf("got %d records, want exactly %d: %v", len(extra), n, reduce(extra))
	}
	return reduce(got)
}

func strs(b *kstream.Builder, topic string) kstream.KStream[string, string] {
	return kstream.Stream(b, topic, serde.String(), serde.String())
}

func TestFilter(t *testing.T) {
	got := pipe(t, func(b *kstream.Builder, in, out string) {
		strs(b, in).Filter(func(k, v string) bool { return strings.HasPrefix(v, "a") }).To(out, nil, nil)
	}, input(""), 2)
	check(t, got, sorted(want("a", "apple", 1, "h:1", parts), want("a", "avocado", 4, "", parts)))
}

func TestFilterNot(t *testing.T) {
	got := pipe(t, func(b *kstream.Builder, in, out string) {
		strs(b, in).FilterNot(func(k, v string) bool { return k == "a" }).To(out, nil, nil)
	}, input(""), 2)
	check(t, got, sorted(want("b", "banana", 2, "", parts), want("c", "cherry", 3, "h:3", parts)))
}

func TestMap(t *testing.T) {
	got := pipe(t, func(b *kstream.Builder, in, out string) {
		kstream.Map(strs(b, in), func(k, v string) (string, int64) { return v, int64(len(v)) }).
			To(out, serde.String(), serde.Funcs(func(n int64) ([]byte, error) { return []byte(fmt.Sprint(n)), nil }, nil))
	}, input(""), 4)
	check(t, got, sorted(
		want("apple", "5", 1, "h:1", parts), want("banana", "6", 2, "", parts),
		want("cherry", "6", 3, "h:3", parts), want("avocado", "7", 4, "", parts)))
}

func TestMapValues(t *testing.T) {
	got := pipe(t, func(b *kstream.Builder, in, out string) {
		s := strs(b, in)
		kstream.MapValues(s, strings.ToUpper).To(out, nil, serde.String())
		kstream.MapValuesWithKey(s, func(k, v string) string { return k + ":" + v }).Filter(func(k, _ string) bool { return k == "b" }).To(out, nil, serde.String())
	}, input(""), 5)
	check(t, got, sorted(
		want("a", "APPLE", 1, "h:1", parts), want("b", "BANANA", 2, "", parts),
		want("c", "CHERRY", 3, "h:3", parts), want("a", "AVOCADO", 4, "", parts),
		want("b", "b:banana", 2, "", parts)))
}

func TestFlatMap(t *testing.T) {
	got := pipe(t, func(b *kstream.Builder, in, out string) {
		kstream.FlatMap(strs(b, in), func(k, v string) []kstream.KeyValue[string, string] {
			if k != "a" {
				return nil
			}
			return []kstream.KeyValue[string, string]{kstream.KV(v[:1], v), kstream.KV(v[1:2], k)}
		}).To(out, serde.String(), serde.String())
	}, input(""), 4)
	check(t, got, sorted(
		want("a", "apple", 1, "h:1", parts), want("p", "a", 1, "h:1", parts),
		want("a", "avocado", 4, "", parts), want("v", "a", 4, "", parts)))
}

func TestFlatMapValues(t *testing.T) {
	got := pipe(t, func(b *kstream.Builder, in, out string) {
		s := strs(b, in).Filter(func(k, _ string) bool { return k != "a" })
		kstream.FlatMapValues(s, func(v string) []string { return []string{v[:1], v[1:2]} }).To(out, nil, serde.String())
		kstream.FlatMapValuesWithKey(s, func(k, v string) []string { return []string{k + k} }).To(out, nil, serde.String())
	}, input(""), 6)
	check(t, got, sorted(
		want("b", "b", 2, "", parts), want("b", "a", 2, "", parts), want("b", "bb", 2, "", parts),
		want("c", "c", 3, "h:3", parts), want("c", "h", 3, "h:3", parts), want("c", "cc", 3, "h:3", parts)))
}

func TestSelectKey(t *testing.T) {
	got := pipe(t, func(b *kstream.Builder, in, out string) {
		kstream.SelectKey(strs(b, in), func(k, v string) string { return v + "-" + k }).To(out, serde.String(), nil)
	}, input(""), 4)
	check(t, got, sorted(
		want("apple-a", "apple", 1, "h:1", parts), want("banana-b", "banana", 2, "", parts),
		want("cherry-c", "cherry", 3, "h:3", parts), want("avocado-a", "avocado", 4, "", parts)))
}

func TestPeekAndForeach(t *testing.T) {
	var mu syncList
	got := pipe(t, func(b *kstream.Builder, in, out string) {
		s := strs(b, in).Peek(func(k, v string) { mu.add("peek " + k + "=" + v) })
		s.Foreach(func(k, v string) { mu.add("each " + k + "=" + v) })
		s.To(out, nil, nil)
	}, input(""), 4)
	check(t, got, sorted(
		want("a", "apple", 1, "h:1", parts), want("b", "banana", 2, "", parts),
		want("c", "cherry", 3, "h:3", parts), want("a", "avocado", 4, "", parts)))
	seen := mu.sorted()
	wantSeen := []string{"each a=apple", "each a=avocado", "each b=banana", "each c=cherry", "peek a=apple", "peek a=avocado", "peek b=banana", "peek c=cherry"}
	if !slices.Equal(seen, wantSeen) {
		t.Fatalf("side effects: got %v, want %v", seen, wantSeen)
	}
}

func TestSplit(t *testing.T) {
	got := pipe(t, func(b *kstream.Builder, in, out string) {
		br := strs(b, in).Split(kstream.Named("fruit-")).
			Branch("a", func(k, _ string) bool { return k == "a" }).
			Branch("ab", func(k, _ string) bool { return k == "a" || k == "b" }). // a never gets here: first match wins
			DefaultBranch("other")
		if len(br) != 3 {
			panic(fmt.Sprintf("branches: %v", br))
		}
		kstream.MapValues(br["fruit-a"], func(v string) string { return "A:" + v }).To(out, nil, serde.String())
		kstream.MapValues(br["fruit-ab"], func(v string) string { return "AB:" + v }).To(out, nil, serde.String())
		kstream.MapValues(br["fruit-other"], func(v string) string { return "D:" + v }).To(out, nil, serde.String())
	}, input(""), 4)
	check(t, got, sorted(
		want("a", "A:apple", 1, "h:1", parts), want("b", "AB:banana", 2, "", parts),
		want("c", "D:cherry", 3, "h:3", parts), want("a", "A:avocado", 4, "", parts)))
}

func TestMerge(t *testing.T) {
	got := pipe(t, func(b *kstream.Builder, in, out string) {
		s := strs(b, in)
		as := s.Filter(func(k, _ string) bool { return k == "a" })
		cs := kstream.MapValues(s.Filter(func(k, _ string) bool { return k == "c" }), strings.ToUpper)
		as.Merge(cs).To(out, nil, nil)
	}, input(""), 3)
	check(t, got, sorted(
		want("a", "apple", 1, "h:1", parts), want("c", "CHERRY", 3, "h:3", parts), want("a", "avocado", 4, "", parts)))
}

func TestToTopicFunc(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", parts, nil)
	odd := kafkatest.CreateTopic(t, "odd", parts, nil)
	even := kafkatest.CreateTopic(t, "even", 1, nil)
	b := kstream.NewBuilder()
	strs(b, in).ToTopicFunc(func(r kstream.Record[string, string]) string {
		if r.Timestamp.Sub(baseTime).Milliseconds()%2 == 1 {
			return odd
		}
		return even
	}, nil, nil)
	start(t, newApp(t, b, testConfig(t)))
	recs := input(in)
	kafkatest.Produce(t, kafkatest.Client(t), recs...)
	check(t, reduce(kafkatest.Consume(t, odd, 2, 30*time.Second)), sorted(want("a", "apple", 1, "h:1", parts), want("c", "cherry", 3, "h:3", parts)))
	check(t, reduce(kafkatest.Consume(t, even, 2, 30*time.Second)), sorted(want("b", "banana", 2, "", 1), want("a", "avocado", 4, "", 1)))
}

func TestProcess(t *testing.T) {
	got := pipe(t, func(b *kstream.Builder, in, out string) {
		p := kstream.Process(strs(b, in), func() kstream.Processor[string, string, string, string] {
			return kstream.ProcessorFunc[string, string, string, string](func(ctx kstream.ProcessorContext[string, string], r kstream.Record[string, string]) error {
				md, ok := ctx.RecordMetadata()
				if !ok {
					return fmt.Errorf("no metadata")
				}
				r.Value = fmt.Sprintf("%s@%d", r.Value, md.Partition)
				if r.Key == "b" {
					ctx.ForwardTo("only-upper", r.WithHeader("routed", []byte("1")))
					return nil
				}
				r.Timestamp = r.Timestamp.Add(time.Second)
				ctx.Forward(r)
				return nil
			})
		}, kstream.Named("proc"))
		kstream.MapValues(p, strings.ToUpper, kstream.Named("only-upper")).To(out, serde.String(), serde.String())
		p.Filter(func(k, _ string) bool { return k == "c" }).To(out, serde.String(), serde.String())
	}, input(""), 5)
	pa, pb, pc := javaPartition([]byte("a"), parts), javaPartition([]byte("b"), parts), javaPartition([]byte("c"), parts)
	check(t, got, sorted(
		want("a", fmt.Sprintf("APPLE@%d", pa), 1001, "h:1", parts),
		want("b", fmt.Sprintf("BANANA@%d", pb), 2, "routed:1", parts),
		want("c", fmt.Sprintf("CHERRY@%d", pc), 1003, "h:3", parts),
		want("c", fmt.Sprintf("cherry@%d", pc), 1003, "h:3", parts),
		want("a", fmt.Sprintf("AVOCADO@%d", pa), 1004, "", parts)))
}

func TestRepartition(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", parts, nil)
	out := kafkatest.CreateTopic(t, "out", parts, nil)
	b := kstream.NewBuilder()
	rekeyed := kstream.SelectKey(strs(b, in), func(_, v string) string { return v[:1] }).WithSerdes(serde.String(), nil).Repartition("by-letter", kstream.NumPartitions(5))
	rekeyed.Peek(func(string, string) {}).To(out, nil, nil)
	cfg := testConfig(t)
	app := newApp(t, b, cfg)
	if d := app.Topology().Describe(); !strings.Contains(d, "Sub-topology: 1") || !strings.Contains(d, "by-letter-repartition") {
		t.Fatalf("describe does not show the repartition:\n%s", d)
	}
	start(t, app)
	kafkatest.Produce(t, kafkatest.Client(t), input(in)...)
	check(t, reduce(kafkatest.Consume(t, out, 4, 30*time.Second)), sorted(
		want("a", "apple", 1, "h:1", parts), want("b", "banana", 2, "", parts),
		want("c", "cherry", 3, "h:3", parts), want("a", "avocado", 4, "", parts)))
	// The internal topic exists with the requested partitions and received the re-keyed
	// records, partitioned by the new key (counted by end offsets: the records themselves
	// may already be purged).
	internal := cfg.ApplicationID + "-by-letter-repartition"
	adm := kadm.NewClient(kafkatest.Client(t))
	ends, err := adm.ListEndOffsets(kafkatest.Context(t, 10*time.Second), internal)
	if err != nil {
		t.Fatal(err)
	}
	perPartition := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { perPartition[o.Partition] = o.Offset })
	wantPer := map[int32]int64{}
	for _, k := range []string{"a", "b", "c", "a"} {
		wantPer[javaPartition([]byte(k), 5)]++
	}
	if len(perPartition) != 5 {
		t.Fatalf("repartition topic has %d partitions, want 5", len(perPartition))
	}
	for p, n := range perPartition {
		if n != wantPer[p] {
			t.Errorf("repartition partition %d holds %d records, want %d (all: %v)", p, n, wantPer[p], perPartition)
		}
	}
	// Consumed repartition records are purged after the commit.
	kafkatest.Eventually(t, 30*time.Second, "repartition records purged", func() bool {
		starts, err := adm.ListStartOffsets(kafkatest.Context(t, 5*time.Second), internal)
		if err != nil {
			return false
		}
		var sum int64
		starts.Each(func(o kadm.ListedOffset) { sum += o.Offset })
		return sum == 4
	})
}

func TestSeveralSourceTopicsAndOffsetReset(t *testing.T) {
	t.Parallel()
	in1 := kafkatest.CreateTopic(t, "in1", parts, nil)
	in2 := kafkatest.CreateTopic(t, "in2", parts, nil)
	late := kafkatest.CreateTopic(t, "late", parts, nil)
	out := kafkatest.CreateTopic(t, "out", parts, nil)
	cl := kafkatest.Client(t)
	// Written before the app starts: read by the earliest sources, skipped by the latest one.
	kafkatest.Produce(t, cl, rec(in1, "x", "old1", 1), rec(in2, "y", "old2", 2), rec(late, "z", "skipped", 3))
	b := kstream.NewBuilder()
	kstream.StreamTopics(b, []string{in1, in2}, serde.String(), serde.String()).To(out, nil, nil)
	kstream.Stream(b, late, serde.String(), serde.String(), kstream.WithOffsetReset(kstream.ResetLatest)).To(out, nil, nil)
	var states syncList
	cfg := testConfig(t)
	cfg.StateListener = func(old, s kstream.State) { states.add(old.String() + ">" + s.String()) }
	app := newApp(t, b, cfg)
	start(t, app)
	kafkatest.Eventually(t, 30*time.Second, "state RUNNING", func() bool { return app.State() == kstream.StateRunning })
	// Latest is resolved when the partition is assigned; give the fetch a moment to start.
	kafkatest.Eventually(t, 30*time.Second, "the two early records", func() bool {
		return len(kafkatest.ConsumeAtMost(t, out, 2, 200*time.Millisecond)) == 2
	})
	kafkatest.Produce(t, cl, rec(late, "z", "new", 4))
	check(t, reduce(kafkatest.Consume(t, out, 3, 30*time.Second)), sorted(
		want("x", "old1", 1, "", parts), want("y", "old2", 2, "", parts), want("z", "new", 4, "", parts)))
	if s := states.list(); len(s) < 2 || s[0] != "CREATED>REBALANCING" || s[1] != "REBALANCING>RUNNING" {
		t.Fatalf("states: %v", s)
	}
}

// javaPartitions were printed by kafka-clients 4.1.1 (OpenJDK 17):
// Utils.toPositive(Utils.murmur2(key.getBytes(UTF_8))) % n. They pin the test's murmur2,
// which the DSL tests use to check where the runtime's producer put each record.
var javaPartitions = map[string]map[int32]int32{
	"a":         {3: 1, 5: 4, 6: 4},
	"b":         {3: 2, 5: 1, 6: 2},
	"c":         {3: 1, 5: 4, 6: 4},
	"apple":     {3: 1, 5: 2, 6: 1},
	"banana":    {3: 1, 5: 4, 6: 1},
	"cherry":    {3: 2, 5: 2, 6: 5},
	"avocado":   {3: 2, 5: 4, 6: 2},
	"":          {3: 0, 5: 1, 6: 3},
	"key-12345": {3: 0, 5: 3, 6: 3},
}

func TestMurmur2MatchesJava(t *testing.T) {
	for key, byN := range javaPartitions {
		for n, p := range byN {
			if got := javaPartition([]byte(key), n); got != p {
				t.Errorf("key %q over %d partitions: got %d, Java %d", key, n, got, p)
			}
		}
	}
}
