package kstream_test

import (
	"fmt"
	"regexp"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
)

// A source that reads every topic named "orders-<region>".
func ExampleStreamPattern() {
	b := kstream.NewBuilder()
	orders := kstream.StreamPattern(b, regexp.MustCompile(`orders-[a-z]+`), serde.String(), serde.String())
	orders.To("all-orders", nil, nil)
	topo, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(topo.Describe())

	d, err := kstreamtest.New(b, kstream.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	_ = kstreamtest.CreateInputTopic(d, "orders-eu", serde.String(), serde.String()).Pipe("o1", "eu")
	_ = kstreamtest.CreateInputTopic(d, "orders-us", serde.String(), serde.String()).Pipe("o2", "us")
	_ = kstreamtest.CreateInputTopic(d, "orders-eu-archive", serde.String(), serde.String()).Pipe("o3", "old") // no whole match
	kvs, _ := kstreamtest.CreateOutputTopic(d, "all-orders", serde.String(), serde.String()).ReadKeyValues()
	fmt.Println(kvs)
	// Output:
	// Topologies:
	//    Sub-topology: 0
	//     Source: KSTREAM-SOURCE-0000000000 (topics: orders-[a-z]+)
	//       --> KSTREAM-SINK-0000000001
	//     Sink: KSTREAM-SINK-0000000001 (topic: all-orders)
	//       <-- KSTREAM-SOURCE-0000000000
	//
	// [{o1 eu} {o2 us}]
}
