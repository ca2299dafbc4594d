package kstream_test

import (
	"encoding/hex"
	"slices"
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

// The hash check of the response resolver: a response carrying the hash of the left row's
// current value is joined; one carrying another value's hash (or none, while the row
// exists) is stale and dropped, and counted. The responses are written to the response
// topic by hand, as a right-side task of another instance (or a Java one) would.
func TestFKJoinDropsStaleResponses(t *testing.T) {
	d, err := kstreamtest.New(fkJoinTopology("orders", "customers", "out"), kstream.Config{ApplicationID: "fk"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	orders := kstreamtest.CreateInputTopic(d, "orders", serde.String(), serde.String())
	customers := kstreamtest.CreateInputTopic(d, "customers", serde.String(), serde.String())
	responses := kstreamtest.CreateInputTopic(d, "fk-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000012-topic", serde.Bytes(), serde.Bytes())
	out := kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.String())
	// An order whose value is "a": its customer is "a", its item "".
	if err := customers.Pipe("a", "Ann"); err != nil {
		t.Fatal(err)
	}
	if err := orders.Pipe("o1", "a"); err != nil {
		t.Fatal(err)
	}
	// Murmur3.hash128 of "a" and of "order-1", as Kafka Streams computes them (see
	// TestMurmur3Hash128MatchesJava).
	hashA := mustHex(t, "3361634e7e0f5188e9c7dda24eae326b")
	hashOther := mustHex(t, "8302596bee13c72686fa7a1659f479d5")
	resp := func(hash []byte, value string) []byte {
		if hash == nil {
			return append([]byte{0x80}, value...)
		}
		return append(append([]byte{0x00}, hash...), value...)
	}
	for _, r := range [][]byte{
		resp(hashA, "Zed"),     // current: joined
		resp(hashOther, "Bob"), // another value's hash: stale
		resp(nil, "Cid"),       // a delete's (null) hash while the row exists: stale
		resp(hashA, ""),        // current, with a null right value: the inner join's delete
	} {
		if err := responses.PipeRaw([]byte("o1"), r, d.WallClockTime()); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := out.ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		v := r.Value
		if r.IsTombstone() {
			v = "<null>"
		}
		got = append(got, r.Key+"="+v)
	}
	if want := []string{"o1=@Ann", "o1=@Zed", "o1=<null>"}; !slices.Equal(got, want) {
		t.Fatalf("outputs %q, want %q", got, want)
	}
	if n := d.DroppedRecords(); n != 2 {
		t.Fatalf("dropped records %d, want the 2 stale responses", n)
	}
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
