package kstreamtest_test

import (
	"fmt"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/serde/avro"
	"github.com/kstream-go/kstream/serde/registry"
)

type exampleOrder struct {
	Customer string `avro:"customer"`
	Amount   int64  `avro:"amount"`
}

// Testing a topology that reads and writes Avro in the Confluent wire format, with an
// in-memory Schema Registry.
func ExampleNewRegistry() {
	reg, err := kstreamtest.NewRegistry()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reg.Close()
	orders, err := avro.New[exampleOrder](reg.Client(),
		`{"type":"record","name":"Order","fields":[{"name":"customer","type":"string"},{"name":"amount","type":"long"}]}`,
		registry.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}

	b := kstream.NewBuilder()
	byCustomer := kstream.SelectKey(kstream.Stream(b, "orders", serde.String(), orders),
		func(_ string, o exampleOrder) string { return o.Customer })
	kstream.Reduce(byCustomer.GroupByKey(), func(a, o exampleOrder) exampleOrder { a.Amount += o.Amount; return a }, "totals").
		ToStream().To("totals", nil, nil)

	d, err := kstreamtest.New(b, kstream.Config{ApplicationID: "shop"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	in := kstreamtest.CreateInputTopic(d, "orders", serde.String(), orders)
	out := kstreamtest.CreateOutputTopic(d, "totals", serde.String(), orders)
	for i, o := range []exampleOrder{{"ada", 5}, {"bob", 7}, {"ada", 3}} {
		if err := in.Pipe(fmt.Sprint(i), o); err != nil {
			fmt.Println(err)
			return
		}
	}
	totals, err := out.ReadKeyValues()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, kv := range totals {
		fmt.Println(kv.Key, kv.Value.Amount)
	}
	subjects, err := reg.Subjects()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(subjects)
	// Output:
	// ada 5
	// bob 7
	// ada 8
	// [orders-value shop-totals-changelog-value shop-totals-repartition-value totals-value]
}
