package kstream_test

import (
	"fmt"
	"strings"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
)

// A sink with a stream partitioner: alerts go to every partition of the topic, debug
// records nowhere, and the rest where the default partitioner puts them.
func ExampleWithPartitioner() {
	route := func(topic, key, value string, n int32) kstream.Partitions {
		switch {
		case strings.HasPrefix(value, "alert"):
			all := make([]int32, n)
			for p := range n {
				all[p] = p
			}
			return kstream.ToPartitions(all...) // multicast
		case strings.HasPrefix(value, "debug"):
			return kstream.ToPartitions() // dropped
		}
		return kstream.DefaultPartition()
	}
	b := kstream.NewBuilder()
	kstream.Stream(b, "events", serde.String(), serde.String()).
		To("routed", nil, nil, kstream.WithPartitioner(route))

	d, err := kstreamtest.New(b, kstream.Config{}, kstreamtest.TopicPartitions("routed", 3))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	in := kstreamtest.CreateInputTopic(d, "events", serde.String(), serde.String())
	_ = in.Pipe("disk", "alert: full")
	_ = in.Pipe("cpu", "debug: 3%")
	recs, _ := kstreamtest.CreateOutputTopic(d, "routed", serde.String(), serde.String()).ReadRecords()
	for _, r := range recs {
		fmt.Printf("%s=%q to partition %d\n", r.Key, r.Value, r.Partition)
	}
	fmt.Println("dropped:", d.DroppedRecords())
	// Output:
	// disk="alert: full" to partition 0
	// disk="alert: full" to partition 1
	// disk="alert: full" to partition 2
	// dropped: 1
}
