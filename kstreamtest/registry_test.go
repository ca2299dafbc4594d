package kstreamtest_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/serde/avro"
	"github.com/kstream-go/kstream/serde/registry"
	"github.com/kstream-go/kstream/store"
)

type regOrder struct {
	ID       string `avro:"id"`
	Customer string `avro:"customer"`
	Amount   int64  `avro:"amount"`
}

type regCustomer struct {
	Name string `avro:"name"`
}

const (
	regOrderSchema    = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"string"},{"name":"customer","type":"string"},{"name":"amount","type":"long"}]}`
	regCustomerSchema = `{"type":"record","name":"Customer","namespace":"shop","fields":[{"name":"name","type":"string"}]}`
)

// Every store, buffer and internal topic of a topology binds the Schema Registry serdes to
// the topic Kafka Streams' Confluent serdes would be given, so that the subjects registered
// are named as a Java application's: "<application.id>-<store>-changelog-key/-value" for
// every store (the table's, a window store's, a suppression buffer's, a stream-stream
// join's, a stream-table join's grace buffer, a Processor API window store), the FK join's
// "<registration topic>-key", "-pk-key", "-vh-value" and "<response topic>-value", the
// global table's topic. The driver runs it all with an in-memory registry.
func TestRegistrySubjectsOfInternalTopics(t *testing.T) {
	reg, err := kstreamtest.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	rc := reg.Client()
	keys, err := avro.New[string](rc, `"string"`, registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	orders, err := avro.New[regOrder](rc, regOrderSchema, registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	customers, err := avro.New[regCustomer](rc, regCustomerSchema, registry.Options{})
	if err != nil {
		t.Fatal(err)
	}

	b := kstream.NewBuilder()
	in := kstream.Stream(b, "orders", keys, orders)
	byCustomer := kstream.SelectKey(in, func(_ string, o regOrder) string { return o.Customer }).Repartition("by-customer")
	// A table's store and a suppressed windowed reduce (window store and buffer).
	g := byCustomer.GroupByKey()
	kstream.Reduce(g, func(_, o regOrder) regOrder { return o }, "last-order").ToStream().To("last-orders", keys, orders)
	windowed := kstream.WindowedReduce(g.WindowedBy(kstream.TimeWindowsOf(time.Minute).WithGrace(0)),
		func(a, o regOrder) regOrder { a.Amount += o.Amount; return a }, "per-minute")
	kstream.Map(windowed.Suppress(kstream.UntilWindowCloses(kstream.Unbounded()).WithName("final")).ToStream(),
		func(k serde.Windowed[string], o regOrder) (string, regOrder) { return k.Key, o }).To("minute-totals", keys, orders)
	// A stream-stream outer join (two window stores and the shared store).
	payments := kstream.Stream(b, "payments", keys, orders)
	kstream.OuterJoinWindowed(in, payments, func(_ string, o regOrder, _ bool, p regOrder, _ bool) regOrder {
		o.Amount -= p.Amount
		return o
	}, kstream.JoinWindowsOf(time.Minute), kstream.JoinStoreName("settle")).To("settled", keys, orders)
	// A stream-table join with a grace period (its buffer) over a versioned table.
	custTable := kstream.Table(b, "customers", keys, customers, "customers-store", kstream.Versioned(time.Hour))
	kstream.Join(byCustomer, custTable, func(_ string, o regOrder, c regCustomer) regOrder {
		o.Customer = c.Name
		return o
	}, kstream.JoinGrace(time.Second), kstream.Named("enrich")).To("enriched", keys, orders)
	// A foreign-key join.
	orderTable := kstream.Table(b, "order-table", keys, orders, "orders-store")
	plainCustomers := kstream.Table(b, "customers-plain", keys, customers, "customers-plain-store")
	kstream.TableJoinOn(orderTable, plainCustomers, func(_ string, o regOrder) string { return o.Customer },
		func(o regOrder, c regCustomer) regOrder { o.Customer = c.Name; return o }, kstream.Named("fk")).
		ToStream().To("fk-out", keys, orders)
	// A table re-grouped: its changes go through a repartition topic.
	perCustomer := kstream.TableGroupBy(orderTable, func(_ string, o regOrder) kstream.KeyValue[string, regOrder] {
		return kstream.KeyValue[string, regOrder]{Key: o.Customer, Value: o}
	}, keys, orders, kstream.Named("per-customer"))
	kstream.TableReduce(perCustomer, func(a, o regOrder) regOrder { a.Amount += o.Amount; return a },
		func(a, o regOrder) regOrder { a.Amount -= o.Amount; return a }, "customer-totals").ToStream().To("customer-totals", keys, orders)
	// A global table.
	regions := kstream.GlobalTable(b, "regions", keys, customers, "regions-store")
	kstream.JoinGlobal(in, regions, func(_ string, o regOrder) string { return o.Customer },
		func(_ string, o regOrder, r regCustomer) regOrder { o.Customer = r.Name; return o }).To("by-region", keys, orders)
	// A Processor API window store.
	ws := kstream.WindowStore("papi-win", keys, orders, time.Hour, time.Minute)
	kstream.Process(in, func() kstream.Processor[string, regOrder, string, regOrder] { return &papiWindowWriter{} },
		kstream.Named("papi"), kstream.WithStores(ws)).To("papi-out", keys, orders)

	d, err := kstreamtest.New(b, kstream.Config{ApplicationID: "subj"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	t0 := time.Unix(1_700_000_000, 0)
	custIn := kstreamtest.CreateInputTopic(d, "customers", keys, customers, kstreamtest.StartTime(t0))
	plainIn := kstreamtest.CreateInputTopic(d, "customers-plain", keys, customers, kstreamtest.StartTime(t0))
	regionsIn := kstreamtest.CreateInputTopic(d, "regions", keys, customers, kstreamtest.StartTime(t0))
	for _, in := range []*kstreamtest.InputTopic[string, regCustomer]{custIn, plainIn, regionsIn} {
		if err := in.Pipe("c1", regCustomer{Name: "Ada"}); err != nil {
			t.Fatal(err)
		}
	}
	orderIn := kstreamtest.CreateInputTopic(d, "orders", keys, orders, kstreamtest.StartTime(t0.Add(time.Second)))
	payIn := kstreamtest.CreateInputTopic(d, "payments", keys, orders, kstreamtest.StartTime(t0.Add(time.Second)))
	tableIn := kstreamtest.CreateInputTopic(d, "order-table", keys, orders, kstreamtest.StartTime(t0.Add(time.Second)))
	for _, err := range []error{
		orderIn.Pipe("o1", regOrder{ID: "o1", Customer: "c1", Amount: 5}),
		payIn.Pipe("o1", regOrder{ID: "p1", Customer: "c1", Amount: 5}),
		tableIn.Pipe("o1", regOrder{ID: "o1", Customer: "c1", Amount: 5}),
		// Advances stream time past the window's end, the join windows and the grace.
		orderIn.PipeAt("o2", regOrder{ID: "o2", Customer: "c1", Amount: 7}, t0.Add(5*time.Minute)),
		payIn.PipeAt("o3", regOrder{ID: "p3", Customer: "c1", Amount: 1}, t0.Add(5*time.Minute)),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	fk, err := kstreamtest.CreateOutputTopic(d, "fk-out", keys, orders).ReadValues()
	if err != nil {
		t.Fatal(err)
	}
	if len(fk) != 1 || fk[0].Customer != "Ada" {
		t.Errorf("FK join output %+v, want one order of customer Ada", fk)
	}
	totals, err := kstreamtest.CreateOutputTopic(d, "minute-totals", keys, orders).ReadValues()
	if err != nil {
		t.Fatal(err)
	}
	if len(totals) != 1 || totals[0].Amount != 5 {
		t.Errorf("suppressed window totals %+v, want the first minute's 5", totals)
	}

	got, err := reg.Subjects()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		// Sources and sinks.
		"customers-key", "customers-value", "customers-plain-key", "customers-plain-value",
		"orders-key", "orders-value", "payments-key", "payments-value", "order-table-key", "order-table-value",
		"regions-key", "regions-value",
		"last-orders-key", "last-orders-value", "minute-totals-key", "minute-totals-value",
		"settled-key", "settled-value", "enriched-key", "enriched-value", "fk-out-key", "fk-out-value",
		"by-region-key", "by-region-value", "papi-out-key", "papi-out-value",
		// The repartition topics.
		"subj-by-customer-repartition-key", "subj-by-customer-repartition-value",
		"subj-per-customer-repartition-key", "subj-per-customer-repartition-value",
		"subj-customer-totals-changelog-key", "subj-customer-totals-changelog-value",
		"customer-totals-key", "customer-totals-value",
		// Stores: the reduce's, the windowed reduce's, the suppression buffer's.
		"subj-last-order-changelog-key", "subj-last-order-changelog-value",
		"subj-per-minute-changelog-key", "subj-per-minute-changelog-value",
		"subj-final-store-changelog-key", "subj-final-store-changelog-value",
		// The stream-stream outer join's window stores and shared store.
		"subj-settle-outer-this-join-store-changelog-key", "subj-settle-outer-this-join-store-changelog-value",
		"subj-settle-outer-other-join-store-changelog-key", "subj-settle-outer-other-join-store-changelog-value",
		"subj-settle-outer-shared-join-store-changelog-key", "subj-settle-outer-shared-join-store-changelog-value",
		// The stream-table join's grace buffer.
		"subj-enrich-Buffer-changelog-key", "subj-enrich-Buffer-changelog-value",
		// The FK join: registration topic key, primary key, value hash, response value.
		"subj-fk-subscription-registration-topic-key", "subj-fk-subscription-registration-topic-pk-key",
		"subj-fk-subscription-registration-topic-vh-value", "subj-fk-subscription-response-topic-value",
		// The Processor API window store.
		"subj-papi-win-changelog-key", "subj-papi-win-changelog-value",
	}
	slices.Sort(want)
	var missing []string
	for _, s := range want {
		if !slices.Contains(got, s) {
			missing = append(missing, s)
		}
	}
	var extra []string
	for _, s := range got {
		if !slices.Contains(want, s) {
			extra = append(extra, s)
		}
	}
	if len(missing) > 0 || len(extra) > 0 {
		t.Errorf("subjects missing:\n  %s\nsubjects not expected:\n  %s", strings.Join(missing, "\n  "), strings.Join(extra, "\n  "))
	}
}

// papiWindowWriter puts each order in its window store and forwards it.
type papiWindowWriter struct {
	ws *store.WindowStore[string, regOrder]
}

func (p *papiWindowWriter) Init(ctx kstream.ProcessorContext[string, regOrder]) error {
	var err error
	p.ws, err = kstream.GetWindowStore[string, regOrder](ctx, "papi-win")
	return err
}

func (p *papiWindowWriter) Process(ctx kstream.ProcessorContext[string, regOrder], r kstream.Record[string, regOrder]) error {
	if err := p.ws.Put(r.Key, r.Value, r.Timestamp.Truncate(time.Minute)); err != nil {
		return err
	}
	ctx.Forward(r)
	return nil
}
