package kstream_test

import (
	"testing"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
)

// fkJoinOnDriver runs fkJoinTopology over the input of fkJoinInput on the test driver,
// with orders on 4 partitions and customers on 3, and returns the joined table (the last
// value per key of out) and the expected one.
func fkJoinOnDriver(t *testing.T, nOrders, nCustomers int, seed uint64) (got, want map[string]string, d *kstreamtest.Driver) {
	t.Helper()
	batches, _, want := fkJoinInput("orders", "customers", nOrders, nCustomers, seed)
	d, err := kstreamtest.New(fkJoinTopology("orders", "customers", "out"), kstream.Config{ApplicationID: "fk"},
		kstreamtest.Partitions(4), kstreamtest.TopicPartitions("customers", 3))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	ins := map[string]*kstreamtest.InputTopic[[]byte, []byte]{}
	for _, b := range batches {
		for _, r := range b {
			in := ins[r.Topic]
			if in == nil {
				in = kstreamtest.CreateInputTopic(d, r.Topic, serde.Bytes(), serde.Bytes())
				ins[r.Topic] = in
			}
			if err := in.PipeRaw(r.Key, r.Value, r.Timestamp); err != nil {
				t.Fatal(err)
			}
		}
	}
	out := kstreamtest.CreateOutputTopic(d, "out", serde.Bytes(), serde.Bytes())
	recs, err := out.ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	got = map[string]string{}
	for _, r := range recs {
		if r.Value == nil {
			delete(got, string(r.Key))
		} else {
			got[string(r.Key)] = string(r.Value)
		}
	}
	return got, want, d
}

// The foreign-key join's table equals the join of the inputs' final tables, on the driver,
// after a history of foreign-key changes, deletes of both sides and null foreign keys.
func TestFKJoinFinalTableOnDriver(t *testing.T) {
	got, want, _ := fkJoinOnDriver(t, 2000, 200, 7)
	bad := 0
	for k, v := range want {
		if got[k] != v {
			if bad++; bad <= 10 {
				t.Errorf("order %s: joined %q, want %q", k, got[k], v)
			}
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			if bad++; bad <= 10 {
				t.Errorf("order %s: joined %q, want no row", k, v)
			}
		}
	}
	t.Logf("%d joined rows, %d wrong", len(want), bad)
}
