// Command avro counts orders per customer, with the orders written in Avro in the Confluent
// wire format and their schema kept in a Schema Registry. It shows:
//
//   - one registry client per process (registry.NewClient), and an Avro serde for a Go struct
//     with `avro` tags (avro.New): a decimal, a timestamp-millis and a nullable union among
//     its fields;
//   - the serde used by a plain producer (bound to the input topic with Bind) and by a
//     topology: kstream binds it to each topic it is used with, so that the subjects are the
//     ones a Kafka Streams application with Confluent's serdes registers, "<topic>-value"
//     for the input topic and "<application.id>-by-customer-repartition-value" for the
//     repartition topic that GroupBy writes the orders to (in Avro too: GroupBy keeps the
//     stream's value serde);
//   - the Confluent wire format of the first order (the magic byte 0 and the 4-byte schema
//     id before the Avro bytes), and the order decoded back, field by field;
//   - the topology Stream -> GroupBy(customer) -> Count -> ToStream -> To, whose counts it
//     reads back and checks against its own tally;
//   - the subjects the registry holds afterwards, listed through the registry client.
//
// It exits 1 if a count, the decoded order or a subject is not as expected.
//
//	go run ./examples/avro
//	go run ./examples/avro -orders 20000
//
// With no set-up it starts an in-process broker with an in-memory Schema Registry beside it
// (embedded.SchemaRegistry). Set KSTREAM_BROKERS=host:port and KSTREAM_REGISTRY to the
// registry's URL to use a real cluster and registry instead, or those of kstream dev, which
// serves both:
//
//	go run ./cmd/kstream dev -data '' &
//	KSTREAM_BROKERS=127.0.0.1:9092 KSTREAM_REGISTRY=http://127.0.0.1:8081 go run ./examples/avro
//
// Against an external broker the topics, the application id and so the subjects carry a
// suffix unique to the run, so that runs do not count each other's orders.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/embedded"
	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/serde/avro"
	"github.com/kstream-go/kstream/serde/registry"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Order is one order, in Avro as orderSchema describes it.
type Order struct {
	ID       string    `avro:"id"`
	Customer string    `avro:"customer"`
	Amount   *big.Rat  `avro:"amount"`    // decimal(10, 2): Java's BigDecimal
	PlacedAt time.Time `avro:"placed_at"` // timestamp-millis
	Coupon   *string   `avro:"coupon"`    // ["null", "string"]: nil is Avro's null
}

// orderSchema is the Avro schema the serde registers and reads with.
const orderSchema = `{
  "type": "record", "name": "Order", "namespace": "com.example.shop",
  "fields": [
    {"name": "id", "type": "string"},
    {"name": "customer", "type": "string"},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
    {"name": "placed_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "coupon", "type": ["null", "string"], "default": null}
  ]
}`

const (
	numCustomers = 25
	// repartitionName names GroupBy's repartition topic, as Kafka Streams' Grouped.as does.
	repartitionName = "by-customer"
)

func main() {
	orders := flag.Int("orders", 5000, "how many orders to write and count")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	s := settings{registryURL: strings.TrimSpace(os.Getenv("KSTREAM_REGISTRY")), orders: *orders}
	for _, b := range strings.Split(os.Getenv(embedded.EnvBrokers), ",") {
		if b = strings.TrimSpace(b); b != "" {
			s.brokers = append(s.brokers, b)
		}
	}
	if len(s.brokers) > 0 && s.registryURL == "" {
		fmt.Fprintln(os.Stderr, "avro: KSTREAM_BROKERS is set: set KSTREAM_REGISTRY to the Schema Registry's URL too (kstream dev serves one at http://127.0.0.1:8081)")
		os.Exit(1)
	}
	if err := run(ctx, s, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "avro:", err)
		os.Exit(1)
	}
}

// settings say where the example runs and how much it does.
type settings struct {
	brokers     []string // empty: start an in-process broker
	registryURL string   // empty: start an in-memory registry beside the in-process broker
	orders      int
}

// names are the topics and the application id of one run.
type names struct {
	orders, counts, appID string
}

// repartition returns the repartition topic that GroupBy writes to.
func (n names) repartition() string { return n.appID + "-" + repartitionName + "-repartition" }

// run runs the example and returns an error if a check fails.
func run(ctx context.Context, s settings, out io.Writer) error {
	if s.orders <= 0 {
		return fmt.Errorf("-orders %d: want at least 1", s.orders)
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	n := names{orders: "avro-orders", counts: "avro-order-counts", appID: "avro-example"}
	brokers, registryURL := s.brokers, s.registryURL
	if len(brokers) == 0 {
		var opts []embedded.Option
		if registryURL == "" {
			opts = append(opts, embedded.SchemaRegistry(0))
		}
		broker, err := embedded.Start(opts...)
		if err != nil {
			return err
		}
		defer broker.Close()
		brokers = broker.Brokers()
		if registryURL == "" {
			registryURL = broker.RegistryURL()
		}
	} else {
		suffix := fmt.Sprintf("-%x", time.Now().UnixNano()&0xffffff)
		n.orders, n.counts, n.appID = n.orders+suffix, n.counts+suffix, n.appID+suffix
	}
	fmt.Fprintf(out, "broker %s, schema registry %s\n", strings.Join(brokers, ","), registryURL)

	// One registry client per process, shared by every serde: it caches each schema it
	// fetches or registers, so a schema id costs one request. It is closed after the app
	// has stopped (the deferred calls run in reverse order).
	client, err := registry.NewClient(registry.Config{URLs: []string{registryURL}, Logger: logger})
	if err != nil {
		return err
	}
	defer client.Close()
	// The default options: subjects named after the topic ("<topic>-value"), and the
	// serde registers its schema under its subject on first use.
	orderSerde, err := avro.New[Order](client, orderSchema, registry.Options{})
	if err != nil {
		return err
	}

	if err := createTopics(ctx, brokers, n.orders, n.counts); err != nil {
		return err
	}
	inputValues := orderSerde.Bind(n.orders, false) // the serde bound to the input topic
	first, firstBytes, want, err := produce(ctx, brokers, inputValues, n.orders, s.orders)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "produced %d Avro orders of %d customers to %s\n", s.orders, len(want), n.orders)
	// The Confluent wire format: the magic byte 0, the schema id in 4 bytes, then Avro.
	id, body, err := registry.SplitHeader(firstBytes)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "the first order's value: % x (magic byte, schema id %d), then %d bytes of Avro\n",
		firstBytes[:registry.HeaderLen], id, len(body))
	decoded, err := inputValues.Deserialize(firstBytes)
	if err != nil {
		return err
	}
	if !sameOrder(decoded, first) {
		return fmt.Errorf("the first order decodes to %s, want %s", describe(decoded), describe(first))
	}
	fmt.Fprintf(out, "decoded: %s\n\n", describe(decoded))

	b := kstream.NewBuilder()
	orders := kstream.Stream(b, n.orders, serde.String(), orderSerde)
	// GroupBy keeps the stream's value serde, so the repartition topic carries the orders
	// in Avro, under the subject "<application.id>-by-customer-repartition-value".
	byCustomer := kstream.GroupBy(orders, func(_ string, o Order) string { return o.Customer }, serde.String(),
		kstream.Named(repartitionName))
	kstream.Count(byCustomer, "orders-per-customer").ToStream().To(n.counts, serde.String(), serde.Int64())

	stateDir, err := os.MkdirTemp("", "avro-example-state-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stateDir)
	app, err := kstream.New(b, kstream.Config{
		ApplicationID:  n.appID,
		Brokers:        brokers,
		StateDir:       stateDir,
		CommitInterval: 500 * time.Millisecond,
		Logger:         logger,
	})
	if err != nil {
		return err
	}
	fmt.Fprint(out, app.Topology().Describe())
	appCtx, stopApp := context.WithCancel(ctx)
	var appErr error
	appDone := make(chan struct{})
	go func() {
		defer close(appDone)
		appErr = app.Run(appCtx)
	}()
	// On every return the app stops before the registry client and the broker close.
	defer func() {
		stopApp()
		<-appDone
	}()

	got, err := readCounts(ctx, brokers, n.counts, want, appDone)
	if err != nil {
		if errors.Is(err, errAppStopped) {
			return fmt.Errorf("%w: %v", err, appErr)
		}
		return err
	}
	stopApp()
	<-appDone
	if appErr != nil {
		return fmt.Errorf("app: %w", appErr)
	}

	customers := make([]string, 0, len(want))
	for c := range want {
		customers = append(customers, c)
	}
	slices.SortFunc(customers, func(a, b string) int {
		if d := want[b] - want[a]; d != 0 {
			return int(d)
		}
		return strings.Compare(a, b)
	})
	fmt.Fprintf(out, "\norders per customer, read back from %s:\n", n.counts)
	for _, c := range customers {
		fmt.Fprintf(out, "  %-12s %5d\n", c, got[c])
	}
	for c, w := range want {
		if got[c] != w {
			return fmt.Errorf("customer %q: counted %d orders, want %d", c, got[c], w)
		}
	}

	if err := listSubjects(ctx, client, out, n); err != nil {
		return err
	}
	fmt.Fprintln(out, "\nok: every count is exact, and the input and repartition topics' subjects are named as in Kafka Streams")
	return nil
}

func createTopics(ctx context.Context, brokers []string, topics ...string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopics(ctx, 3, -1, nil, topics...)
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

// produce writes count random orders to topic, keyed by order id, with values serialized by
// values (the serde bound to topic). It returns the first order and its value's bytes, and
// the number of orders of each customer.
func produce(ctx context.Context, brokers []string, values serde.Serde[Order], topic string, count int) (first Order, firstBytes []byte, want map[string]int64, err error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return first, nil, nil, err
	}
	defer cl.Close()
	rng := rand.New(rand.NewPCG(3, 5))
	coupons := []string{"SPRING10", "FREESHIP", "WELCOME"}
	now := time.Now().Truncate(time.Millisecond) // Avro's timestamp-millis keeps milliseconds
	want = map[string]int64{}
	recs := make([]*kgo.Record, 0, count)
	for i := range count {
		// Customers of low numbers order more, so that the counts differ.
		c := min(rng.IntN(numCustomers), rng.IntN(numCustomers))
		o := Order{
			ID:       fmt.Sprintf("order-%05d", i),
			Customer: fmt.Sprintf("customer-%02d", c),
			Amount:   big.NewRat(int64(100+rng.IntN(100000)), 100), // 1.00 to 1000.99
			PlacedAt: now.Add(-time.Duration(count-i) * time.Second),
		}
		if rng.IntN(4) == 0 {
			o.Coupon = &coupons[rng.IntN(len(coupons))]
		}
		v, err := values.Serialize(o)
		if err != nil {
			return first, nil, nil, fmt.Errorf("serializing order %s: %w", o.ID, err)
		}
		if i == 0 {
			first, firstBytes = o, v
		}
		want[o.Customer]++
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(o.ID), Value: v, Timestamp: o.PlacedAt})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return first, nil, nil, fmt.Errorf("producing orders: %w", err)
	}
	return first, firstBytes, want, nil
}

// errAppStopped is readCounts' error when the app stops before the counts are complete.
var errAppStopped = errors.New("the app stopped before every count was read")

// readCounts reads the counts topic until every customer has reached its true count.
func readCounts(ctx context.Context, brokers []string, topic string, want map[string]int64, appDone <-chan struct{}) (map[string]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	got := map[string]int64{}
	i64 := serde.Int64()
	done := func() bool {
		for c, n := range want {
			if got[c] < n {
				return false
			}
		}
		return true
	}
	for !done() {
		select {
		case <-appDone:
			return nil, errAppStopped
		default:
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fetches := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return nil, errors.New("timed out waiting for the counts")
		}
		var derr error
		fetches.EachRecord(func(r *kgo.Record) {
			n, err := i64.Deserialize(r.Value)
			if err != nil {
				derr = fmt.Errorf("count of %q at offset %d: %w", r.Key, r.Offset, err)
			}
			got[string(r.Key)] = max(got[string(r.Key)], n)
		})
		if derr != nil {
			return nil, derr
		}
	}
	return got, nil
}

func sameOrder(a, b Order) bool {
	return a.ID == b.ID && a.Customer == b.Customer && a.Amount != nil && b.Amount != nil &&
		a.Amount.Cmp(b.Amount) == 0 && a.PlacedAt.Equal(b.PlacedAt) &&
		(a.Coupon == nil) == (b.Coupon == nil) && (a.Coupon == nil || *a.Coupon == *b.Coupon)
}

func describe(o Order) string {
	amount, coupon := "nil", "null"
	if o.Amount != nil {
		amount = o.Amount.FloatString(2)
	}
	if o.Coupon != nil {
		coupon = *o.Coupon
	}
	return fmt.Sprintf("{id %q customer %q amount %s placed_at %s coupon %s}", o.ID, o.Customer, amount,
		o.PlacedAt.UTC().Format(time.RFC3339Nano), coupon)
}

// listSubjects prints the subjects the registry holds (with an external registry, those of
// this run) and checks that the two the example expects are among them.
func listSubjects(ctx context.Context, client *registry.Client, out io.Writer, n names) error {
	// SR is franz-go's registry client underneath; its calls are neither cached nor retried.
	subjects, err := client.SR().Subjects(ctx)
	if err != nil {
		return fmt.Errorf("listing subjects: %w", err)
	}
	slices.Sort(subjects)
	fmt.Fprintf(out, "\nthe registry holds %d subjects; this run's:\n", len(subjects))
	for _, subject := range subjects {
		if subject != n.orders+"-value" && !strings.HasPrefix(subject, n.appID+"-") {
			continue
		}
		ss, err := client.SR().SchemaByVersion(ctx, subject, -1)
		if err != nil {
			return fmt.Errorf("subject %q: %w", subject, err)
		}
		fmt.Fprintf(out, "  %-50s version %d, schema id %d\n", subject, ss.Version, ss.ID)
	}
	for _, want := range []string{n.orders + "-value", n.repartition() + "-value"} {
		if !slices.Contains(subjects, want) {
			return fmt.Errorf("subject %q is not registered (subjects: %v)", want, subjects)
		}
	}
	return nil
}
