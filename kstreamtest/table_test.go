package kstreamtest_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
)

// tablePipe pipes key = value (nil: a Kafka null) at ts milliseconds into topic.
type tablePipe struct {
	topic, key string
	value      *string
	ts         int64
}

func sv(s string) *string { return &s }

// pipeAll pipes every record as raw bytes, failing the test on an error.
func pipeAll(t *testing.T, d *kstreamtest.Driver, recs ...tablePipe) {
	t.Helper()
	ins := map[string]*kstreamtest.InputTopic[string, string]{}
	for _, r := range recs {
		in, ok := ins[r.topic]
		if !ok {
			in = kstreamtest.CreateInputTopic(d, r.topic, serde.String(), serde.String())
			ins[r.topic] = in
		}
		var v []byte
		if r.value != nil {
			v = []byte(*r.value)
		}
		if err := in.PipeRaw([]byte(r.key), v, time.UnixMilli(r.ts)); err != nil {
			t.Fatalf("piping %s %s: %v", r.topic, r.key, err)
		}
	}
}

// readTopic reads every record of topic as "key=value@ms", with "<nil>" for a null value.
func readTopic(t *testing.T, d *kstreamtest.Driver, topic string) []string {
	t.Helper()
	recs, err := kstreamtest.CreateOutputTopic(d, topic, serde.String(), serde.Nullable(serde.String())).ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, 0, len(recs))
	for _, r := range recs {
		v := "<nil>"
		if r.Value != nil {
			v = *r.Value
		}
		out = append(out, fmt.Sprintf("%s=%s@%d", r.Key, v, r.Timestamp.UnixMilli()))
	}
	return out
}

func newDriver(t *testing.T, b *kstream.Builder) *kstreamtest.Driver {
	t.Helper()
	return newDriverConfig(t, b, kstream.Config{})
}

// newDriverNoCache is newDriver without the record cache (on by default), for the tests
// whose expected output is Kafka Streams' with statestore.cache.max.bytes 0: every update,
// a tombstone for a key the table did not hold included.
func newDriverNoCache(t *testing.T, b *kstream.Builder) *kstreamtest.Driver {
	t.Helper()
	return newDriverConfig(t, b, kstream.Config{CacheMaxBytes: -1})
}

func newDriverConfig(t *testing.T, b *kstream.Builder, cfg kstream.Config) *kstreamtest.Driver {
	t.Helper()
	d, err := kstreamtest.New(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func wantRecords(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got  %q\n want %q", what, got, want)
	}
}

// KTable.Filter forwards a delete for a key whose new value is filtered out, unless its old
// value was filtered out too; deletes pass as deletes; MapValues is not called on deletes.
func TestTableFilterMapValues(t *testing.T) {
	b := kstream.NewBuilder()
	tbl := kstream.Table(b, "in", serde.String(), serde.String(), "in-store")
	calls := 0
	long := tbl.Filter(func(_, v string) bool { return len(v) > 3 }, kstream.Named("long"))
	kstream.TableMapValuesWithKey(long, func(k, v string) string { calls++; return k + ":" + strings.ToUpper(v) }).
		ToStream().To("out", nil, nil)
	short := tbl.FilterNot(func(_, v string) bool { return len(v) > 3 }, kstream.Materialized[string]("short-store", nil))
	short.ToStream().To("short", nil, nil)
	if short.StoreName() != "short-store" || long.StoreName() != "" {
		t.Fatalf("store names %q and %q", short.StoreName(), long.StoreName())
	}
	d := newDriver(t, b)
	pipeAll(t, d,
		tablePipe{"in", "a", sv("long"), 1},
		tablePipe{"in", "a", sv("xy"), 2},   // filtered out now: a delete downstream of long
		tablePipe{"in", "a", sv("no"), 3},   // filtered out before and now: nothing
		tablePipe{"in", "b", nil, 4},        // delete of an absent key: nothing
		tablePipe{"in", "b", sv("bee1"), 5}, //
		tablePipe{"in", "b", nil, 6},        // a delete passes as a delete
		tablePipe{"in", "a", nil, 7},        // short had a = no: a delete there
	)
	wantRecords(t, "filtered and mapped", readTopic(t, d, "out"), []string{"a=a:LONG@1", "a=<nil>@2", "b=b:BEE1@5", "b=<nil>@6"})
	wantRecords(t, "materialized FilterNot", readTopic(t, d, "short"), []string{"a=xy@2", "a=no@3", "a=<nil>@7"})
	if calls != 2 {
		t.Errorf("the mapper ran %d times, want 2 (never on deletes, nor on old values nobody asked for)", calls)
	}
	for _, name := range []string{"in-store", "short-store"} {
		st, err := kstreamtest.KeyValueStore(d, name, 0, serde.String(), serde.String())
		if err != nil {
			t.Fatal(err)
		}
		n, _ := st.ApproximateNumEntries()
		if n != 0 {
			t.Errorf("store %s has %d keys after every key was deleted", name, n)
		}
	}
}

// KStream.ToTable: a null value deletes, a null key is dropped, and a re-keyed stream is
// repartitioned first (tombstones travel as null values), through a topic named after the
// ToTable operator as Kafka Streams names it (KSTREAM-TOTABLE-0000000005: the source, the
// first ToTable, its ToStream and sink, and SelectKey take 0 to 4).
func TestToTable(t *testing.T) {
	b := kstream.NewBuilder()
	s := kstream.Stream(b, "events", serde.String(), serde.String())
	s.ToTable("latest").ToStream().To("latest-out", nil, nil)
	first := func(_, v string) string {
		if v == "" {
			return "_"
		}
		return v[:1]
	}
	kstream.SelectKey(s, first).ToTable("by-first").ToStream().To("by-first-out", nil, nil)
	d := newDriverNoCache(t, b) // the tombstone of "_", a key the table never held, comes out
	pipeAll(t, d,
		tablePipe{"events", "k1", sv("apple"), 1},
		tablePipe{"events", "k2", sv("avocado"), 2},
		tablePipe{"events", "k1", nil, 3},
	)
	in := kstreamtest.CreateInputTopic(d, "events", serde.String(), serde.String())
	if err := in.PipeRaw(nil, []byte("x"), time.UnixMilli(4)); err != nil { // a null key
		t.Fatal(err)
	}
	wantRecords(t, "latest", readTopic(t, d, "latest-out"), []string{"k1=apple@1", "k2=avocado@2", "k1=<nil>@3"})
	wantRecords(t, "by first letter", readTopic(t, d, "by-first-out"), []string{"a=apple@1", "a=avocado@2", "_=<nil>@3", "x=x@4"})
	wantRecords(t, "repartition topic", readTopic(t, d, "kstreamtest-KSTREAM-TOTABLE-0000000005-repartition"), []string{"a=apple@1", "a=avocado@2", "_=<nil>@3", "x=x@4"})
	st, err := kstreamtest.KeyValueStore(d, "latest", 0, serde.String(), serde.String())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	it, _ := st.All()
	for it.Next() {
		keys = append(keys, it.Key()+"="+it.Value())
	}
	it.Close()
	wantRecords(t, "latest store", keys, []string{"k2=avocado"})
}

// TableGroupBy with TableCount and TableAggregate: a row that moves subtracts from its old
// group first, then adds to the new one; a delete subtracts; an update within a group is one
// change (subtract and add at once); a count of 0 stays.
func TestTableGroupByCountAggregate(t *testing.T) {
	b := kstream.NewBuilder()
	accounts := kstream.Table(b, "accounts", serde.String(), serde.String(), "accounts-store")
	byRegion := func(acct, region string) kstream.KeyValue[string, string] { return kstream.KV(region, acct) }
	counts := kstream.TableCount(kstream.TableGroupBy(accounts, byRegion, nil, nil), "region-counts")
	kstream.TableMapValues(counts, func(n int64) string { return fmt.Sprint(n) }).ToStream().To("counts", serde.String(), serde.String())
	kstream.TableAggregate(kstream.TableGroupBy(accounts, byRegion, nil, nil), func() string { return "" },
		func(_, acct, agg string) string { return agg + "+" + acct },
		func(_, acct, agg string) string { return agg + "-" + acct },
		serde.String(), "region-accounts").ToStream().To("accts", nil, nil)
	d := newDriver(t, b)
	pipeAll(t, d,
		tablePipe{"accounts", "a1", sv("eu"), 1},
		tablePipe{"accounts", "a2", sv("eu"), 2},
		tablePipe{"accounts", "a1", sv("us"), 3}, // moves from eu to us
		tablePipe{"accounts", "a2", nil, 4},      // deleted: eu falls to 0
		tablePipe{"accounts", "a1", sv("us"), 5}, // same group: one change
		tablePipe{"accounts", "a3", nil, 6},      // delete of an absent row: nothing
		tablePipe{"accounts", "a3", sv("eu"), 0}, // older than eu's aggregate: keeps its timestamp
	)
	wantRecords(t, "counts", readTopic(t, d, "counts"), []string{"eu=1@1", "eu=2@2", "eu=1@3", "us=1@3", "eu=0@4", "us=1@5", "eu=1@4"})
	wantRecords(t, "aggregate", readTopic(t, d, "accts"), []string{
		"eu=+a1@1", "eu=+a1+a2@2", "eu=+a1+a2-a1@3", "us=+a1@3", "eu=+a1+a2-a1-a2@4", "us=+a1-a1+a1@5", "eu=+a1+a2-a1-a2+a3@4"})

	// The repartition topic holds the changes in Kafka Streams' ChangedSerializer format.
	raw, err := kstreamtest.CreateOutputTopic(d, "kstreamtest-region-counts-repartition", serde.String(), serde.Bytes()).ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range raw {
		got = append(got, fmt.Sprintf("%s:%q", r.Key, r.Value))
	}
	want := []string{`eu:"a1\x01"`, `eu:"a2\x01"`, `eu:"a1\x00"`, `us:"a1\x01"`, `eu:"a2\x00"`, `us:"\x04a1a1\x02"`, `eu:"a3\x01"`}
	wantRecords(t, "repartitioned changes", got, want)
}

// TableReduce with a subtractor: a group whose rows all left keeps the subtracted value.
func TestTableReduce(t *testing.T) {
	b := kstream.NewBuilder()
	balances := kstream.Table(b, "balances", serde.String(), serde.Int64(), "balances-store")
	g := kstream.TableGroupBy(balances, func(_ string, v int64) kstream.KeyValue[string, int64] { return kstream.KV("total", v) }, serde.String(), nil)
	sum := kstream.TableReduce(g, func(a, v int64) int64 { return a + v }, func(a, v int64) int64 { return a - v }, "total")
	sum.ToStream().To("out", nil, nil)
	d := newDriver(t, b)
	in := kstreamtest.CreateInputTopic(d, "balances", serde.String(), serde.Int64())
	steps := []struct {
		key string
		v   int64
		del bool
	}{{"x", 10, false}, {"y", 5, false}, {"x", 7, false}, {"y", 0, true}, {"x", 0, true}}
	for i, s := range steps {
		var err error
		if s.del {
			err = in.PipeRaw([]byte(s.key), nil, time.UnixMilli(int64(i+1)))
		} else {
			err = in.PipeAt(s.key, s.v, time.UnixMilli(int64(i+1)))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	recs, err := kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.Int64()).ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, fmt.Sprintf("%s=%d@%d", r.Key, r.Value, r.Timestamp.UnixMilli()))
	}
	wantRecords(t, "sum", got, []string{"total=10@1", "total=15@2", "total=12@3", "total=7@4", "total=0@5"})
	st, _ := kstreamtest.KeyValueStore(d, "total", 0, serde.String(), serde.Int64())
	if v, ok, err := st.Get("total"); err != nil || !ok || v != 0 {
		t.Errorf("store: total = %d, %v, %v; want 0, present", v, ok, err)
	}
}

// Table-table inner, left and outer joins: updates and deletes on both sides, each result
// with the larger timestamp of the two sides.
func TestTableTableJoins(t *testing.T) {
	b := kstream.NewBuilder()
	l := kstream.Table(b, "L", serde.String(), serde.String(), "l-store")
	r := kstream.Table(b, "R", serde.String(), serde.String(), "r-store")
	dash := func(v string, ok bool) string {
		if !ok {
			return "-"
		}
		return v
	}
	inner := kstream.TableJoin(l, r, func(_, a, c string) string { return a + "/" + c }, kstream.Materialized("inner-store", serde.String()))
	inner.ToStream().To("inner", nil, nil)
	kstream.TableLeftJoin(l, r, func(_, a, c string, ok bool) string { return a + "/" + dash(c, ok) }, kstream.Named("left")).
		ToStream().To("left", serde.String(), serde.String())
	outer := kstream.TableOuterJoin(l, r, func(_, a string, aok bool, c string, cok bool) string { return dash(a, aok) + "/" + dash(c, cok) },
		kstream.Materialized[string]("outer-store", nil))
	outer.ToStream().To("outer", serde.String(), serde.String())
	d := newDriver(t, b)
	pipeAll(t, d,
		tablePipe{"L", "a", sv("l1"), 10},
		tablePipe{"R", "a", sv("r1"), 5},
		tablePipe{"R", "b", sv("r2"), 20},
		tablePipe{"L", "a", nil, 30}, // left row deleted, right still there
		tablePipe{"R", "a", nil, 40}, // both gone
		tablePipe{"L", "c", nil, 50}, // delete of a key neither side has
		tablePipe{"R", "b", nil, 60},
		tablePipe{"L", "b", sv("l2"), 70},
		tablePipe{"R", "b", sv("r3"), 65},
		tablePipe{"L", "b", sv("l4"), 1}, // older than the right row: the right's timestamp
		tablePipe{"R", "b", nil, 80},     // right row deleted, left still there
	)
	wantRecords(t, "inner", readTopic(t, d, "inner"), []string{"a=l1/r1@10", "a=<nil>@30", "b=l2/r3@70", "b=l4/r3@65", "b=<nil>@80"})
	wantRecords(t, "left", readTopic(t, d, "left"), []string{"a=l1/-@10", "a=l1/r1@10", "a=<nil>@30", "b=l2/-@70", "b=l2/r3@70", "b=l4/r3@65", "b=l4/-@80"})
	wantRecords(t, "outer", readTopic(t, d, "outer"), []string{
		"a=l1/-@10", "a=l1/r1@10", "b=-/r2@20", "a=-/r1@30", "a=<nil>@40", "b=<nil>@60", "b=l2/-@70", "b=l2/r3@70", "b=l4/r3@65", "b=l4/-@80"})

	dump := func(name string) []string {
		st, err := kstreamtest.KeyValueStore(d, name, 0, serde.String(), serde.String())
		if err != nil {
			t.Fatal(err)
		}
		it, _ := st.All()
		defer it.Close()
		var kvs []string
		for it.Next() {
			kvs = append(kvs, it.Key()+"="+it.Value())
		}
		return kvs
	}
	wantRecords(t, "inner store", dump("inner-store"), nil)
	wantRecords(t, "outer store", dump("outer-store"), []string{"b=l4/-"})
}

// A join result without a store is a table like any other: it can be joined (the next join
// reads through to the first join's inputs) and its deletes reach the topic as nulls.
func TestTableJoinOfJoin(t *testing.T) {
	b := kstream.NewBuilder()
	users := kstream.Table(b, "users", serde.String(), serde.String(), "users")
	emails := kstream.Table(b, "emails", serde.String(), serde.String(), "emails")
	phones := kstream.Table(b, "phones", serde.String(), serde.String(), "phones")
	contact := kstream.TableJoin(users, emails, func(_, u, e string) string { return u + " <" + e + ">" })
	if contact.StoreName() != "" {
		t.Fatalf("unmaterialized join has store %q", contact.StoreName())
	}
	full := kstream.TableLeftJoin(contact, phones, func(_, c, p string, ok bool) string {
		if !ok {
			return c
		}
		return c + " " + p
	})
	full.ToStream().To("out", serde.String(), serde.String())
	d := newDriver(t, b)
	pipeAll(t, d,
		tablePipe{"phones", "u1", sv("555"), 1}, // no contact yet: nothing
		tablePipe{"users", "u1", sv("ann"), 2},  // no email yet: nothing
		tablePipe{"emails", "u1", sv("a@x"), 3}, // contact appears, with the phone
		tablePipe{"phones", "u1", sv("556"), 4}, // looked up through the first join
		tablePipe{"emails", "u1", nil, 5},       // contact gone: a delete
		tablePipe{"phones", "u1", sv("557"), 6}, // no contact: nothing
	)
	wantRecords(t, "join of a join", readTopic(t, d, "out"), []string{"u1=ann <a@x> 555@3", "u1=ann <a@x> 556@4", "u1=<nil>@5"})
}

// The tables of a join must be co-partitioned.
func TestTableJoinCopartitioning(t *testing.T) {
	b := kstream.NewBuilder()
	l := kstream.Table(b, "L", serde.String(), serde.String(), "l")
	r := kstream.Table(b, "R", serde.String(), serde.String(), "r")
	kstream.TableJoin(l, r, func(_, a, c string) string { return a + c }).ToStream().To("out", serde.String(), serde.String())
	_, err := kstreamtest.New(b, kstream.Config{}, kstreamtest.TopicPartitions("L", 2), kstreamtest.TopicPartitions("R", 3))
	if err == nil || !strings.Contains(err.Error(), "co-partitioned") {
		t.Fatalf("got %v, want a co-partitioning error", err)
	}
}

// A table tombstone reaches a sink as a null value even when the value type has no nil, and
// operators that keep the value keep the tombstone.
func TestTombstoneToSink(t *testing.T) {
	b := kstream.NewBuilder()
	tbl := kstream.Table(b, "in", serde.String(), serde.Int64(), "in")
	var seen []bool
	tbl.ToStream().Peek(func(string, int64) {}).Filter(func(string, int64) bool { return true }).
		To("out", nil, nil)
	kstream.Process(tbl.ToStream(), func() kstream.Processor[string, int64, string, int64] {
		return kstream.ProcessorFunc[string, int64, string, int64](func(ctx kstream.ProcessorContext[string, int64], r kstream.Record[string, int64]) error {
			seen = append(seen, r.IsTombstone())
			r.Value = 42 // a new value: no longer a tombstone
			ctx.Forward(r)
			return nil
		})
	}).To("rewritten", serde.String(), serde.Int64())
	d := newDriver(t, b)
	in := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.Int64())
	if err := in.PipeAt("k", 0, time.UnixMilli(1)); err != nil { // a real 0, not a delete
		t.Fatal(err)
	}
	if err := in.PipeRaw([]byte("k"), nil, time.UnixMilli(2)); err != nil {
		t.Fatal(err)
	}
	recs, err := kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.Bytes()).ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Value == nil || len(recs[0].Value) != 8 || recs[1].Value != nil {
		t.Fatalf("out: %v; want an 8-byte 0, then a null value", recs)
	}
	if !slices.Equal(seen, []bool{false, true}) {
		t.Errorf("IsTombstone: %v, want [false true]", seen)
	}
	vals, _ := kstreamtest.CreateOutputTopic(d, "rewritten", serde.String(), serde.Int64()).ReadValues()
	if !slices.Equal(vals, []int64{42, 42}) {
		t.Errorf("rewritten: %v, want [42 42]", vals)
	}
}

// Record.AsTombstone makes a processor's output a delete, written as a null value.
func TestAsTombstone(t *testing.T) {
	b := kstream.NewBuilder()
	s := kstream.Stream(b, "in", serde.String(), serde.String())
	kstream.Process(s, func() kstream.Processor[string, string, string, string] {
		return kstream.ProcessorFunc[string, string, string, string](func(ctx kstream.ProcessorContext[string, string], r kstream.Record[string, string]) error {
			if r.Value == "delete" {
				r = r.AsTombstone()
			}
			ctx.Forward(r)
			return nil
		})
	}).To("out", nil, nil)
	d := newDriver(t, b)
	pipeAll(t, d, tablePipe{"in", "a", sv("keep"), 1}, tablePipe{"in", "a", sv("delete"), 2}, tablePipe{"in", "a", sv(""), 3})
	wantRecords(t, "out", readTopic(t, d, "out"), []string{"a=keep@1", "a=<nil>@2", "a=@3"})
}
