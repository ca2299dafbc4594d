package kstream_test

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

// A foreign-key join of versioned tables uses versioned semantics, as Kafka Streams does
// (KIP-914): an out-of-order update of either table (older than its key's latest version)
// changes neither the table's latest row nor the join, and is dropped; so is a late delete.
func TestFKJoinVersionedTablesIgnoreOutOfOrderUpdates(t *testing.T) {
	b := kstream.NewBuilder()
	orders := kstream.Table(b, "orders", serde.String(), serde.String(), "orders-store", kstream.Versioned(time.Hour))
	customers := kstream.Table(b, "customers", serde.String(), serde.String(), "customers-store", kstream.Versioned(time.Hour))
	fk := func(_, v string) string { c, _, _ := strings.Cut(v, "|"); return c }
	kstream.TableJoinOn(orders, customers, fk, func(v, name string) string {
		_, item, _ := strings.Cut(v, "|")
		return item + "@" + name
	}).ToStream().To("out", serde.String(), serde.String())
	d, err := kstreamtest.New(b, kstream.Config{ApplicationID: "fkv"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	o := kstreamtest.CreateInputTopic(d, "orders", serde.String(), serde.String())
	c := kstreamtest.CreateInputTopic(d, "customers", serde.String(), serde.String())
	out := kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.String())
	at := func(ms int64) time.Time { return time.UnixMilli(1_700_000_000_000 + ms) }
	pipe := func(in *kstreamtest.InputTopic[string, string], k, v string, ms int64) {
		t.Helper()
		if err := in.PipeAt(k, v, at(ms)); err != nil {
			t.Fatal(err)
		}
	}
	pipe(c, "c1", "alice", 100)
	pipe(c, "c2", "bob", 100)
	pipe(o, "o1", "c1|x", 200)
	pipe(c, "c1", "old-alice", 50) // older than c1's latest: must not answer o1
	pipe(o, "o1", "c2|y", 150)     // older than o1's latest: must not move o1 to c2
	pipe(c, "c1", "alicia", 500)   // o1 still subscribes to c1
	pipe(o, "o2", "c2|z", 300)
	pipe(c, "c2", "robert", 400) // answers o2 only
	dropped := d.DroppedRecords()
	recs, err := out.ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, r.Key+"="+r.Value)
	}
	if want := []string{"o1=x@alice", "o1=x@alicia", "o2=z@bob", "o2=z@robert"}; !slices.Equal(got, want) {
		t.Fatalf("outputs %q, want %q", got, want)
	}
	if dropped != 2 {
		t.Fatalf("dropped records %d, want the 2 out-of-order updates", dropped)
	}
	// By operator and reason: the left update at the subscription sender, the right one at
	// the processor of the foreign table's updates.
	var losses []string
	for _, l := range d.Losses() {
		losses = append(losses, fmt.Sprintf("%s/%s/%v/%d", l.Operator, l.Reason, l.LostResults, l.Count))
	}
	if want := []string{
		"KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000011/out_of_order_update/false/1",
		"KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000005/out_of_order_update/false/1",
	}; !slices.Equal(losses, want) {
		t.Errorf("losses %q, want %q", losses, want)
	}
}
