package kstream_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
)

// byKey groups records by key, keeping their order (the records of one key share a
// partition), as "value@ms" with "<nil>" for a null value.
func byKey(recs []*kgo.Record) map[string][]string {
	out := map[string][]string{}
	for _, r := range recs {
		v := "<nil>"
		if r.Value != nil {
			v = string(r.Value)
		}
		out[string(r.Key)] = append(out[string(r.Key)], fmt.Sprintf("%s@%d", v, r.Timestamp.Sub(baseTime).Milliseconds()))
	}
	return out
}

// Table-table inner and outer joins and a table aggregation with a subtractor, on a broker,
// with deletes on both sides: every output record per key, in order, with its timestamp.
// Each step waits for its outer-join result, so that the two input topics are processed in
// the order the test writes them.
func TestTableJoinAndAggregateOnBroker(t *testing.T) {
	t.Parallel()
	left := kafkatest.CreateTopic(t, "left", 2, nil)
	right := kafkatest.CreateTopic(t, "right", 2, nil)
	outer := kafkatest.CreateTopic(t, "outer", 2, nil)
	inner := kafkatest.CreateTopic(t, "inner", 2, nil)
	groups := kafkatest.CreateTopic(t, "groups", 2, nil)

	b := kstream.NewBuilder()
	l := kstream.Table(b, left, serde.String(), serde.String(), "left-store")
	r := kstream.Table(b, right, serde.String(), serde.String(), "right-store")
	dash := func(v string, ok bool) string {
		if !ok {
			return "-"
		}
		return v
	}
	kstream.TableOuterJoin(l, r, func(_, a string, aok bool, c string, cok bool) string { return dash(a, aok) + "/" + dash(c, cok) }).
		ToStream().To(outer, serde.String(), serde.String())
	kstream.TableJoin(l, r, func(_, a, c string) string { return a + "/" + c }).
		ToStream().To(inner, serde.String(), serde.String())
	g := kstream.TableGroupBy(l, func(k, v string) kstream.KeyValue[string, string] { return kstream.KV(v, k) }, nil, nil)
	kstream.TableAggregate(g, func() string { return "" },
		func(_, k, agg string) string { return agg + "+" + k },
		func(_, k, agg string) string { return agg + "-" + k },
		serde.String(), "by-value", kstream.InMemory()).
		ToStream().To(groups, nil, nil)

	cfg := testConfig(t)
	cfg.StateDir = t.TempDir()
	// Exactly-once, read read_committed: the outputs are compared exactly, and under
	// at-least-once a rebalance on a loaded broker (the group's session timing out) would
	// replay records and repeat outputs.
	cfg.Guarantee = kstream.ExactlyOnce
	app := newApp(t, b, cfg)
	start(t, app)
	kafkatest.Eventually(t, 60*time.Second, "running", func() bool { return app.State() == kstream.StateRunning })
	cl := kafkatest.Client(t)
	del := func(topic, key string, tsMs int) *kgo.Record {
		r := rec(topic, key, "", tsMs)
		r.Value = nil
		return r
	}
	steps := []*kgo.Record{
		rec(left, "a", "l1", 10),
		rec(right, "a", "r1", 5),
		rec(right, "b", "r2", 20),
		del(left, "a", 30),
		rec(left, "b", "l1", 40),
		del(right, "b", 50),
		rec(left, "b", "l2", 60),
		del(right, "a", 70),
	}
	for i, s := range steps {
		kafkatest.Produce(t, cl, s)
		kafkatest.Consume(t, outer, i+1, 60*time.Second, readCommitted)
	}
	check := func(topic string, want map[string][]string) {
		t.Helper()
		got := byKey(kafkatest.Drain(t, topic, time.Second, 30*time.Second, readCommitted))
		if !maps.EqualFunc(got, want, slices.Equal) {
			t.Errorf("topic %s:\n got  %v\n want %v", topic, got, want)
		}
	}
	check(outer, map[string][]string{
		"a": {"l1/-@10", "l1/r1@10", "-/r1@30", "<nil>@70"},
		"b": {"-/r2@20", "l1/r2@40", "l1/-@50", "l2/-@60"},
	})
	check(inner, map[string][]string{
		"a": {"l1/r1@10", "<nil>@30"},
		"b": {"l1/r2@40", "<nil>@50"},
	})
	check(groups, map[string][]string{
		"l1": {"+a@10", "+a-a@30", "+a-a+b@40", "+a-a+b-b@60"},
		"l2": {"+b@60"},
	})
}

// Table stores keep timestamps across a restore: a changelog holds plain values with the
// value's timestamp as the record timestamp (Kafka Streams' format), a source topic's
// records restore with their own timestamps, and results computed after the restore use
// them (a join takes the larger timestamp of its sides, an aggregate its largest so far).
func TestTableTimestampsAfterRestore(t *testing.T) {
	t.Parallel()
	left := kafkatest.CreateTopic(t, "left", 1, nil)
	right := kafkatest.CreateTopic(t, "right", 1, nil)
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	joined := kafkatest.CreateTopic(t, "joined", 1, nil)
	counts := kafkatest.CreateTopic(t, "counts", 1, nil)
	build := func() *kstream.Builder {
		b := kstream.NewBuilder()
		l := kstream.Table(b, left, serde.String(), serde.String(), "l-store")
		r := kstream.Table(b, right, serde.String(), serde.String(), "r-store")
		kstream.TableJoin(l, r, func(_, a, c string) string { return a + "/" + c }).ToStream().To(joined, serde.String(), serde.String())
		kstream.Count(kstream.Stream(b, in, serde.String(), serde.String()).GroupByKey(), "counts").ToStream().To(counts, nil, nil)
		return b
	}
	cfg := testConfig(t)
	cfg.StateDir = t.TempDir()
	run := start(t, newApp(t, build(), cfg))
	cl := kafkatest.Client(t)
	kafkatest.Produce(t, cl, rec(left, "a", "l1", 100), rec(in, "x", "-", 300), rec(in, "x", "-", 200))
	kafkatest.Eventually(t, 90*time.Second, "input committed", func() bool {
		return committedOffsets(t, cfg.ApplicationID, left)[0] == 1 && committedOffsets(t, cfg.ApplicationID, in)[0] == 2
	})
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
	var got []string
	// A persistent store writes its changelog at commit, one record per changed key (as
	// Kafka Streams' caching store does), so the first count may or may not be there.
	for _, r := range kafkatest.Drain(t, cfg.ApplicationID+"-counts-changelog", time.Second, 90*time.Second) {
		n, err := serde.Int64().Deserialize(r.Value)
		if err != nil {
			t.Fatalf("changelog value %x: %v", r.Value, err)
		}
		got = append(got, fmt.Sprintf("%s=%d@%d", r.Key, n, r.Timestamp.Sub(baseTime).Milliseconds()))
	}
	if want := []string{"x=1@300", "x=2@300"}; !slices.Equal(got, want) && !slices.Equal(got, want[1:]) {
		t.Fatalf("changelog: %v, want %v or its last record alone", got, want)
	}
	changelogRecords := int64(len(got))

	// Restart on an empty directory: both stores are restored, with their timestamps.
	rc := &restoreCounter{}
	cfg.StateDir, cfg.RestoreListener = t.TempDir(), rc
	start(t, newApp(t, build(), cfg))
	kafkatest.Produce(t, cl, rec(right, "a", "r1", 50), rec(in, "x", "-", 250))
	j := byKey(kafkatest.Consume(t, joined, 1, 90*time.Second))
	if want := []string{"l1/r1@100"}; !slices.Equal(j["a"], want) {
		t.Errorf("join after restore: %v, want %v (the restored left row's timestamp)", j["a"], want)
	}
	got = nil
	for _, r := range kafkatest.Consume(t, counts, 3, 90*time.Second) {
		n, _ := serde.Int64().Deserialize(r.Value)
		got = append(got, fmt.Sprintf("%s=%d@%d", r.Key, n, r.Timestamp.Sub(baseTime).Milliseconds()))
	}
	if want := []string{"x=1@300", "x=2@300", "x=3@300"}; !slices.Equal(got, want) {
		t.Errorf("counts: %v, want %v (the last one after the restore: the restored timestamp is larger)", got, want)
	}
	if rc.total("l-store") != 1 || rc.total("counts") != changelogRecords {
		t.Errorf("restored %d left rows and %d counts, want 1 and the %d changelog records", rc.total("l-store"), rc.total("counts"), changelogRecords)
	}
}
