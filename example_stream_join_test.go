package kstream_test

import (
	"fmt"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
)

// Orders joined with their payments within 10 minutes: a paid order is emitted when its
// payment arrives, an unpaid one only once its window has closed (here when a later order
// moves stream time past it), never both.
func ExampleLeftJoinWindowed() {
	b := kstream.NewBuilder()
	orders := kstream.Stream(b, "orders", serde.String(), serde.String())
	payments := kstream.Stream(b, "payments", serde.String(), serde.String())
	w := kstream.JoinWindowsOf(10 * time.Minute).WithGrace(time.Minute)
	kstream.LeftJoinWindowed(orders, payments, func(id, order, payment string, paid bool) string {
		if !paid {
			return order + ": unpaid"
		}
		return order + ": paid by " + payment
	}, w, kstream.Named("order-payments")).To("order-status", serde.String(), serde.String())

	d, err := kstreamtest.New(b, kstream.Config{ApplicationID: "shop"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	in := kstreamtest.CreateInputTopic(d, "orders", serde.String(), serde.String())
	pay := kstreamtest.CreateInputTopic(d, "payments", serde.String(), serde.String())
	out := kstreamtest.CreateOutputTopic(d, "order-status", serde.String(), serde.String())
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	in.PipeAt("o1", "book", t0)
	in.PipeAt("o2", "pen", t0.Add(time.Minute))
	pay.PipeAt("o1", "card", t0.Add(5*time.Minute))
	in.PipeAt("o3", "lamp", t0.Add(30*time.Minute)) // o2's window closed at 12:12
	vals, _ := out.ReadKeyValues()
	for _, kv := range vals {
		fmt.Println(kv.Key, kv.Value)
	}
	// Output:
	// o1 book: paid by card
	// o2 pen: unpaid
}
