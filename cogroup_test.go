package kstream_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
)

// cogroupStats is the aggregate of TestCogroupOnBrokerExactlyOnce: a user's clicks (from
// one topic) and the total of their orders (from another, re-keyed by user).
type cogroupStats struct {
	Clicks int64 `json:"clicks"`
	Orders int64 `json:"orders"`
	Total  int64 `json:"total"`
}

// A cogroup of two topics on the broker, exactly-once: clicks keyed by user, and orders
// keyed by order id whose value names the user (grouped by user through a repartition
// topic), aggregated into one store. Every record makes one update of its user's row, so
// that, read read_committed, the n-th update of a user has aggregated exactly n records, and
// the last one is the final table. The application then restarts with an empty state
// directory, restores the shared store from its changelog and goes on from there.
func TestCogroupOnBrokerExactlyOnce(t *testing.T) {
	t.Parallel()
	clicks := kafkatest.CreateTopic(t, "clicks", 2, nil)
	orders := kafkatest.CreateTopic(t, "orders", 2, nil)
	out := kafkatest.CreateTopic(t, "stats", 2, nil)

	build := func() *kstream.Builder {
		b := kstream.NewBuilder()
		c := kstream.Stream(b, clicks, serde.String(), serde.String()).GroupByKey()
		o := kstream.GroupBy(kstream.Stream(b, orders, serde.String(), serde.String()),
			func(_, v string) string { user, _, _ := strings.Cut(v, ":"); return user }, serde.String())
		cg := kstream.Cogroup(c, func(_, _ string, s cogroupStats) cogroupStats { s.Clicks++; return s })
		cg = kstream.CogroupWith(cg, o, func(_, v string, s cogroupStats) cogroupStats {
			_, amount, _ := strings.Cut(v, ":")
			n, err := strconv.ParseInt(amount, 10, 64)
			if err != nil {
				panic(fmt.Sprintf("bad order %q", v)) // the test's own input: cannot happen
			}
			s.Orders++
			s.Total += n
			return s
		})
		table := cg.Aggregate(func() cogroupStats { return cogroupStats{} }, serde.JSON[cogroupStats](), "user-stats")
		kstream.MapValues(table.ToStream(), func(s cogroupStats) string {
			return fmt.Sprintf("%d/%d/%d", s.Clicks, s.Orders, s.Total)
		}).To(out, serde.String(), serde.String())
		return b
	}

	cfg := testConfig(t)
	cfg.StateDir = t.TempDir()
	cfg.Guarantee = kstream.ExactlyOnce
	r := start(t, newApp(t, build(), cfg))
	kafkatest.Eventually(t, 60*time.Second, "running", func() bool { return r.app.State() == kstream.StateRunning })

	const users, clicksPerUser, ordersPerUser = 5, 12, 8
	want := map[string]cogroupStats{}
	var recs []*kgo.Record
	for i := range users * clicksPerUser {
		u := "u" + strconv.Itoa(i%users)
		recs = append(recs, rec(clicks, u, "c", i))
		s := want[u]
		s.Clicks++
		want[u] = s
	}
	for i := range users * ordersPerUser {
		u := "u" + strconv.Itoa(i%users)
		recs = append(recs, rec(orders, "o"+strconv.Itoa(i), u+":"+strconv.Itoa(i+1), 1000+i))
		s := want[u]
		s.Orders++
		s.Total += int64(i + 1)
		want[u] = s
	}
	cl := kafkatest.Client(t)
	kafkatest.Produce(t, cl, recs...)

	check := func(n int) {
		t.Helper()
		kafkatest.Consume(t, out, n, 90*time.Second, readCommitted)
		got := kafkatest.Drain(t, out, time.Second, 30*time.Second, readCommitted)
		if len(got) != n {
			t.Fatalf("topic %s: %d updates, want %d (one per input record)", out, len(got), n)
		}
		updates := map[string][]string{}
		for _, r := range got {
			updates[string(r.Key)] = append(updates[string(r.Key)], string(r.Value))
		}
		if len(updates) != users {
			t.Errorf("updates of %d users, want %d: %v", len(updates), users, updates)
		}
		for u, vs := range updates {
			for i, v := range vs {
				var c, o, total int64
				if _, err := fmt.Sscanf(v, "%d/%d/%d", &c, &o, &total); err != nil {
					t.Fatalf("user %s: update %q: %v", u, v, err)
				}
				if c+o != int64(i+1) {
					t.Errorf("user %s: update %d is %q: %d records aggregated, want %d (updates %v)", u, i+1, v, c+o, i+1, vs)
					break
				}
			}
			w := want[u]
			if last, wantLast := vs[len(vs)-1], fmt.Sprintf("%d/%d/%d", w.Clicks, w.Orders, w.Total); last != wantLast {
				t.Errorf("user %s: final row %q, want %q", u, last, wantLast)
			}
		}
	}
	check(users * (clicksPerUser + ordersPerUser))

	// Restart with an empty state directory: the store is restored from its changelog.
	if err := r.stop(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("stopping the app: %v", err)
	}
	cfg.StateDir = t.TempDir()
	r = start(t, newApp(t, build(), cfg))
	kafkatest.Eventually(t, 60*time.Second, "running again", func() bool { return r.app.State() == kstream.StateRunning })
	recs = recs[:0]
	for i := range users {
		u := "u" + strconv.Itoa(i)
		recs = append(recs, rec(clicks, u, "c", 5000+i), rec(orders, "late"+strconv.Itoa(i), u+":1000", 5000+i))
		s := want[u]
		s.Clicks++
		s.Orders++
		s.Total += 1000
		want[u] = s
	}
	kafkatest.Produce(t, cl, recs...)
	check(users * (clicksPerUser + ordersPerUser + 2))
}

// The topologies that Kafka Streams refuses, refused at Build: two streams that must be
// repartitioned and whose groupings have no names (both topics would be named after the
// store), a missing initializer, and streams of two builders.
func TestCogroupBuildErrors(t *testing.T) {
	cases := []struct {
		name  string
		build func(b *kstream.Builder)
		want  string
	}{
		{"two unnamed repartitions", func(b *kstream.Builder) {
			g1 := kstream.GroupBy(kstream.Stream(b, "a", serde.String(), serde.String()), func(_, v string) string { return v }, serde.String())
			g2 := kstream.GroupBy(kstream.Stream(b, "b", serde.String(), serde.String()), func(_, v string) string { return v }, serde.String())
			c := kstream.CogroupWith(kstream.Cogroup(g1, cgAppend), g2, cgAppend)
			c.Aggregate(func() string { return "" }, serde.String(), "st")
		}, `operator name "st-repartition-filter" is used twice`},
		{"nil initializer", func(b *kstream.Builder) {
			g := kstream.Stream(b, "a", serde.String(), serde.String()).GroupByKey()
			kstream.Cogroup(g, cgAppend).Aggregate(nil, serde.String(), "st")
		}, "the initializer is nil"},
		{"two builders", func(b *kstream.Builder) {
			g1 := kstream.Stream(b, "a", serde.String(), serde.String()).GroupByKey()
			g2 := kstream.Stream(kstream.NewBuilder(), "b", serde.String(), serde.String()).GroupByKey()
			kstream.CogroupWith(kstream.Cogroup(g1, cgAppend), g2, cgAppend).Aggregate(func() string { return "" }, serde.String(), "st")
		}, "another builder"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := kstream.NewBuilder()
			c.build(b)
			_, err := b.Build()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Build: %v, want an error with %q", err, c.want)
			}
		})
	}
}

// Cogrouping a grouped stream again replaces its aggregator (Kafka Streams keeps its
// grouped streams in a map), and leaves the cogroup it was given as it was.
func TestCogroupSameStreamReplaces(t *testing.T) {
	b := kstream.NewBuilder()
	g := kstream.Stream(b, "a", serde.String(), serde.String()).GroupByKey()
	first := kstream.Cogroup(g, cgAppend)
	second := kstream.CogroupWith(first, g, func(_, v, acc string) string { return acc + "!" + v })
	second.Aggregate(func() string { return "" }, serde.String(), "st").ToStream().To("out2", serde.String(), serde.String())
	first.Named("first").Aggregate(func() string { return "" }, serde.String(), "st1").ToStream().To("out1", serde.String(), serde.String())
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	desc := topo.Describe()
	d, err := kstreamtest.New(b, kstream.Config{ApplicationID: "cogroup"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// One aggregation per grouped stream: COGROUPKSTREAM-AGGREGATE-0000000001 and its merge,
	// then the named cogroup's.
	for _, want := range []string{
		"Processor: COGROUPKSTREAM-MERGE-0000000002 (stores: [])\n      --> KTABLE-TOSTREAM-0000000003\n      <-- COGROUPKSTREAM-AGGREGATE-0000000001\n",
		"Processor: first-cogroup-merge (stores: [])\n      --> KTABLE-TOSTREAM-0000000007\n      <-- first-cogroup-agg-0\n",
	} {
		if !strings.Contains(desc, want) {
			t.Errorf("Describe has no %q:\n%s", want, desc)
		}
	}
	in := kstreamtest.CreateInputTopic(d, "a", serde.String(), serde.String())
	for _, v := range []string{"x", "y"} {
		if err := in.Pipe("k", v); err != nil {
			t.Fatal(err)
		}
	}
	for topic, want := range map[string][]string{"out1": {",x", ",x,y"}, "out2": {"!x", "!x!y"}} {
		out := kstreamtest.CreateOutputTopic(d, topic, serde.String(), serde.String())
		var got []string
		for !out.IsEmpty() {
			r, err := out.ReadRecord()
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, r.Value)
		}
		if !slices.Equal(got, want) {
			t.Errorf("topic %s: %q, want %q", topic, got, want)
		}
	}
}

func cgAppend(_, v, acc string) string { return acc + "," + v }

// Clicks and purchases of each user, two streams of different value types, aggregated into
// one table by a cogroup.
func ExampleCogroup() {
	type activity struct {
		Clicks int
		Spent  float64
	}
	b := kstream.NewBuilder()
	clicks := kstream.Stream(b, "clicks", serde.String(), serde.String()).GroupByKey()        // user -> page
	purchases := kstream.Stream(b, "purchases", serde.String(), serde.Float64()).GroupByKey() // user -> amount
	c := kstream.Cogroup(clicks, func(_, _ string, a activity) activity { a.Clicks++; return a })
	c = kstream.CogroupWith(c, purchases, func(_ string, amount float64, a activity) activity { a.Spent += amount; return a })
	c.Aggregate(func() activity { return activity{} }, serde.JSON[activity](), "activity").
		ToStream().To("activity", serde.String(), serde.JSON[activity]())

	d, err := kstreamtest.New(b, kstream.Config{ApplicationID: "activity"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	cl := kstreamtest.CreateInputTopic(d, "clicks", serde.String(), serde.String())
	pu := kstreamtest.CreateInputTopic(d, "purchases", serde.String(), serde.Float64())
	_ = cl.Pipe("ann", "/home")
	_ = cl.Pipe("ann", "/shoes")
	_ = pu.Pipe("ann", 59.9)
	_ = cl.Pipe("bob", "/home")
	out := kstreamtest.CreateOutputTopic(d, "activity", serde.String(), serde.JSON[activity]())
	recs, _ := out.ReadRecords()
	for _, r := range recs {
		fmt.Printf("%s clicks=%d spent=%.2f\n", r.Key, r.Value.Clicks, r.Value.Spent)
	}
	// Output:
	// ann clicks=1 spent=0.00
	// ann clicks=2 spent=0.00
	// ann clicks=2 spent=59.90
	// bob clicks=1 spent=0.00
}

// The records a cogroup drops are counted once each, by the operator of their stream: null
// keys and null values without windows; null keys and late records over time windows, late
// as each stream's own operator sees it (a record late for one stream's stream time is not
// for another's).
func TestCogroupDroppedRecords(t *testing.T) {
	type in struct {
		topic, key, value string // "-": a Kafka null
		ms                int
	}
	input := []in{
		{"a", "k", "1", 1000}, {"b", "k", "2", 2000}, {"a", "k", "-", 3000}, {"b", "-", "3", 4000},
		{"a", "k", "4", 30000}, // a's stream time 30s: a's windows before [10s, 20s) closed
		{"b", "k", "5", 5000},  // on time for b (its stream time is 5s)
		{"a", "k", "6", 6000},  // late for a
		{"b", "k", "-", 7000},
	}
	for _, c := range []struct {
		name     string
		windowed bool
		want     []string
		dropped  int64
	}{
		// Without windows: the null value of a, the null key and the null value of b.
		{"aggregate", false, []string{"k=,a1", "k=,a1,b2", "k=,a1,b2,a4", "k=,a1,b2,a4,b5", "k=,a1,b2,a4,b5,a6"}, 3},
		// Tumbling windows of 10s, no grace: the null key of b and a's late record (null
		// values are aggregated over time windows, as in Kafka Streams).
		{"windowed", true, []string{"k@0=,a1", "k@0=,a1,b2", "k@0=,a1,b2,a", "k@30000=,a4", "k@0=,a1,b2,a,b5", "k@0=,a1,b2,a,b5,b"}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := kstream.NewBuilder()
			agg := func(tag string) func(_, v, acc string) string {
				return func(_, v, acc string) string { return acc + "," + tag + v }
			}
			cg := kstream.CogroupWith(kstream.Cogroup(kstream.Stream(b, "a", serde.String(), serde.String()).GroupByKey(), agg("a")),
				kstream.Stream(b, "b", serde.String(), serde.String()).GroupByKey(), agg("b"))
			if c.windowed {
				// Retained for a minute, so that window [0s, 10s) is still in the store when b
				// updates it after a closed it.
				t := cg.WindowedBy(kstream.TimeWindowsOf(10*time.Second)).
					Aggregate(func() string { return "" }, serde.String(), "st", kstream.WithRetention(time.Minute))
				kstream.Map(t.ToStream(), func(k serde.Windowed[string], v string) (string, string) {
					return k.Key + "@" + strconv.FormatInt(k.StartMs()-baseTime.UnixMilli(), 10), v
				}).To("out", serde.String(), serde.String())
			} else {
				cg.Aggregate(func() string { return "" }, serde.String(), "st").ToStream().To("out", serde.String(), serde.String())
			}
			d, err := kstreamtest.New(b, kstream.Config{ApplicationID: "cogroup"})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			topics := map[string]*kstreamtest.InputTopic[string, string]{
				"a": kstreamtest.CreateInputTopic(d, "a", serde.String(), serde.String()),
				"b": kstreamtest.CreateInputTopic(d, "b", serde.String(), serde.String()),
			}
			for _, r := range input {
				var k, v []byte
				if r.key != "-" {
					k = []byte(r.key)
				}
				if r.value != "-" {
					v = []byte(r.value)
				}
				if err := topics[r.topic].PipeRaw(k, v, baseTime.Add(time.Duration(r.ms)*time.Millisecond)); err != nil {
					t.Fatal(err)
				}
			}
			out := kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.String())
			var got []string
			for !out.IsEmpty() {
				r, err := out.ReadRecord()
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, r.Key+"="+r.Value)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("output\n got  %q\n want %q", got, c.want)
			}
			if n := d.DroppedRecords(); n != c.dropped {
				t.Errorf("%d records dropped, want %d", n, c.dropped)
			}
		})
	}
}

// A session cogroup of two topics on the broker, exactly-once, step by step: sessions merge
// across the streams (with a tombstone for each session merged away), and each stream's
// operator judges lateness by its own stream time (step 4 is late for clicks' stream time,
// not for views').
func TestCogroupSessionsOnBroker(t *testing.T) {
	t.Parallel()
	clicks := kafkatest.CreateTopic(t, "clicks", 1, nil)
	views := kafkatest.CreateTopic(t, "views", 1, nil)
	out := kafkatest.CreateTopic(t, "sessions", 1, nil)

	b := kstream.NewBuilder()
	c := kstream.Cogroup(kstream.Stream(b, clicks, serde.String(), serde.String()).GroupByKey(), cgAppend)
	c = kstream.CogroupWith(c, kstream.Stream(b, views, serde.String(), serde.String()).GroupByKey(), cgAppend)
	sessions := c.WindowedBySession(kstream.SessionWindowsOf(5*time.Second)).
		// Retained for a minute: with the default retention (the gap), the store would drop
		// step 4's session, which ends more than a gap before the store's time (20s), as
		// Kafka Streams' segmented stores drop writes to expired segments.
		Aggregate(func() string { return "" }, func(_, a, b string) string { return a + b }, serde.String(), "sessions",
			kstream.WithRetention(time.Minute))
	kstream.Map(sessions.ToStream(), func(k serde.Windowed[string], v string) (string, *string) {
		key := fmt.Sprintf("%s@%d/%d", k.Key, k.StartMs()-baseTime.UnixMilli(), k.EndMs()-baseTime.UnixMilli())
		if v == "" {
			return key, nil // a session merged away
		}
		return key, &v
	}).To(out, serde.String(), serde.Nullable(serde.String()))

	cfg := testConfig(t)
	cfg.StateDir = t.TempDir()
	cfg.Guarantee = kstream.ExactlyOnce
	r := start(t, newApp(t, b, cfg))
	kafkatest.Eventually(t, 60*time.Second, "running", func() bool { return r.app.State() == kstream.StateRunning })
	cl := kafkatest.Client(t)
	steps := []struct {
		r    *kgo.Record
		want []string
	}{
		{rec(clicks, "u", "c1", 1000), []string{"u@1000/1000=,c1"}},
		{rec(views, "u", "v1", 3000), []string{"u@1000/1000=<nil>", "u@1000/3000=,c1,v1"}},
		{rec(clicks, "u", "c2", 20000), []string{"u@20000/20000=,c2"}},
		{rec(views, "u", "v2", 12000), []string{"u@12000/12000=,v2"}},
		{rec(clicks, "u", "c3", 16000), []string{"u@12000/12000=<nil>", "u@20000/20000=<nil>", "u@12000/20000=,v2,c2,c3"}},
	}
	var want []string
	for _, s := range steps {
		kafkatest.Produce(t, cl, s.r)
		want = append(want, s.want...)
		kafkatest.Consume(t, out, len(want), 60*time.Second, readCommitted)
	}
	var got []string
	for _, r := range kafkatest.Drain(t, out, time.Second, 30*time.Second, readCommitted) {
		v := "<nil>"
		if r.Value != nil {
			v = string(r.Value)
		}
		got = append(got, string(r.Key)+"="+v)
	}
	if !slices.Equal(got, want) {
		t.Errorf("sessions:\n got  %q\n want %q", got, want)
	}
}
