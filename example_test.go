package kstream_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/embedded"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A whole program: an in-process broker, a topology, and its output read back.
func Example() {
	broker, err := embedded.Start(embedded.Topics(1, "words", "shouts"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer broker.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	b := kstream.NewBuilder()
	words := kstream.Stream(b, "words", serde.String(), serde.String())
	loud := words.Filter(func(_, w string) bool { return len(w) > 3 })
	kstream.MapValues(loud, strings.ToUpper).To("shouts", nil, serde.String())

	app, err := kstream.New(b, kstream.Config{ApplicationID: "example", Brokers: broker.Brokers()})
	if err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()

	cl, _ := kgo.NewClient(kgo.SeedBrokers(broker.Brokers()...), kgo.ConsumeTopics("shouts"))
	defer cl.Close()
	for _, w := range []string{"go", "kafka", "streams", "in"} {
		cl.Produce(ctx, &kgo.Record{Topic: "words", Value: []byte(w)}, nil)
	}
	var got []string
	for len(got) < 2 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	slices.Sort(got)
	fmt.Println(got)
	cancel()
	fmt.Println("run:", <-done)
	// Output:
	// [KAFKA STREAMS]
	// run: <nil>
}

func ExampleTopology_Describe() {
	b := kstream.NewBuilder()
	s := kstream.Stream(b, "in", serde.String(), serde.String())
	kstream.SelectKey(s, func(_, v string) string { return v }).WithSerdes(serde.String(), nil).Repartition("by-value").To("out", nil, nil)
	topo, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(topo.Describe())
	// Output:
	// Topologies:
	//    Sub-topology: 0
	//     Source: KSTREAM-SOURCE-0000000000 (topics: [in])
	//       --> KSTREAM-KEY-SELECT-0000000001
	//     Processor: KSTREAM-KEY-SELECT-0000000001 (stores: [])
	//       --> by-value-repartition-filter
	//       <-- KSTREAM-SOURCE-0000000000
	//     Processor: by-value-repartition-filter (stores: [])
	//       --> by-value-repartition-sink
	//       <-- KSTREAM-KEY-SELECT-0000000001
	//     Sink: by-value-repartition-sink (topic: by-value-repartition)
	//       <-- by-value-repartition-filter
	//
	//   Sub-topology: 1
	//     Source: by-value-repartition-source (topics: [by-value-repartition])
	//       --> KSTREAM-SINK-0000000005
	//     Sink: KSTREAM-SINK-0000000005 (topic: out)
	//       <-- by-value-repartition-source
}

func ExampleKStream_Split() {
	b := kstream.NewBuilder()
	s := kstream.Stream(b, "events", serde.String(), serde.Int64())
	branches := s.Split(kstream.Named("level-")).
		Branch("high", func(_ string, v int64) bool { return v > 100 }).
		Branch("mid", func(_ string, v int64) bool { return v > 10 }).
		DefaultBranch("low")
	for _, name := range []string{"level-high", "level-mid", "level-low"} {
		branches[name].To(strings.TrimPrefix(name, "level-")+"-events", nil, nil)
	}
	fmt.Println(len(branches), "branches")
	// Output: 3 branches
}

func ExampleProcess() {
	b := kstream.NewBuilder()
	s := kstream.Stream(b, "in", serde.String(), serde.String())
	// A processor that tags each record with where it came from.
	tagged := kstream.Process(s, func() kstream.Processor[string, string, string, string] {
		return kstream.ProcessorFunc[string, string, string, string](func(ctx kstream.ProcessorContext[string, string], r kstream.Record[string, string]) error {
			if md, ok := ctx.RecordMetadata(); ok {
				r = r.WithHeader("source", fmt.Appendf(nil, "%s/%d/%d", md.Topic, md.Partition, md.Offset))
			}
			ctx.Forward(r)
			return nil
		})
	}, kstream.Named("tagger"))
	tagged.To("out", serde.String(), serde.String())
	topo, _ := b.Build()
	fmt.Println(strings.Contains(topo.Describe(), "Processor: tagger"))
	// Output: true
}

func ExampleDeadLetterQueue() {
	cfg := kstream.Config{
		ApplicationID: "orders",
		Brokers:       []string{"127.0.0.1:9092"},
		// Records that cannot be decoded go to "orders-dlq" with headers naming the error,
		// the source topic, partition and offset, and the operator.
		DeserializationErrorHandler: kstream.DeadLetterQueue("orders-dlq"),
		// A failing operator skips the record (its siblings still see it).
		ProcessingErrorHandler: kstream.LogAndContinue(),
	}
	fmt.Println(cfg.ApplicationID)
	// Output: orders
}

// A global table is its own sub-topology, which generates no tasks; the join that reads it
// lists no store, as in Kafka Streams.
func ExampleGlobalTable() {
	b := kstream.NewBuilder()
	users := kstream.GlobalTable(b, "users", serde.String(), serde.String(), "users-global")
	orders := kstream.Stream(b, "orders", serde.String(), serde.String())
	kstream.JoinGlobal(orders, users, func(_, user string) string { return user },
		func(_, _, name string) string { return name }).To("order-names", nil, serde.String())
	topo, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(topo.Describe())
	// Output:
	// Topologies:
	//    Sub-topology: 0 for global store (will not generate tasks)
	//     Source: KSTREAM-SOURCE-0000000000 (topics: [users])
	//       --> KTABLE-SOURCE-0000000001
	//     Processor: KTABLE-SOURCE-0000000001 (stores: [users-global])
	//       --> none
	//       <-- KSTREAM-SOURCE-0000000000
	//   Sub-topology: 1
	//     Source: KSTREAM-SOURCE-0000000002 (topics: [orders])
	//       --> KSTREAM-LEFTJOIN-0000000003
	//     Processor: KSTREAM-LEFTJOIN-0000000003 (stores: [])
	//       --> KSTREAM-SINK-0000000004
	//       <-- KSTREAM-SOURCE-0000000002
	//     Sink: KSTREAM-SINK-0000000004 (topic: order-names)
	//       <-- KSTREAM-LEFTJOIN-0000000003
}

// Enriching orders with the customer's name: the key mapper takes the customer id from the
// order, so the orders need not be keyed (or partitioned) by customer. The test driver
// applies records of the global topic at once.
func ExampleJoinGlobal() {
	type order struct {
		Customer string
		Amount   int64
	}
	b := kstream.NewBuilder()
	customers := kstream.GlobalTable(b, "customers", serde.String(), serde.String(), "customers")
	orders := kstream.Stream(b, "orders", serde.String(), serde.JSON[order]())
	kstream.LeftJoinGlobal(orders, customers,
		func(_ string, o order) string { return o.Customer },
		func(id string, o order, name string, found bool) string {
			if !found {
				name = "unknown customer " + o.Customer
			}
			return fmt.Sprintf("%s: %d for %s", id, o.Amount, name)
		}).To("enriched", nil, serde.String())

	d, err := kstreamtest.New(b, kstream.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	c := kstreamtest.CreateInputTopic(d, "customers", serde.String(), serde.String())
	o := kstreamtest.CreateInputTopic(d, "orders", serde.String(), serde.JSON[order]())
	_ = c.Pipe("c1", "Ada")
	_ = o.Pipe("o1", order{"c1", 30})
	_ = o.Pipe("o2", order{"c2", 5})
	_ = c.Pipe("c2", "Grace")
	_ = o.Pipe("o3", order{"c2", 7})
	out, _ := kstreamtest.CreateOutputTopic(d, "enriched", serde.String(), serde.String()).ReadValues()
	for _, v := range out {
		fmt.Println(v)
	}
	// Output:
	// o1: 30 for Ada
	// o2: 5 for unknown customer c2
	// o3: 7 for Grace
}

// A table-table join, run on the test driver: each side's updates and deletes change the
// joined table, and a delete reaches the output topic as a null value.
func ExampleTableJoin() {
	b := kstream.NewBuilder()
	users := kstream.Table(b, "users", serde.String(), serde.String(), "users")
	emails := kstream.Table(b, "emails", serde.String(), serde.String(), "emails")
	kstream.TableJoin(users, emails, func(_, name, email string) string { return name + " <" + email + ">" }).
		ToStream().To("contacts", serde.String(), serde.String())

	d, err := kstreamtest.New(b, kstream.Config{ApplicationID: "contacts"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	u := kstreamtest.CreateInputTopic(d, "users", serde.String(), serde.String())
	e := kstreamtest.CreateInputTopic(d, "emails", serde.String(), serde.String())
	_ = u.Pipe("u1", "Ann")                       // no email yet: no output
	_ = e.Pipe("u1", "ann@x.org")                 // joined
	_ = u.Pipe("u1", "Annie")                     // joined again
	_ = e.PipeRaw([]byte("u1"), nil, time.Time{}) // email deleted: a delete of the contact
	out := kstreamtest.CreateOutputTopic(d, "contacts", serde.String(), serde.Nullable(serde.String()))
	recs, _ := out.ReadRecords()
	for _, r := range recs {
		if r.Value == nil {
			fmt.Println(r.Key, "deleted")
			continue
		}
		fmt.Println(r.Key, *r.Value)
	}
	// Output:
	// u1 Ann <ann@x.org>
	// u1 Annie <ann@x.org>
	// u1 deleted
}
