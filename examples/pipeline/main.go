// Command pipeline runs a stateless kstream topology end to end: it generates orders,
// filters out invalid ones, splits the rest into large and small orders, maps each branch,
// writes two output topics, reads them back and prints what arrived.
//
//	go run ./examples/pipeline
//
// With no set-up it starts an in-process broker; set KSTREAM_BROKERS=host:port to use a real
// cluster instead.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"sort"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/embedded"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Order is the input event.
type Order struct {
	ID       string  `json:"id"`
	Customer string  `json:"customer"`
	Amount   float64 `json:"amount"`
}

const (
	ordersTopic = "orders"
	largeTopic  = "large-orders"
	smallTopic  = "small-orders"
	numOrders   = 1000
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "pipeline:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()

	brokers, stopBroker, err := embedded.FromEnv()
	if err != nil {
		return err
	}
	defer stopBroker()
	fmt.Println("brokers:", brokers)

	if err := createTopics(ctx, brokers, ordersTopic, largeTopic, smallTopic); err != nil {
		return err
	}
	sent, err := generate(ctx, brokers)
	if err != nil {
		return err
	}
	fmt.Printf("produced %d orders (%d valid: %d large, %d small)\n", numOrders, sent.large+sent.small, sent.large, sent.small)

	// The topology.
	b := kstream.NewBuilder()
	orders := kstream.Stream(b, ordersTopic, serde.String(), serde.JSON[Order]())
	valid := orders.Filter(func(_ string, o Order) bool { return o.Amount > 0 }, kstream.Named("valid-orders"))
	branches := valid.Split(kstream.Named("size-")).
		Branch("large", func(_ string, o Order) bool { return o.Amount >= 500 }).
		DefaultBranch("small")
	// Large orders are re-keyed by customer and become alerts.
	alerts := kstream.Map(branches["size-large"], func(_ string, o Order) (string, string) {
		return o.Customer, fmt.Sprintf("large order %s: %.2f", o.ID, o.Amount)
	})
	alerts.To(largeTopic, serde.String(), serde.String())
	kstream.MapValues(branches["size-small"], func(o Order) float64 { return o.Amount }).
		To(smallTopic, nil, serde.Float64())

	app, err := kstream.New(b, kstream.Config{
		ApplicationID:  "pipeline-example",
		Brokers:        brokers,
		CommitInterval: time.Second,
		Logger:         slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	fmt.Print(app.Topology().Describe())

	appCtx, stopApp := context.WithCancel(ctx)
	defer stopApp()
	runErr := make(chan error, 1)
	go func() { runErr <- app.Run(appCtx) }()

	large, small, err := readBack(ctx, brokers, sent.large, sent.small, runErr)
	if err != nil {
		return err
	}
	stopApp()
	if err := <-runErr; err != nil {
		return fmt.Errorf("app: %w", err)
	}

	fmt.Printf("\n%s: %d records, for example:\n", largeTopic, len(large))
	for _, l := range first(large, 5) {
		fmt.Println("  ", l)
	}
	fmt.Printf("%s: %d records, for example:\n", smallTopic, len(small))
	for _, s := range first(small, 5) {
		fmt.Println("  ", s)
	}
	if len(large) != sent.large || len(small) != sent.small {
		return fmt.Errorf("got %d large and %d small, want %d and %d", len(large), len(small), sent.large, sent.small)
	}
	fmt.Println("\nok: every valid order arrived in the right topic")
	return nil
}

func createTopics(ctx context.Context, brokers []string, topics ...string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopics(ctx, 3, -1, nil, topics...)
	if err != nil {
		return fmt.Errorf("creating topics: %w", err)
	}
	for _, r := range resp.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("creating topic %s: %w", r.Topic, r.Err)
		}
	}
	return nil
}

type counts struct{ large, small int }

// generate writes numOrders orders, about 5% of them invalid (amount <= 0).
func generate(ctx context.Context, brokers []string) (counts, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return counts{}, err
	}
	defer cl.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	var c counts
	recs := make([]*kgo.Record, 0, numOrders)
	jsonSerde := serde.JSON[Order]()
	for i := range numOrders {
		o := Order{ID: fmt.Sprintf("o-%04d", i), Customer: fmt.Sprintf("c-%02d", rng.IntN(20)), Amount: float64(rng.IntN(1000)) + 0.5}
		if rng.IntN(20) == 0 {
			o.Amount = -o.Amount
		}
		switch {
		case o.Amount >= 500:
			c.large++
		case o.Amount > 0:
			c.small++
		}
		v, err := jsonSerde.Serialize(o)
		if err != nil {
			return c, err
		}
		recs = append(recs, &kgo.Record{Topic: ordersTopic, Key: []byte(o.ID), Value: v})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return c, fmt.Errorf("producing orders: %w", err)
	}
	return c, nil
}

// readBack consumes both output topics until the expected counts arrive.
func readBack(ctx context.Context, brokers []string, wantLarge, wantSmall int, runErr <-chan error) (large, small []string, err error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(largeTopic, smallTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()
	f64 := serde.Float64()
	for len(large) < wantLarge || len(small) < wantSmall {
		select {
		case err := <-runErr:
			return nil, nil, fmt.Errorf("app stopped early: %v", err)
		default:
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fetches := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("timed out: %d/%d large, %d/%d small", len(large), wantLarge, len(small), wantSmall)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			switch r.Topic {
			case largeTopic:
				large = append(large, fmt.Sprintf("%s -> %s", r.Key, r.Value))
			case smallTopic:
				v, _ := f64.Deserialize(r.Value)
				small = append(small, fmt.Sprintf("%s -> %.2f", r.Key, v))
			}
		})
	}
	sort.Strings(large)
	sort.Strings(small)
	return large, small, nil
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }
