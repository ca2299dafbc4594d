package kstreamtest_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
)

func TestMain(m *testing.M) { kafkatest.Main(m) }

var t0 = time.UnixMilli(1_700_000_000_000)

// kvts is an output reduced to what the tests compare.
type kvts struct {
	K, V    string
	Ms      int64
	Headers string
}

func readAll(t *testing.T, out *kstreamtest.OutputTopic[string, string]) []kvts {
	t.Helper()
	recs, err := out.ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	res := make([]kvts, 0, len(recs))
	for _, r := range recs {
		var hs []string
		for _, h := range r.Headers {
			hs = append(hs, h.Key+"="+string(h.Value))
		}
		res = append(res, kvts{r.Key, r.Value, r.Timestamp.Sub(t0).Milliseconds(), strings.Join(hs, ",")})
	}
	return res
}

// run drives build's topology with the standard input and returns the output in order.
func run(t *testing.T, build func(s kstream.KStream[string, string], out string)) []kvts {
	t.Helper()
	b := kstream.NewBuilder()
	build(kstream.Stream(b, "in", serde.String(), serde.String()), "out")
	d, err := kstreamtest.New(b, kstream.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	in := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String(), kstreamtest.StartTime(t0.Add(time.Millisecond)), kstreamtest.AutoAdvance(time.Millisecond))
	out := kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.String())
	if err := in.PipeRecord(kstream.Record[string, string]{Key: "a", Value: "apple", Headers: []kstream.Header{{Key: "h", Value: []byte("1")}}}); err != nil {
		t.Fatal(err)
	}
	for _, kv := range [][2]string{{"b", "banana"}, {"c", "cherry"}, {"a", "avocado"}} {
		if err := in.Pipe(kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	return readAll(t, out)
}

func expect(t *testing.T, got []kvts, want ...kvts) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("\n got %v\nwant %v", got, want)
	}
}

func TestDriverOperators(t *testing.T) {
	up := strings.ToUpper
	tests := []struct {
		name  string
		build func(s kstream.KStream[string, string], out string)
		want  []kvts
	}{
		{"filter", func(s kstream.KStream[string, string], out string) {
			s.Filter(func(_, v string) bool { return strings.HasPrefix(v, "a") }).To(out, nil, nil)
		}, []kvts{{"a", "apple", 1, "h=1"}, {"a", "avocado", 4, ""}}},
		{"filterNot", func(s kstream.KStream[string, string], out string) {
			s.FilterNot(func(k, _ string) bool { return k == "a" }).To(out, nil, nil)
		}, []kvts{{"b", "banana", 2, ""}, {"c", "cherry", 3, ""}}},
		{"map", func(s kstream.KStream[string, string], out string) {
			kstream.Map(s, func(k, v string) (string, string) { return v, k }).To(out, serde.String(), serde.String())
		}, []kvts{{"apple", "a", 1, "h=1"}, {"banana", "b", 2, ""}, {"cherry", "c", 3, ""}, {"avocado", "a", 4, ""}}},
		{"mapValues", func(s kstream.KStream[string, string], out string) {
			kstream.MapValues(s, up).To(out, nil, serde.String())
		}, []kvts{{"a", "APPLE", 1, "h=1"}, {"b", "BANANA", 2, ""}, {"c", "CHERRY", 3, ""}, {"a", "AVOCADO", 4, ""}}},
		{"mapValuesWithKey", func(s kstream.KStream[string, string], out string) {
			kstream.MapValuesWithKey(s, func(k, v string) string { return k + v[:1] }).To(out, nil, serde.String())
		}, []kvts{{"a", "aa", 1, "h=1"}, {"b", "bb", 2, ""}, {"c", "cc", 3, ""}, {"a", "aa", 4, ""}}},
		{"flatMap", func(s kstream.KStream[string, string], out string) {
			kstream.FlatMap(s, func(k, v string) []kstream.KeyValue[string, string] {
				if k == "b" {
					return nil
				}
				return []kstream.KeyValue[string, string]{kstream.KV(k+"1", v), kstream.KV(k+"2", v)}
			}).To(out, serde.String(), serde.String())
		}, []kvts{{"a1", "apple", 1, "h=1"}, {"a2", "apple", 1, "h=1"}, {"c1", "cherry", 3, ""}, {"c2", "cherry", 3, ""}, {"a1", "avocado", 4, ""}, {"a2", "avocado", 4, ""}}},
		{"flatMapValues", func(s kstream.KStream[string, string], out string) {
			kstream.FlatMapValues(s, func(v string) []string { return strings.Split(v[:2], "") }).To(out, nil, serde.String())
		}, []kvts{{"a", "a", 1, "h=1"}, {"a", "p", 1, "h=1"}, {"b", "b", 2, ""}, {"b", "a", 2, ""}, {"c", "c", 3, ""}, {"c", "h", 3, ""}, {"a", "a", 4, ""}, {"a", "v", 4, ""}}},
		{"flatMapValuesWithKey", func(s kstream.KStream[string, string], out string) {
			kstream.FlatMapValuesWithKey(s, func(k, _ string) []string { return []string{k} }).To(out, nil, serde.String())
		}, []kvts{{"a", "a", 1, "h=1"}, {"b", "b", 2, ""}, {"c", "c", 3, ""}, {"a", "a", 4, ""}}},
		{"selectKey", func(s kstream.KStream[string, string], out string) {
			kstream.SelectKey(s, func(_, v string) string { return v[len(v)-1:] }).To(out, serde.String(), nil)
		}, []kvts{{"e", "apple", 1, "h=1"}, {"a", "banana", 2, ""}, {"y", "cherry", 3, ""}, {"o", "avocado", 4, ""}}},
		{"peek", func(s kstream.KStream[string, string], out string) {
			n := 0
			s.Peek(func(string, string) { n++ }).To(out, nil, nil)
			s.Foreach(func(string, string) {})
		}, []kvts{{"a", "apple", 1, "h=1"}, {"b", "banana", 2, ""}, {"c", "cherry", 3, ""}, {"a", "avocado", 4, ""}}},
		{"split", func(s kstream.KStream[string, string], out string) {
			br := s.Split(kstream.Named("x-")).Branch("a", func(k, _ string) bool { return k == "a" }).DefaultBranch("rest")
			kstream.MapValues(br["x-a"], func(v string) string { return "A:" + v }).To(out, nil, serde.String())
			kstream.MapValues(br["x-rest"], func(v string) string { return "R:" + v }).To(out, nil, serde.String())
		}, []kvts{{"a", "A:apple", 1, "h=1"}, {"b", "R:banana", 2, ""}, {"c", "R:cherry", 3, ""}, {"a", "A:avocado", 4, ""}}},
		{"merge", func(s kstream.KStream[string, string], out string) {
			s.Filter(func(k, _ string) bool { return k == "b" }).Merge(kstream.MapValues(s, up)).To(out, nil, nil)
		}, []kvts{{"a", "APPLE", 1, "h=1"}, {"b", "banana", 2, ""}, {"b", "BANANA", 2, ""}, {"c", "CHERRY", 3, ""}, {"a", "AVOCADO", 4, ""}}},
		{"siblings", func(s kstream.KStream[string, string], out string) {
			s.Filter(func(string, string) bool { return false }).To(out, nil, nil)
			s.Split().Branch("none", func(string, string) bool { return false }).NoDefaultBranch()["none"].To(out, nil, nil)
			kstream.MapValues(s, up).To(out, nil, serde.String())
		}, []kvts{{"a", "APPLE", 1, "h=1"}, {"b", "BANANA", 2, ""}, {"c", "CHERRY", 3, ""}, {"a", "AVOCADO", 4, ""}}},
		{"repartition", func(s kstream.KStream[string, string], out string) {
			kstream.SelectKey(s, func(_, v string) string { return v[:2] }).WithSerdes(serde.String(), nil).
				Repartition("by-prefix").To(out, nil, nil)
		}, []kvts{{"ap", "apple", 1, "h=1"}, {"ba", "banana", 2, ""}, {"ch", "cherry", 3, ""}, {"av", "avocado", 4, ""}}},
		{"toTopicFunc", func(s kstream.KStream[string, string], out string) {
			s.ToTopicFunc(func(r kstream.Record[string, string]) string {
				if r.Key == "a" {
					return out
				}
				return "elsewhere"
			}, nil, nil)
		}, []kvts{{"a", "apple", 1, "h=1"}, {"a", "avocado", 4, ""}}},
		{"process", func(s kstream.KStream[string, string], out string) {
			p := kstream.Process(s, func() kstream.Processor[string, string, string, string] {
				return kstream.ProcessorFunc[string, string, string, string](func(ctx kstream.ProcessorContext[string, string], r kstream.Record[string, string]) error {
					md, _ := ctx.RecordMetadata()
					r.Value = fmt.Sprintf("%s@%s/%d/%d", r.Value, md.Topic, md.Partition, md.Offset)
					if r.Key == "c" {
						ctx.ForwardTo("second", r)
						return nil
					}
					r.Timestamp = r.Timestamp.Add(time.Second)
					ctx.Forward(r.WithHeader("p", []byte("x")))
					return nil
				})
			})
			p.To(out, serde.String(), serde.String(), kstream.Named("first"))
			kstream.MapValues(p, up, kstream.Named("second")).To(out, serde.String(), serde.String())
		}, []kvts{
			{"a", "apple@in/0/0", 1001, "h=1,p=x"}, {"a", "APPLE@IN/0/0", 1001, "h=1,p=x"},
			{"b", "banana@in/0/1", 1002, "p=x"}, {"b", "BANANA@IN/0/1", 1002, "p=x"},
			{"c", "CHERRY@IN/0/2", 3, ""},
			{"a", "avocado@in/0/3", 1004, "p=x"}, {"a", "AVOCADO@IN/0/3", 1004, "p=x"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { expect(t, run(t, tc.build), tc.want...) })
	}
}

// Several partitions: records are placed by the Java hash of the key, each partition is its
// own task, and the repartition topic has its own partitioning.
func TestDriverPartitions(t *testing.T) {
	b := kstream.NewBuilder()
	s := kstream.Stream(b, "in", serde.String(), serde.String())
	var tasks []string
	kstream.Process(s, func() kstream.Processor[string, string, string, string] {
		return kstream.ProcessorFunc[string, string, string, string](func(ctx kstream.ProcessorContext[string, string], r kstream.Record[string, string]) error {
			tasks = append(tasks, r.Key+":"+ctx.TaskID().String())
			ctx.Forward(r)
			return nil
		})
	}).To("out", serde.String(), serde.String())
	d, err := kstreamtest.New(b, kstream.Config{}, kstreamtest.Partitions(3), kstreamtest.TopicPartitions("out", 5))
	if err != nil {
		t.Fatal(err)
	}
	in := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String())
	// From kafka-clients 4.1.1: a->1, b->2, c->1 over 3; a->4, b->1, c->4 over 5.
	for _, k := range []string{"a", "b", "c"} {
		if err := in.Pipe(k, k); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"a:0_1", "b:0_2", "c:0_1"}; !slices.Equal(tasks, want) {
		t.Fatalf("tasks %v, want %v", tasks, want)
	}
	recs, err := kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.String()).ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	var parts []int32
	for _, r := range recs {
		parts = append(parts, r.Partition)
	}
	if !slices.Equal(parts, []int32{4, 1, 4}) {
		t.Fatalf("output partitions %v, want [4 1 4]", parts)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestDriverErrors(t *testing.T) {
	b := kstream.NewBuilder()
	kstream.Stream(b, "in", serde.String(), serde.Int64()).To("out", nil, nil)
	d, err := kstreamtest.New(b, kstream.Config{})
	if err != nil {
		t.Fatal(err)
	}
	in := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.Int64())
	if err := in.Pipe("k", 1); err != nil {
		t.Fatal(err)
	}
	err = in.PipeRaw([]byte("k"), []byte("abc"), time.Time{})
	var re *kstream.RecordError
	if !errors.As(err, &re) || re.Kind != kstream.DeserializationError || re.Topic != "in" || re.Offset != 1 {
		t.Fatalf("got %v, want a deserialization RecordError at in offset 1", err)
	}
	if err := in.Pipe("k", 2); !errors.As(err, &re) {
		t.Fatalf("a stopped topology accepted more input: %v", err)
	}
	if d.Close() == nil {
		t.Fatal("Close lost the fatal error")
	}
	if err := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.Int64()).Pipe("k", 3); !errors.Is(err, kstreamtest.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}

	// With LogAndContinue the bad record is skipped and the rest goes on.
	d2, _ := kstreamtest.New(b, kstream.Config{DeserializationErrorHandler: kstream.LogAndContinue()})
	in2 := kstreamtest.CreateInputTopic(d2, "in", serde.String(), serde.Int64())
	_ = in2.Pipe("k", 1)
	_ = in2.PipeRaw([]byte("k"), []byte("abc"), time.Time{})
	_ = in2.Pipe("k", 3)
	vals, _ := kstreamtest.CreateOutputTopic(d2, "out", serde.String(), serde.Int64()).ReadValues()
	if !slices.Equal(vals, []int64{1, 3}) {
		t.Fatalf("values %v, want [1 3]", vals)
	}
	if err := kstreamtest.CreateInputTopic(d2, "nope", serde.String(), serde.Int64()).Pipe("k", 1); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("piping to a topic the topology does not read: %v", err)
	}
	if _, err := kstreamtest.CreateOutputTopic(d2, "out", serde.String(), serde.Int64()).ReadRecord(); err != nil {
		t.Fatalf("a new reader starts at the first record: %v", err)
	}
	o := kstreamtest.CreateOutputTopic(d2, "empty", serde.String(), serde.Int64())
	if _, err := o.ReadRecord(); !errors.Is(err, kstreamtest.ErrNoRecord) || !o.IsEmpty() {
		t.Fatalf("empty topic: %v", err)
	}
}

// Wall-clock time moves only when the test moves it; a record forwarded without a timestamp
// gets its input's (Kafka Streams' record-context timestamp).
func TestDriverWallClock(t *testing.T) {
	b := kstream.NewBuilder()
	s := kstream.Stream(b, "in", serde.String(), serde.String())
	kstream.Process(s, func() kstream.Processor[string, string, string, string] {
		return kstream.ProcessorFunc[string, string, string, string](func(ctx kstream.ProcessorContext[string, string], r kstream.Record[string, string]) error {
			ctx.Forward(kstream.Record[string, string]{Key: r.Key, Value: r.Value})
			return nil
		})
	}).To("out", serde.String(), serde.String())
	d, _ := kstreamtest.New(b, kstream.Config{}, kstreamtest.WallClock(t0))
	in := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String())
	_ = in.Pipe("a", "1")
	_ = d.AdvanceWallClockTime(time.Minute)
	_ = in.PipeAt("b", "2", t0.Add(time.Minute))
	got := readAll(t, kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.String()))
	expect(t, got, kvts{"a", "1", 0, ""}, kvts{"b", "2", 60_000, ""})
	if !d.WallClockTime().Equal(t0.Add(time.Minute)) {
		t.Fatal("wall clock")
	}
}
