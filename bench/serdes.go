package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/bench/internal/orderpb"
	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/serde/avro"
	"github.com/kstream-go/kstream/serde/jsonschema"
	"github.com/kstream-go/kstream/serde/protobuf"
	"github.com/kstream-go/kstream/serde/registry"
)

// The Schema Registry serde scenarios (issue 27): the same 10-field orders in JSON
// (serde.JSON), Avro, Protobuf and JSON Schema, through a passthrough and a count per
// customer, each set against the JSON scenario of the same kind in the same run. The input
// values are written by the scenario's own serde (bound to the input topic), so that the
// app reads what a producer with that serde wrote; the keys are the distinct 8-byte keys of
// the other copy scenarios.
//
//	passthrough-<format>: Stream(Bytes, V) -> To(out, Bytes, V): every record decoded and
//	                      encoded again.
//	count-<format>:       Stream(Bytes, V) -> GroupBy(customer, String) -> Count(in memory)
//	                      -> ToStream -> To(out, String, Int64): decoded, encoded into the
//	                      repartition topic (in the same format, as GroupBy keeps the value
//	                      serde), decoded from it, counted; an update per input record.

// srFormats are the serde formats, in the order they are printed; json is the reference.
var srFormats = []string{"json", "avro", "protobuf", "jsonschema"}

// srKinds are the topologies of the serde scenarios.
var srKinds = []string{"passthrough", "count"}

// targetSerdeVsJSON: the Avro and Protobuf scenarios against JSON's of the same kind, in
// records/s (median time ratio).
const targetSerdeVsJSON = 1.0

// registryURL is -registry: the Schema Registry of an external cluster.
var registryURL string

func init() {
	flag.StringVar(&registryURL, "registry", "", "with -brokers: the Schema Registry URL of the *-avro, *-protobuf and *-jsonschema scenarios (default: the embedded broker's registry)")
	for _, kind := range srKinds {
		for _, f := range srFormats {
			s := scenario{name: kind + "-" + f, keep: keepAll, values: srValues(f), registry: f != "json"}
			switch kind {
			case "passthrough":
				s.run = srPassthrough(f)
			case "count":
				s.run, s.stateful = srCount(f), true
			}
			scenarios = append(scenarios, s)
		}
	}
}

// srScenario splits a serde scenario's name into its kind and format (ok false for others).
func srScenario(name string) (kind, format string, ok bool) {
	kind, format, ok = strings.Cut(name, "-")
	if !ok || (kind != "passthrough" && kind != "count") {
		return "", "", false
	}
	for _, f := range srFormats {
		if f == format {
			return kind, format, true
		}
	}
	return "", "", false
}

// Order is the record of the serde scenarios: ten fields of order data. Protobuf writes it
// as orderpb.Order (CreatedAt a google.protobuf.Timestamp, Status an enum).
type Order struct {
	OrderID    string    `json:"order_id" avro:"order_id"`
	CustomerID string    `json:"customer_id" avro:"customer_id"`
	SKU        string    `json:"sku" avro:"sku"`
	Quantity   int32     `json:"quantity" avro:"quantity"`
	UnitPrice  float64   `json:"unit_price" avro:"unit_price"`
	TotalCents int64     `json:"total_cents" avro:"total_cents"`
	CreatedAt  time.Time `json:"created_at" avro:"created_at"`
	Status     string    `json:"status" avro:"status"`
	Express    bool      `json:"express" avro:"express"`
	Currency   string    `json:"currency" avro:"currency"`
}

const orderAvroSchema = `{"type": "record", "name": "Order", "namespace": "kstream.bench", "fields": [
  {"name": "order_id", "type": "string"},
  {"name": "customer_id", "type": "string"},
  {"name": "sku", "type": "string"},
  {"name": "quantity", "type": "int"},
  {"name": "unit_price", "type": "double"},
  {"name": "total_cents", "type": "long"},
  {"name": "created_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
  {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED", "DELIVERED", "CANCELLED"]}},
  {"name": "express", "type": "boolean"},
  {"name": "currency", "type": "string"}
]}`

const orderJSONSchema = `{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "title": "kstream.bench.Order",
  "type": "object",
  "properties": {
    "order_id": {"type": "string"},
    "customer_id": {"type": "string"},
    "sku": {"type": "string"},
    "quantity": {"type": "integer"},
    "unit_price": {"type": "number"},
    "total_cents": {"type": "integer"},
    "created_at": {"type": "string", "format": "date-time"},
    "status": {"enum": ["NEW", "PAID", "SHIPPED", "DELIVERED", "CANCELLED"]},
    "express": {"type": "boolean"},
    "currency": {"type": "string"}
  },
  "required": ["order_id", "customer_id", "sku", "quantity", "unit_price", "total_cents", "created_at", "status", "express", "currency"]
}`

var (
	orderStatuses = []string{"NEW", "PAID", "SHIPPED", "DELIVERED", "CANCELLED"}
	currencies    = []string{"EUR", "USD", "GBP", "CHF", "SEK"}
	// orderEpoch is the creation time of order 0; order i is about i*7ms later.
	orderEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
)

// orderAt returns order i of seed: the same for every format and run.
func orderAt(seed uint64, i int) Order {
	r := rand.New(rand.NewPCG(seed, uint64(i)))
	qty := int32(1 + r.IntN(20))
	cents := int64(99 + r.IntN(99_901)) // 0.99 to 999.99
	return Order{
		OrderID:    fmt.Sprintf("ord-%010d", i),
		CustomerID: fmt.Sprintf("cust-%05d", r.IntN(countKeys)),
		SKU:        fmt.Sprintf("SKU-%06d", r.IntN(50_000)),
		Quantity:   qty,
		UnitPrice:  float64(cents) / 100,
		TotalCents: cents * int64(qty),
		CreatedAt:  time.UnixMilli(orderEpoch + int64(i)*7 + r.Int64N(7)).UTC(),
		Status:     orderStatuses[r.IntN(len(orderStatuses))],
		Express:    r.IntN(4) == 0,
		Currency:   currencies[r.IntN(len(currencies))],
	}
}

// toProto is o as orderpb.Order.
func toProto(o Order) *orderpb.Order {
	status := orderpb.Status_STATUS_UNSPECIFIED
	for i, s := range orderStatuses {
		if s == o.Status {
			status = orderpb.Status(i + 1)
		}
	}
	return &orderpb.Order{
		OrderId: o.OrderID, CustomerId: o.CustomerID, Sku: o.SKU, Quantity: o.Quantity,
		UnitPrice: o.UnitPrice, TotalCents: o.TotalCents, CreatedAt: timestamppb.New(o.CreatedAt),
		Status: status, Express: o.Express, Currency: o.Currency,
	}
}

// format is how one serde format writes orders as V.
type format[V any] struct {
	// serde returns a new value serde (c is nil for JSON).
	serde    func(c *registry.Client) (serde.Serde[V], error)
	from     func(Order) V
	customer func(V) string
}

var (
	jsonFormat = format[Order]{
		serde:    func(*registry.Client) (serde.Serde[Order], error) { return serde.JSON[Order](), nil },
		from:     func(o Order) Order { return o },
		customer: func(o Order) string { return o.CustomerID },
	}
	avroFormat = format[Order]{
		serde: func(c *registry.Client) (serde.Serde[Order], error) {
			return avro.New[Order](c, orderAvroSchema, registry.Options{})
		},
		from:     func(o Order) Order { return o },
		customer: func(o Order) string { return o.CustomerID },
	}
	jsonSchemaFormat = format[Order]{
		serde: func(c *registry.Client) (serde.Serde[Order], error) {
			return jsonschema.New[Order](c, orderJSONSchema, jsonschema.Options{})
		},
		from:     func(o Order) Order { return o },
		customer: func(o Order) string { return o.CustomerID },
	}
	protobufFormat = format[*orderpb.Order]{
		serde: func(c *registry.Client) (serde.Serde[*orderpb.Order], error) {
			return protobuf.New[*orderpb.Order](c, registry.Options{})
		},
		from:     toProto,
		customer: func(o *orderpb.Order) string { return o.GetCustomerId() },
	}
)

// byFormat calls the function of f's format (generic functions cannot be values).
func byFormat[R any](f string, json, avro, protobuf, jsonSchema func() R) R {
	switch f {
	case "json":
		return json()
	case "avro":
		return avro()
	case "protobuf":
		return protobuf()
	case "jsonschema":
		return jsonSchema()
	}
	panic("bench: unknown serde format " + f)
}

type runFunc = func(context.Context, *runEnv) error

func srPassthrough(f string) runFunc {
	return byFormat(f,
		func() runFunc { return passthroughOf(jsonFormat) },
		func() runFunc { return passthroughOf(avroFormat) },
		func() runFunc { return passthroughOf(protobufFormat) },
		func() runFunc { return passthroughOf(jsonSchemaFormat) })
}

func srCount(f string) runFunc {
	return byFormat(f,
		func() runFunc { return countOf(jsonFormat) },
		func() runFunc { return countOf(avroFormat) },
		func() runFunc { return countOf(protobufFormat) },
		func() runFunc { return countOf(jsonSchemaFormat) })
}

type valuesFunc = func(env *runEnv, o options) (func(i int) ([]byte, error), error)

// srValues returns the input values of format f's scenarios: order i written by f's serde
// bound to the input topic (so registering its subject, as a producer would).
func srValues(f string) valuesFunc {
	return byFormat(f,
		func() valuesFunc { return valuesOf(f, jsonFormat) },
		func() valuesFunc { return valuesOf(f, avroFormat) },
		func() valuesFunc { return valuesOf(f, protobufFormat) },
		func() valuesFunc { return valuesOf(f, jsonSchemaFormat) })
}

// valueBytes sums the input value bytes and values of each format (for the mean size).
var valueBytes = struct {
	sync.Mutex
	m map[string][2]int64
}{m: map[string][2]int64{}}

// meanValueSize is the mean size of the input values of serde scenario name (ok false for
// other scenarios, or before its input was filled).
func meanValueSize(name string) (float64, bool) {
	_, f, ok := srScenario(name)
	if !ok {
		return 0, false
	}
	valueBytes.Lock()
	defer valueBytes.Unlock()
	c := valueBytes.m[f]
	if c[1] == 0 {
		return 0, false
	}
	return float64(c[0]) / float64(c[1]), true
}

func valuesOf[V any](name string, f format[V]) valuesFunc {
	return func(env *runEnv, o options) (func(i int) ([]byte, error), error) {
		s, err := f.serde(env.registry)
		if err != nil {
			return nil, err
		}
		s = serde.ForTopic(s, env.in, false)
		return func(i int) ([]byte, error) {
			b, err := s.Serialize(f.from(orderAt(o.seed, i)))
			valueBytes.Lock()
			c := valueBytes.m[name]
			valueBytes.m[name] = [2]int64{c[0] + int64(len(b)), c[1] + 1}
			valueBytes.Unlock()
			return b, err
		}, nil
	}
}

func passthroughOf[V any](f format[V]) runFunc {
	return func(ctx context.Context, env *runEnv) error {
		vs, err := f.serde(env.registry)
		if err != nil {
			return err
		}
		b := kstream.NewBuilder()
		kstream.Stream(b, env.in, serde.Bytes(), vs).To(env.out, serde.Bytes(), vs)
		return runApp(ctx, b, env)
	}
}

func countOf[V any](f format[V]) runFunc {
	return func(ctx context.Context, env *runEnv) error {
		vs, err := f.serde(env.registry)
		if err != nil {
			return err
		}
		b := kstream.NewBuilder()
		orders := kstream.Stream(b, env.in, serde.Bytes(), vs)
		byCustomer := kstream.GroupBy(orders, func(_ []byte, v V) string { return f.customer(v) }, serde.String(),
			kstream.Named("by-customer"))
		kstream.Count(byCustomer, countStore, kstream.InMemory()).ToStream().
			To(env.out, serde.String(), serde.Int64())
		return runStatefulApp(ctx, b, env, nil, kstream.AtLeastOnce)
	}
}

// newRegistryClient returns the process's registry client (one per process, as the serde
// docs advise) for the selected scenarios that need one, else nil.
func newRegistryClient(selected []scenario, url string, external bool) (*registry.Client, error) {
	need := false
	for _, s := range selected {
		need = need || s.registry
	}
	if !need {
		return nil, nil
	}
	if url == "" {
		if external {
			return nil, errors.New("the *-avro, *-protobuf and *-jsonschema scenarios need -registry with -brokers")
		}
		return nil, errors.New("no schema registry")
	}
	return registry.NewClient(registry.Config{URLs: []string{url}})
}

// serdeTarget is the target column of a serde scenario ("" for other scenarios): Avro
// and Protobuf against JSON of the same kind; JSON Schema has no target (its ratio only).
func serdeTarget(name string, sums map[string]summary) string {
	kind, f, ok := srScenario(name)
	if !ok || f == "json" {
		return ""
	}
	ref, have := sums[kind+"-json"]
	if f == "jsonschema" {
		if !have {
			return "-"
		}
		return fmt.Sprintf("%.2fx %s-json (no target)", ref.median.seconds/sums[name].median.seconds, kind)
	}
	t := fmt.Sprintf(">= %.1fx %s-json", targetSerdeVsJSON, kind)
	if !have {
		return t
	}
	r := ref.median.seconds / sums[name].median.seconds
	return fmt.Sprintf("%s: %.2fx %s", t, r, metOrMissed(r >= targetSerdeVsJSON))
}

// printSerdes prints the serde scenarios' figures per record, against JSON's.
func printSerdes(o options, selected []scenario, sums map[string]summary) {
	var names []string
	for _, s := range selected {
		if _, _, ok := srScenario(s.name); ok {
			names = append(names, s.name)
		}
	}
	if len(names) == 0 {
		return
	}
	n := float64(o.records)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "serde\tvalue B\tmedian rec/s\tvs json (median)\tvs json (best)\tallocs/rec\tB/rec\tCPU µs/rec\tCPU vs json\ttarget\t")
	for _, name := range names {
		kind, _, _ := srScenario(name)
		m, best := sums[name].median, sums[name].best
		vs, vsBest, cpuVs := "-", "-", "-"
		if ref, ok := sums[kind+"-json"]; ok {
			vs = fmt.Sprintf("%.2fx", ref.median.seconds/m.seconds)
			vsBest = fmt.Sprintf("%.2fx", ref.best.seconds/best.seconds)
			cpuVs = fmt.Sprintf("%.2fx", ref.median.cpuSeconds/m.cpuSeconds)
		}
		size := "-"
		if b, ok := meanValueSize(name); ok {
			size = fmt.Sprintf("%.0f", b)
		}
		target := serdeTarget(name, sums)
		if target == "" {
			target = "(reference)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s\t%s\t%.1f\t%.0f\t%.2f\t%s\t%s\t\n", name, size, n/m.seconds, vs, vsBest,
			float64(m.allocs)/n, float64(m.allocBytes)/n, m.cpuSeconds/n*1e6, cpuVs, target)
	}
	tw.Flush()
	fmt.Println("serde: the same orders (10 fields) per format; value B: mean input value size (the Confluent header included);")
	fmt.Println("vs json: the JSON scenario's time of the same kind / this one's (>1 is faster); allocs/rec, B/rec and CPU µs/rec")
	fmt.Println("of the median run, whole process (broker and registry included); passthrough decodes and encodes each record")
	fmt.Println("once, count twice each (the repartition topic) and counts in memory.")
	fmt.Println()
}
