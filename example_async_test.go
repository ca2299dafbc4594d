package kstream_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
)

// Calling a slow service from a topology: up to 16 calls per task at once, one per key at
// a time, so that each key's outputs keep their input order.
func ExampleMapValuesAsync() {
	b := kstream.NewBuilder()
	orders := kstream.Stream(b, "orders", serde.String(), serde.String()) // keyed by customer
	kstream.MapValuesAsync(orders, func(ctx context.Context, customer, order string) (string, error) {
		select { // a lookup that takes a while
		case <-time.After(time.Millisecond):
		case <-ctx.Done():
			return "", ctx.Err()
		}
		return order + " for " + strings.ToUpper(customer), nil
	}, kstream.WithConcurrency(16), kstream.WithCallTimeout(time.Second), kstream.Named("lookup")).
		To("enriched", nil, nil)

	d, err := kstreamtest.New(b, kstream.Config{ApplicationID: "enrich"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	in := kstreamtest.CreateInputTopic(d, "orders", serde.String(), serde.String())
	for i := range 3 {
		for _, c := range []string{"ann", "bob"} {
			_ = in.Pipe(c, fmt.Sprintf("order %d", i))
		}
	}
	_ = d.Commit() // waits for the calls in flight, as an application's commit does
	kvs, _ := kstreamtest.CreateOutputTopic(d, "enriched", serde.String(), serde.String()).ReadKeyValues()
	byKey := map[string][]string{}
	for _, kv := range kvs {
		byKey[kv.Key] = append(byKey[kv.Key], kv.Value)
	}
	fmt.Println(byKey["ann"])
	fmt.Println(byKey["bob"])
	// Output:
	// [order 0 for ANN order 1 for ANN order 2 for ANN]
	// [order 0 for BOB order 1 for BOB order 2 for BOB]
}
