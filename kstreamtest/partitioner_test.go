package kstreamtest_test

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/partition"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
)

// byValue multicasts a value "all..." to every partition, drops one "drop...", sends one
// "p<digit>..." to partition digit, and leaves every other record to the default.
func byValue(topic, key, value string, n int32) kstream.Partitions {
	switch {
	case strings.HasPrefix(value, "all"):
		var ps []int32
		for p := range n {
			ps = append(ps, p)
		}
		return kstream.ToPartitions(ps...)
	case strings.HasPrefix(value, "drop"):
		return kstream.ToPartitions()
	case len(value) > 1 && value[0] == 'p':
		return kstream.ToPartitions(int32(value[1]-'0'), int32(value[1]-'0')) // a duplicate counts once
	}
	return kstream.DefaultPartition()
}

type partRec struct {
	key, value string
	partition  int32
}

func readParts(t *testing.T, out *kstreamtest.OutputTopic[string, string]) []partRec {
	t.Helper()
	recs, err := out.ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	var got []partRec
	for _, r := range recs {
		got = append(got, partRec{r.Key, r.Value, r.Partition})
	}
	return got
}

func TestPartitionerToMulticastDropDefault(t *testing.T) {
	b := kstream.NewBuilder()
	kstream.Stream(b, "in", serde.String(), serde.String()).
		To("out", nil, nil, kstream.WithPartitioner(byValue))
	d, err := kstreamtest.New(b, kstream.Config{}, kstreamtest.TopicPartitions("out", 3))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	in := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String())
	out := kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.String())
	for _, kv := range [][2]string{{"a", "all"}, {"b", "drop"}, {"c", "p2"}, {"kafka", "other"}} {
		if err := in.Pipe(kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	want := []partRec{{"a", "all", 0}, {"a", "all", 1}, {"a", "all", 2}, {"c", "p2", 2}, {"kafka", "other", partition.ForKey([]byte("kafka"), 3)}}
	if got := readParts(t, out); !equalParts(got, want) {
		t.Fatalf("out = %v, want %v", got, want)
	}
	if n := d.DroppedRecords(); n != 1 {
		t.Fatalf("DroppedRecords = %d, want 1 (the record the partitioner sent nowhere)", n)
	}
}

func TestPartitionerOutOfRangeIsProductionError(t *testing.T) {
	b := kstream.NewBuilder()
	kstream.Stream(b, "in", serde.String(), serde.String()).
		To("out", nil, nil, kstream.WithPartitioner(byValue))
	var seen []kstream.ErrorContext
	cfg := kstream.Config{ProductionErrorHandler: kstream.ErrorHandlerFunc(func(ec kstream.ErrorContext) kstream.ErrorResponse {
		seen = append(seen, ec)
		return kstream.Continue()
	})}
	d, err := kstreamtest.New(b, cfg, kstreamtest.TopicPartitions("out", 2))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	in := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String())
	if err := in.Pipe("a", "p7"); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || seen[0].SinkTopic != "out" || !strings.Contains(seen[0].Err.Error(), "partition 7, not in [0, 2)") {
		t.Fatalf("production errors = %+v, want one for partition 7 of out", seen)
	}
}

func TestPartitionerRepartitionAndToTopicFunc(t *testing.T) {
	b := kstream.NewBuilder()
	s := kstream.Stream(b, "in", serde.String(), serde.String())
	// Every record to partition 1 of the repartition topic: the counts are all in task 1.
	r := s.Repartition("rp", kstream.WithPartitioner(func(_, _, _ string, n int32) kstream.Partitions { return kstream.ToPartitions(n - 1) }))
	kstream.MapValues(kstream.Count(r.GroupByKey(), "counts").ToStream(), func(n int64) string { return string(rune('0' + n)) }).
		ToTopicFunc(func(kstream.Record[string, string]) string { return "out" }, serde.String(), serde.String(),
			kstream.WithPartitioner(func(topic, k, _ string, n int32) kstream.Partitions {
				if topic != "out" || n != 4 {
					return kstream.ToPartitions() // dropped: the test fails below
				}
				return kstream.ToPartitions(int32(k[0]-'a') % n)
			}))
	d, err := kstreamtest.New(b, kstream.Config{}, kstreamtest.Partitions(2), kstreamtest.TopicPartitions("out", 4))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	in := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String())
	for _, k := range []string{"a", "b", "c", "d", "a"} {
		if err := in.Pipe(k, "v"); err != nil {
			t.Fatal(err)
		}
	}
	want := []partRec{{"a", "1", 0}, {"b", "1", 1}, {"c", "1", 2}, {"d", "1", 3}, {"a", "2", 0}}
	if got := readParts(t, kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.String())); !equalParts(got, want) {
		t.Fatalf("out = %v, want %v", got, want)
	}
	for _, k := range []string{"a", "b", "c", "d"} {
		st0, err := kstreamtest.KeyValueStore(d, "counts", 0, serde.String(), serde.Int64())
		if err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := st0.Get(k); ok {
			t.Fatalf("key %q is in task 0's store; the repartition partitioner sends every key to partition 1", k)
		}
	}
}

func TestPartitionerWrongTypesIsBuildError(t *testing.T) {
	b := kstream.NewBuilder()
	kstream.Stream(b, "in", serde.String(), serde.String()).
		To("out", nil, nil, kstream.WithPartitioner(func(string, string, int64, int32) kstream.Partitions { return kstream.DefaultPartition() }))
	_, err := b.Build()
	if err == nil || !strings.Contains(err.Error(), "WithPartitioner") {
		t.Fatalf("Build error = %v, want one naming WithPartitioner", err)
	}
}

func equalParts(a, b []partRec) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// byDigit sends a key "<letter><digit>" to partition digit modulo the count.
func byDigit(_, k, _ string, n int32) kstream.Partitions {
	if len(k) < 2 {
		return kstream.DefaultPartition()
	}
	return kstream.ToPartitions(int32(k[1]-'0') % n)
}

// fkPartitioned joins orders ("<customer>|<item>") with customers, both written to their
// topics by byDigit, with the join's partitioners when with is true.
func fkPartitioned(t *testing.T, with bool) []string {
	t.Helper()
	b := kstream.NewBuilder()
	kstream.Stream(b, "raw-orders", serde.String(), serde.String()).To("orders", nil, nil, kstream.WithPartitioner(byDigit))
	kstream.Stream(b, "raw-customers", serde.String(), serde.String()).To("customers", nil, nil, kstream.WithPartitioner(byDigit))
	o := kstream.Table(b, "orders", serde.String(), serde.String(), "orders-store")
	c := kstream.Table(b, "customers", serde.String(), serde.String(), "customers-store")
	var opts []kstream.Option
	if with {
		opts = append(opts, kstream.WithPartitioner(byDigit), kstream.WithOtherPartitioner(byDigit))
	}
	kstream.TableJoinOn(o, c, func(_, v string) string {
		cust, _, _ := strings.Cut(v, "|")
		return cust
	}, func(v, name string) string { return v + "@" + name }, opts...).ToStream().To("out", serde.String(), serde.String())
	d, err := kstreamtest.New(b, kstream.Config{}, kstreamtest.Partitions(4))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	cin := kstreamtest.CreateInputTopic(d, "raw-customers", serde.String(), serde.String())
	oin := kstreamtest.CreateInputTopic(d, "raw-orders", serde.String(), serde.String())
	for i := range 8 {
		if err := cin.Pipe("c"+strconv.Itoa(i), "name"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 8 {
		if err := oin.Pipe("o"+strconv.Itoa(i), "c"+strconv.Itoa(7-i)+"|item"); err != nil {
			t.Fatal(err)
		}
	}
	kvs, err := kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.String()).ReadKeyValues()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, kv := range kvs {
		got = append(got, kv.Key+"="+kv.Value)
	}
	slices.Sort(got)
	return got
}

func TestPartitionerForeignKeyJoin(t *testing.T) {
	var want []string
	for i := range 8 {
		want = append(want, fmt.Sprintf("o%d=c%d|item@name%d", i, 7-i, 7-i))
	}
	if got := fkPartitioned(t, true); !slices.Equal(got, want) {
		t.Fatalf("with the partitioners: out = %v, want %v", got, want)
	}
	// Without WithOtherPartitioner the subscriptions go by the default partitioner, to
	// tasks that do not hold the customers: some orders find no customer.
	if got := fkPartitioned(t, false); len(got) >= len(want) {
		t.Fatalf("without the partitioners: out = %v, want fewer results than %d", got, len(want))
	}
}

// TestPatternSourceDriver pipes records to topics that a pattern source matches, written
// after the driver started, and to one it does not (a partial match), which the driver
// refuses as it refuses any topic the topology does not read.
func TestPatternSourceDriver(t *testing.T) {
	b := kstream.NewBuilder()
	s := kstream.StreamPattern(b, regexp.MustCompile(`in-[0-9]`), serde.String(), serde.String())
	kstream.MapValuesWithKey(s, func(k, v string) string { return k + v }).To("out", serde.String(), serde.String())
	d, err := kstreamtest.New(b, kstream.Config{}, kstreamtest.Partitions(2))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, topic := range []string{"in-1", "in-3"} {
		if err := kstreamtest.CreateInputTopic(d, topic, serde.String(), serde.String()).Pipe("k", topic); err != nil {
			t.Fatal(err)
		}
	}
	// The whole name must match, as in Java: in-22 is no source.
	if err := kstreamtest.CreateInputTopic(d, "in-22", serde.String(), serde.String()).Pipe("k", "in-22"); err == nil || !strings.Contains(err.Error(), "not a source") {
		t.Fatalf("piping to in-22: err = %v, want one saying it is not a source", err)
	}
	vs, err := kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.String()).ReadValues()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"kin-1", "kin-3"}; !slices.Equal(vs, want) {
		t.Fatalf("out = %v, want %v", vs, want)
	}
}
