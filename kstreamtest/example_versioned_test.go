package kstreamtest_test

import (
	"fmt"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
)

// A stream-table join against a versioned table reads the price valid when each order was
// placed, and a grace period lets a late price update reach the orders it concerns.
func ExampleVersionedStore() {
	b := kstream.NewBuilder()
	prices := kstream.Table(b, "prices", serde.String(), serde.String(), "prices-store", kstream.Versioned(time.Hour))
	orders := kstream.Stream(b, "orders", serde.String(), serde.String())
	kstream.Join(orders, prices, func(_, order, price string) string { return order + " at " + price },
		kstream.JoinGrace(time.Minute)).To("priced", serde.String(), serde.String())

	d, err := kstreamtest.New(b, kstream.Config{ApplicationID: "pricing"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	t0 := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	p := kstreamtest.CreateInputTopic(d, "prices", serde.String(), serde.String())
	o := kstreamtest.CreateInputTopic(d, "orders", serde.String(), serde.String())
	_ = p.PipeAt("apple", "1.00", t0)
	_ = o.PipeAt("apple", "order-1", t0.Add(10*time.Second))
	_ = p.PipeAt("apple", "1.20", t0.Add(5*time.Second)) // late: before order-1
	_ = o.PipeAt("apple", "order-2", t0.Add(2*time.Minute))
	_ = o.PipeAt("apple", "order-3", t0.Add(4*time.Minute)) // stream time passes order-2's grace

	values, _ := kstreamtest.CreateOutputTopic(d, "priced", serde.String(), serde.String()).ReadValues()
	fmt.Println(values)
	st, _ := kstreamtest.VersionedStore(d, "prices-store", 0, serde.String(), serde.String())
	r, _, _ := st.GetAsOf("apple", t0.Add(3*time.Second).UnixMilli())
	fmt.Println(r.Value, time.UnixMilli(r.ValidTo).UTC().Format(time.TimeOnly))
	// Output:
	// [order-1 at 1.20 order-2 at 1.20]
	// 1.00 09:00:05
}
