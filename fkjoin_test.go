package kstream_test

import (
	"encoding/hex"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/hook"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
)

// fkJoinOnDriver runs fkJoinTopology over the input of fkJoinInput on the test driver,
// with orders on 4 partitions and customers on 3, and returns the joined table (the last
// value per key of out) and the expected one.
func fkJoinOnDriver(t *testing.T, nOrders, nCustomers int, seed uint64) (got, want map[string]string, d *kstreamtest.Driver) {
	t.Helper()
	batches, want := fkJoinInput("orders", "customers", nOrders, nCustomers, seed)
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
		resp(hashOther, ""),    // another value's hash, a null right value: stale
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
	// A stale response of the inner join with a null right value makes the resolver
	// subscribe again for the current value (see TestFKJoinStaleResponsesOvertakenOnDriver):
	// it is followed by the real answer for "a", "@Ann". A stale response with a value is
	// only dropped.
	if want := []string{"o1=@Ann", "o1=@Zed", "o1=@Ann", "o1=<null>"}; !slices.Equal(got, want) {
		t.Fatalf("outputs %q, want %q", got, want)
	}
	if n := d.DroppedRecords(); n != 3 {
		t.Fatalf("dropped records %d, want the 3 stale responses", n)
	}
}

// emptyIsNull is the string serde, except that "" serializes to nil: as the right table's
// key serde, it makes an empty foreign key null.
type emptyIsNull struct{}

func (emptyIsNull) Serialize(v string) ([]byte, error) {
	if v == "" {
		return nil, nil
	}
	return []byte(v), nil
}

func (emptyIsNull) Deserialize(b []byte) (string, error) { return string(b), nil }

// The races of Kafka Streams' subscription/response protocol, reproduced on the driver by
// holding back the response topic (as a broker under load may deliver the responses from
// the right side's tasks late): the left row changes again before the response to its
// previous change (or to a right update) arrives, that response is stale, and the new
// value's subscription gets no response. Java's resolver drops the stale response and
// keeps the row's previous result for good; kstream's brings the row up to date.
func TestFKJoinStaleResponsesOvertakenOnDriver(t *testing.T) {
	fkJoinRaces(t, false, map[string]string{"o6": "b@alice"})
}

// The same races in the left join, which Java's protocol already answers for every
// update: each row follows its order (a missing or null customer joins as "-").
func TestFKLeftJoinStaleResponsesOvertakenOnDriver(t *testing.T) {
	fkJoinRaces(t, true, map[string]string{"o1": "b@-", "o2": "a@-", "o3": "b@-", "o5": "a@-", "o6": "b@alice"})
}

// fkJoinRaces runs the races of TestFKJoinStaleResponsesOvertakenOnDriver on the inner
// or the left join and checks the final table.
func fkJoinRaces(t *testing.T, leftJoin bool, want map[string]string) {
	b := kstream.NewBuilder()
	o := kstream.Table(b, "orders", serde.String(), serde.String(), "orders-store")
	c := kstream.Table[string, string](b, "customers", emptyIsNull{}, serde.String(), "customers-store")
	fk := func(_, v string) string {
		cust, _, _ := strings.Cut(v, "|")
		return cust // "" is a null foreign key
	}
	join := func(v, name string, found bool) string {
		_, item, _ := strings.Cut(v, "|")
		if !found {
			name = "-"
		}
		return item + "@" + name
	}
	if leftJoin {
		kstream.TableLeftJoinOn(o, c, fk, join).ToStream().To("out", serde.String(), serde.String())
	} else {
		kstream.TableJoinOn(o, c, fk, func(v, name string) string { return join(v, name, true) }).ToStream().To("out", serde.String(), serde.String())
	}
	d, err := kstreamtest.New(b, kstream.Config{ApplicationID: "fk"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	orders := kstreamtest.CreateInputTopic(d, "orders", serde.String(), serde.String())
	customers := kstreamtest.CreateInputTopic(d, "customers", serde.String(), serde.String())
	out := kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.String())
	table := map[string]string{}
	read := func() {
		t.Helper()
		recs, err := out.ReadRecords()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.IsTombstone() {
				delete(table, r.Key)
			} else {
				table[r.Key] = r.Value
			}
		}
	}
	pipe := func(in *kstreamtest.InputTopic[string, string], k string, v *string) {
		t.Helper()
		var err error
		if v == nil {
			err = in.PipeRecord(kstream.Record[string, string]{Key: k, Timestamp: d.WallClockTime()}.AsTombstone())
		} else {
			err = in.Pipe(k, *v)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	str := func(s string) *string { return &s }
	pipe(customers, "c1", str("alice"))
	pipe(customers, "c2", str("bob"))
	for _, o := range []string{"o1", "o3", "o4", "o5", "o6"} {
		pipe(orders, o, str("c1|"+o))
	}
	pipe(orders, "o2", str("c2|o2"))
	read()
	if want := map[string]string{"o1": "o1@alice", "o2": "o2@bob", "o3": "o3@alice", "o4": "o4@alice", "o5": "o5@alice", "o6": "o6@alice"}; !maps.Equal(table, want) {
		t.Fatalf("joined %v before the races, want %v", table, want)
	}

	const responses = "fk-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000012-topic"
	hook.HoldBack(d, responses)
	// o1 moves to a customer that does not exist (its response would delete the row),
	// then changes with the same key (PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE: no response).
	pipe(orders, "o1", str("c9|a"))
	pipe(orders, "o1", str("c9|b"))
	// o2's customer is deleted (the response would delete the row), then o2 changes with
	// the same key, which has no row any more: no response.
	pipe(customers, "c2", nil)
	pipe(orders, "o2", str("c2|a"))
	// o3 loses its customer (DELETE_KEY_AND_PROPAGATE), then gets another null one: no
	// subscription at all.
	pipe(orders, "o3", str("|a"))
	pipe(orders, "o3", str("|b"))
	// o4 loses its customer, then is deleted: no subscription.
	pipe(orders, "o4", str("|a"))
	pipe(orders, "o4", nil)
	// o5 is deleted (DELETE_KEY_AND_PROPAGATE), then created again for a customer that
	// does not exist (PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE: no response).
	pipe(orders, "o5", nil)
	pipe(orders, "o5", str("c9|a"))
	// o6 moves away and back: the last subscription is answered.
	pipe(orders, "o6", str("c9|a"))
	pipe(orders, "o6", str("c1|b"))
	if err := hook.Release(d, responses); err != nil {
		t.Fatal(err)
	}
	read()
	if !maps.Equal(table, want) {
		t.Fatalf("joined %v after the races, want %v", table, want)
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
