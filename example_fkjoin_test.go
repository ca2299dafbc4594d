package kstream_test

import (
	"fmt"
	"strings"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
)

// A foreign-key join, run on the test driver: orders (keyed by order id, valued
// "<customer id>|<item>") joined with customers by the customer id in each order. A change
// of the customer's name, or of the order's customer, updates the joined row.
func ExampleTableJoinOn() {
	b := kstream.NewBuilder()
	orders := kstream.Table(b, "orders", serde.String(), serde.String(), "orders")
	customers := kstream.Table(b, "customers", serde.String(), serde.String(), "customers")
	customerOf := func(_, order string) string { c, _, _ := strings.Cut(order, "|"); return c }
	kstream.TableJoinOn(orders, customers, customerOf, func(order, name string) string {
		_, item, _ := strings.Cut(order, "|")
		return item + " for " + name
	}).ToStream().To("orders-with-names", serde.String(), serde.String())

	d, err := kstreamtest.New(b, kstream.Config{ApplicationID: "shop"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	o := kstreamtest.CreateInputTopic(d, "orders", serde.String(), serde.String())
	c := kstreamtest.CreateInputTopic(d, "customers", serde.String(), serde.String())
	_ = c.Pipe("c1", "Ada")
	_ = c.Pipe("c2", "Grace")
	_ = o.Pipe("o1", "c1|book") // joined with Ada
	_ = c.Pipe("c1", "Ada L.")  // Ada renamed: o1 updated
	_ = o.Pipe("o1", "c2|book") // o1 moves to Grace
	_ = o.Pipe("o2", "c3|lamp") // no customer c3: no row
	out := kstreamtest.CreateOutputTopic(d, "orders-with-names", serde.String(), serde.String())
	recs, _ := out.ReadRecords()
	for _, r := range recs {
		fmt.Println(r.Key, r.Value)
	}
	// Output:
	// o1 book for Ada
	// o1 book for Ada L.
	// o1 book for Grace
}
