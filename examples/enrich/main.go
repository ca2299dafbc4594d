// Command enrich enriches orders by calling an HTTP service from a topology, with
// kstream.MapValuesAsync: a local customer service answers each lookup in 50 ms, and 128
// calls per task run at once, while the orders of one customer keep their order.
//
//	go run ./examples/enrich
//
// It generates orders, runs the topology until every enriched order is out, checks each
// customer's orders left in input order, and prints the throughput against what one call
// at a time would allow (20 orders/s per task). With no set-up it starts an in-process
// broker; set KSTREAM_BROKERS=host:port to use a real cluster instead.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/embedded"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Order is the input event, keyed by customer.
type Order struct {
	ID       string  `json:"id"`
	Customer string  `json:"customer"`
	Seq      int     `json:"seq"` // the order's rank among its customer's
	Amount   float64 `json:"amount"`
}

// Customer is what the customer service answers.
type Customer struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Tier    string `json:"tier"`
	Country string `json:"country"`
}

// Enriched is the output: the order with its customer.
type Enriched struct {
	Order    Order    `json:"order"`
	Customer Customer `json:"customer"`
}

const (
	ordersTopic   = "enrich-orders"
	enrichedTopic = "enriched-orders"
	partitions    = 3
	customers     = 200
	serviceDelay  = 50 * time.Millisecond
	concurrency   = 128
)

func main() {
	n := 5000
	if len(os.Args) > 1 {
		if v, err := strconv.Atoi(os.Args[1]); err == nil && v > 0 {
			n = v
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := run(ctx, n, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "enrich:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, n int, out io.Writer) error {
	brokers, stopBroker, err := embedded.FromEnv()
	if err != nil {
		return err
	}
	defer stopBroker()
	fmt.Fprintln(out, "brokers:", brokers)

	// The customer service: every lookup takes serviceDelay.
	url, stopService, err := startService()
	if err != nil {
		return err
	}
	defer stopService()
	fmt.Fprintf(out, "customer service: %s (answers in %s)\n", url, serviceDelay)

	suffix := strconv.FormatInt(time.Now().UnixNano(), 36) // fresh topics on a reused cluster
	in, outTopic := ordersTopic+"-"+suffix, enrichedTopic+"-"+suffix
	if err := createTopics(ctx, brokers, in, outTopic); err != nil {
		return err
	}
	if err := generate(ctx, brokers, in, n); err != nil {
		return err
	}
	fmt.Fprintf(out, "produced %d orders of %d customers over %d partitions\n", n, customers, partitions)

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: partitions * concurrency}}
	b := kstream.NewBuilder()
	orders := kstream.Stream(b, in, serde.String(), serde.JSON[Order]())
	enriched := kstream.MapValuesAsync(orders, func(ctx context.Context, customer string, o Order) (Enriched, error) {
		c, err := lookup(ctx, client, url, customer)
		if err != nil {
			return Enriched{}, err
		}
		return Enriched{Order: o, Customer: c}, nil
	}, kstream.Named("lookup-customer"), kstream.WithConcurrency(concurrency), kstream.WithCallTimeout(2*time.Second),
		kstream.WithAsyncRetry(kstream.AsyncRetry{MaxAttempts: 5, InitialBackoff: 50 * time.Millisecond}))
	enriched.To(outTopic, serde.String(), serde.JSON[Enriched]())

	app, err := kstream.New(b, kstream.Config{
		ApplicationID: "enrich-example-" + suffix,
		Brokers:       brokers,
		StateDir:      os.TempDir() + "/kstream-enrich-" + suffix,
		Logger:        slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	defer app.CleanUp()
	fmt.Fprint(out, app.Topology().Describe())

	appCtx, stopApp := context.WithCancel(ctx)
	defer stopApp()
	runErr := make(chan error, 1)
	began := time.Now()
	go func() { runErr <- app.Run(appCtx) }()
	got, err := readBack(ctx, brokers, outTopic, n, runErr)
	if err != nil {
		return err
	}
	took := time.Since(began)
	st := app.Stats().Async
	stopApp()
	if err := <-runErr; err != nil {
		return fmt.Errorf("app: %w", err)
	}

	// Each customer's orders left in input order.
	next := map[string]int{}
	for _, e := range got {
		if e.Order.Seq != next[e.Order.Customer] {
			return fmt.Errorf("customer %s: order %d came out after %d of its orders", e.Order.Customer, e.Order.Seq, next[e.Order.Customer])
		}
		if e.Customer.ID != e.Order.Customer {
			return fmt.Errorf("order %s enriched with customer %s", e.Order.ID, e.Customer.ID)
		}
		next[e.Order.Customer]++
	}
	rate := float64(n) / took.Seconds()
	serial := float64(partitions) / serviceDelay.Seconds()
	fmt.Fprintf(out, "\n%d orders enriched in %s: %.0f orders/s (one call at a time per task: at most %.0f/s, %.0fx less)\n",
		len(got), took.Round(time.Millisecond), rate, serial, rate/serial)
	for _, s := range st {
		fmt.Fprintf(out, "operator %s: %d calls, %d retries, call latency avg %s p99 %s, queue wait avg %s\n",
			s.Operator, s.Calls, s.Retries, s.CallLatencyAvg.Round(time.Millisecond), s.CallLatencyP99.Round(time.Millisecond), s.QueueWaitAvg.Round(time.Millisecond))
	}
	fmt.Fprintf(out, "for example: %+v\n", got[0])
	fmt.Fprintln(out, "\nok: every order enriched once, each customer's in order")
	return nil
}

// startService serves GET /customers/<id> on a free port of 127.0.0.1, answering after
// serviceDelay.
func startService() (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /customers/{id}", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(serviceDelay):
		case <-r.Context().Done():
			return
		}
		id := r.PathValue("id")
		n, _ := strconv.Atoi(id[1:])
		tiers := []string{"bronze", "silver", "gold"}
		countries := []string{"FR", "DE", "JP", "BR", "US"}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(Customer{ID: id, Name: "Customer " + id, Tier: tiers[n%len(tiers)], Country: countries[n%len(countries)]})
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = srv.Close() }, nil
}

// lookup asks the customer service for customer id. A 5xx answer or a transport error is
// worth another call (kstream.Retriable); a 4xx is not.
func lookup(ctx context.Context, client *http.Client, url, id string) (Customer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/customers/"+id, nil)
	if err != nil {
		return Customer{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return Customer{}, kstream.Retriable(fmt.Errorf("looking up customer %s: %w", id, err))
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode >= 500:
		return Customer{}, kstream.Retriable(fmt.Errorf("looking up customer %s: HTTP %d", id, resp.StatusCode))
	case resp.StatusCode != http.StatusOK:
		return Customer{}, fmt.Errorf("looking up customer %s: HTTP %d", id, resp.StatusCode)
	}
	var c Customer
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		return Customer{}, fmt.Errorf("decoding customer %s: %w", id, err)
	}
	return c, nil
}

func createTopics(ctx context.Context, brokers []string, topics ...string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopics(ctx, partitions, -1, nil, topics...)
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

// generate writes n orders of random customers, keyed by customer.
func generate(ctx context.Context, brokers []string, topic string, n int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	js := serde.JSON[Order]()
	seq := map[string]int{}
	recs := make([]*kgo.Record, 0, n)
	for i := range n {
		c := "c" + strconv.Itoa(rng.IntN(customers))
		o := Order{ID: fmt.Sprintf("o-%05d", i), Customer: c, Seq: seq[c], Amount: float64(rng.IntN(10000)) / 100}
		seq[c]++
		v, err := js.Serialize(o)
		if err != nil {
			return err
		}
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(c), Value: v})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("producing orders: %w", err)
	}
	return nil
}

// readBack consumes the enriched orders until n arrived.
func readBack(ctx context.Context, brokers []string, topic string, n int, runErr <-chan error) ([]Enriched, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	js := serde.JSON[Enriched]()
	var out []Enriched
	for len(out) < n {
		select {
		case err := <-runErr:
			return nil, fmt.Errorf("app stopped early: %v", err)
		default:
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fetches := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("timed out with %d of %d enriched orders", len(out), n)
		}
		var derr error
		fetches.EachRecord(func(r *kgo.Record) {
			e, err := js.Deserialize(r.Value)
			if err != nil {
				derr = err
				return
			}
			out = append(out, e)
		})
		if derr != nil {
			return nil, derr
		}
	}
	return out, nil
}
