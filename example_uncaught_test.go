package kstream_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/store"
	"github.com/kstream-go/kstream/store/examples/filedb"
)

// The uncaught-error policy: restart the processing on errors that may pass, shut the
// whole application down on the others.
func ExampleUncaughtErrorPolicy() {
	cfg := kstream.Config{
		ApplicationID: "orders",
		Brokers:       []string{"127.0.0.1:9092"},
		UncaughtErrorHandler: func(err error) kstream.UncaughtErrorPolicy {
			var re *kstream.RecordError
			if errors.As(err, &re) {
				return kstream.ShutdownApplication // a bad record: every instance would fail on it
			}
			return kstream.RestartProcessing
		},
		RestartBackoff: 5 * time.Second,
		MaxRestarts:    3,
	}
	run := func(app *kstream.App) {
		err := app.Run(context.Background())
		var se *kstream.ApplicationShutdownError
		if errors.As(err, &se) {
			fmt.Println("shut down at the request of", se.Instance, "which failed with", se.Cause)
		}
	}
	_, _ = cfg, run
	fmt.Println(kstream.ShutdownApplication, kstream.RestartProcessing)
	// Output: ShutdownApplication RestartProcessing
}

// A store's changelog topic with configs of its own, and the persistent stores in another
// engine than Pebble.
func ExampleWithChangelogConfig() {
	b := kstream.NewBuilder()
	orders := kstream.Stream(b, "orders", serde.String(), serde.String())
	kstream.Count(orders.GroupByKey(), "orders-per-customer",
		kstream.WithChangelogConfig(map[string]string{"min.insync.replicas": "2", "segment.bytes": "67108864"}))
	cfg := kstream.Config{
		ApplicationID: "orders",
		Brokers:       []string{"127.0.0.1:9092"},
		StoreEngine:   func(dir string) (store.DB, error) { return filedb.Open(dir) },
	}
	if _, err := kstream.New(b, cfg); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("built")
	// Output: built
}
