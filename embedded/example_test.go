package embedded_test

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kstream-go/kstream/embedded"
)

func Example() {
	broker, err := embedded.Start(embedded.Topics(1, "greetings"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer broker.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	cl, err := kgo.NewClient(
		kgo.SeedBrokers(broker.Brokers()...),
		kgo.ConsumeTopics("greetings"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cl.Close()

	rec := &kgo.Record{Topic: "greetings", Key: []byte("k"), Value: []byte("hello, kstream")}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		fmt.Println("produce:", err)
		return
	}

	for {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			fmt.Println("consume:", err)
			return
		}
		if recs := fetches.Records(); len(recs) > 0 {
			fmt.Printf("%s = %s (partition %d, offset %d)\n", recs[0].Key, recs[0].Value, recs[0].Partition, recs[0].Offset)
			return
		}
	}
	// Output:
	// k = hello, kstream (partition 0, offset 0)
}
