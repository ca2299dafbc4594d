package kstreamtest_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
)

// Stream-globaltable joins on the driver, record by record: a key mapper picks the table
// key from the stream value; updates and tombstones piped into the global topic change what
// later stream records see at once, and never emit by themselves. The topics have different
// partition counts (no co-partitioning), and the global store holds every partition.
func TestGlobalTableJoin(t *testing.T) {
	b := kstream.NewBuilder()
	users := kstream.GlobalTable(b, "users", serde.String(), serde.String(), "users-global")
	// orders: key = order id, value = user id.
	orders := kstream.Stream(b, "orders", serde.String(), serde.String())
	byUser := func(_ string, user string) string { return user }
	kstream.JoinGlobal(orders, users, byUser, func(order, user, name string) string { return order + ":" + name }).
		To("inner", serde.String(), serde.String())
	kstream.LeftJoinGlobal(orders, users, byUser, func(order, user, name string, found bool) string {
		if !found {
			return order + ":?" + user
		}
		return order + ":" + name
	}).To("left", serde.String(), serde.String())
	d, err := kstreamtest.New(b, kstream.Config{}, kstreamtest.TopicPartitions("users", 4), kstreamtest.TopicPartitions("orders", 3))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	u := kstreamtest.CreateInputTopic(d, "users", serde.String(), serde.String())
	o := kstreamtest.CreateInputTopic(d, "orders", serde.String(), serde.String(), kstreamtest.AutoAdvance(time.Second))
	tombstone := func(key string) error { return u.PipeRaw([]byte(key), nil, time.Time{}) }
	steps := []func() error{
		func() error { return o.Pipe("o1", "u1") },    // no user yet
		func() error { return u.Pipe("u1", "ann") },   // table update: no output
		func() error { return u.Pipe("u2", "bob") },   // on another partition of users
		func() error { return u.Pipe("u3", "cy") },    // and another
		func() error { return o.Pipe("o2", "u1") },    // ann
		func() error { return o.Pipe("o3", "u2") },    // bob
		func() error { return o.Pipe("o4", "u3") },    // cy
		func() error { return u.Pipe("u1", "annie") }, // update
		func() error { return o.Pipe("o5", "u1") },    // annie
		func() error { return tombstone("u1") },       // delete
		func() error { return o.Pipe("o6", "u1") },    // gone: inner drops, left gets found=false
		func() error { return o.Pipe("o7", "u9") },    // never known
		func() error { return tombstone("u-never") },  // deleting an absent key is harmless
		func() error { return o.Pipe("o8", "u2") },    // bob still there
		func() error { return u.Pipe("u1", "again") }, // back
		func() error { return o.Pipe("o9", "u1") },    // again
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	inner, _ := kstreamtest.CreateOutputTopic(d, "inner", serde.String(), serde.String()).ReadKeyValues()
	left, _ := kstreamtest.CreateOutputTopic(d, "left", serde.String(), serde.String()).ReadKeyValues()
	kv := func(k, v string) kstream.KeyValue[string, string] { return kstream.KV(k, v) }
	wantInner := []kstream.KeyValue[string, string]{
		kv("o2", "o2:ann"), kv("o3", "o3:bob"), kv("o4", "o4:cy"), kv("o5", "o5:annie"), kv("o8", "o8:bob"), kv("o9", "o9:again"),
	}
	if !slices.Equal(inner, wantInner) {
		t.Errorf("inner join:\n got %v\nwant %v", inner, wantInner)
	}
	wantLeft := []kstream.KeyValue[string, string]{
		kv("o1", "o1:?u1"), kv("o2", "o2:ann"), kv("o3", "o3:bob"), kv("o4", "o4:cy"), kv("o5", "o5:annie"),
		kv("o6", "o6:?u1"), kv("o7", "o7:?u9"), kv("o8", "o8:bob"), kv("o9", "o9:again"),
	}
	if !slices.Equal(left, wantLeft) {
		t.Errorf("left join:\n got %v\nwant %v", left, wantLeft)
	}
	// The global store is readable from the test and holds the keys of every partition;
	// the partition argument does not matter for it.
	st, err := kstreamtest.KeyValueStore(d, "users-global", 2, serde.String(), serde.String())
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"u1": "again", "u2": "bob", "u3": "cy"} {
		if v, ok, err := st.Get(k); err != nil || !ok || v != want {
			t.Errorf("global store %s = %q, %v, %v; want %q", k, v, ok, err, want)
		}
	}
	if n, _ := st.ApproximateNumEntries(); n != 3 {
		t.Errorf("global store has %d keys, want 3", n)
	}
}

// A record the topology writes to a global table's topic updates the global store too, as
// in TopologyTestDriver.
func TestGlobalTableFedByTopology(t *testing.T) {
	b := kstream.NewBuilder()
	names := kstream.GlobalTable(b, "names", serde.String(), serde.String(), "names")
	kstream.Stream(b, "register", serde.String(), serde.String()).To("names", nil, nil)
	kstream.JoinGlobal(kstream.Stream(b, "greet", serde.String(), serde.String()), names,
		func(k, _ string) string { return k }, func(_, greeting, name string) string { return greeting + " " + name }).
		To("out", nil, serde.String())
	d, err := kstreamtest.New(b, kstream.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := kstreamtest.CreateInputTopic(d, "register", serde.String(), serde.String()).Pipe("k", "kim"); err != nil {
		t.Fatal(err)
	}
	if err := kstreamtest.CreateInputTopic(d, "greet", serde.String(), serde.String()).Pipe("k", "hello"); err != nil {
		t.Fatal(err)
	}
	got, _ := kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.String()).ReadValues()
	if !slices.Equal(got, []string{"hello kim"}) {
		t.Fatalf("got %v, want [hello kim]", got)
	}
}

// A global table record that cannot be decoded goes to the deserialization handler: under
// LogAndContinue it is skipped (the store keeps the previous value), under the default it
// stops the topology with the record's coordinates.
func TestGlobalTableDeserializationError(t *testing.T) {
	build := func() *kstream.Builder {
		b := kstream.NewBuilder()
		g := kstream.GlobalTable(b, "prices", serde.String(), serde.Int64(), "prices")
		kstream.LeftJoinGlobal(kstream.Stream(b, "items", serde.String(), serde.String()), g,
			func(k, _ string) string { return k }, func(_, _ string, p int64, found bool) int64 {
				if !found {
					return -1
				}
				return p
			}).To("out", nil, serde.Int64())
		return b
	}
	pipe := func(d *kstreamtest.Driver) error {
		p := kstreamtest.CreateInputTopic(d, "prices", serde.String(), serde.Int64())
		if err := p.Pipe("a", 10); err != nil {
			return err
		}
		if err := p.PipeRaw([]byte("a"), []byte("bad"), time.Time{}); err != nil { // offset 1
			return err
		}
		return kstreamtest.CreateInputTopic(d, "items", serde.String(), serde.String()).Pipe("a", "x")
	}

	d, err := kstreamtest.New(build(), kstream.Config{DeserializationErrorHandler: kstream.LogAndContinue()})
	if err != nil {
		t.Fatal(err)
	}
	if err := pipe(d); err != nil {
		t.Fatal(err)
	}
	if got, _ := kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.Int64()).ReadValues(); !slices.Equal(got, []int64{10}) {
		t.Fatalf("LogAndContinue: got %v, want [10] (the bad record skipped)", got)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	d, err = kstreamtest.New(build(), kstream.Config{})
	if err != nil {
		t.Fatal(err)
	}
	err = pipe(d)
	var re *kstream.RecordError
	if !errors.As(err, &re) || re.Kind != kstream.DeserializationError || re.Topic != "prices" || re.Partition != 0 || re.Offset != 1 {
		t.Fatalf("LogAndFail: got %v, want a deserialization RecordError at prices/0/1", err)
	}
	_ = d.Close()
}
