package kstream_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/embedded"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Reading a running application's store: word counts kept in the store "counts", read
// with QueryStore while the application runs.
func ExampleQueryStore() {
	broker, err := embedded.Start(embedded.Topics(2, "lines"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer broker.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	b := kstream.NewBuilder()
	lines := kstream.Stream(b, "lines", serde.String(), serde.String())
	words := kstream.FlatMapValues(lines, strings.Fields)
	kstream.Count(kstream.GroupBy(words, func(_, w string) string { return w }, serde.String()), "counts")

	dir, err := os.MkdirTemp("", "example-queries")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	app, err := kstream.New(b, kstream.Config{
		ApplicationID: "example-queries", Brokers: broker.Brokers(),
		StateDir:       dir,
		CommitInterval: 100 * time.Millisecond, // a query sees a store as of its last commit
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()

	cl, _ := kgo.NewClient(kgo.SeedBrokers(broker.Brokers()...))
	defer cl.Close()
	cl.ProduceSync(ctx, &kgo.Record{Topic: "lines", Value: []byte("to be or not to be")})

	counts, err := kstream.QueryStore[string, int64](app, "counts")
	if err != nil {
		fmt.Println(err)
		return
	}
	// The words are counted by two tasks (the repartition topic has two partitions), each
	// committing on its own: wait until both have committed the line's words.
	for ctx.Err() == nil {
		total := int64(0)
		err := counts.All(func(_ string, n int64) bool { total += n; return true })
		var unavailable *kstream.StoreUnavailableError
		if errors.As(err, &unavailable) && unavailable.Retryable() || err == nil && total < 6 {
			time.Sleep(50 * time.Millisecond) // starting, restoring, or not processed yet
			continue
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		break
	}
	counts.All(func(w string, n int64) bool {
		fmt.Println(w, n)
		return true
	})
	md, _ := app.KeyMetadata("counts", "be")
	fmt.Println("partitions:", md.Partition >= 0 && md.Partition < 2)
	cancel()
	<-done
	// Output:
	// be 2
	// not 1
	// or 1
	// to 2
	// partitions: true
}
