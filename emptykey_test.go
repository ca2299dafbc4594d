package kstream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/internal/partition"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/query"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The empty key "" (zero key bytes) is an ordinary key everywhere, as in Kafka Streams; only
// a null key (no key bytes at all) is null. These tests run on the in-process broker and, with
// KSTREAM_TEST_BROKERS, on Apache Kafka, whose compacted topics refuse null keys.

// emptyKeyRec is a record of topic with the empty key: a non-nil slice of length 0, which
// the Kafka protocol writes with length 0 (a null key has length -1).
func emptyKeyRec(topic, value string, ms int) *kgo.Record {
	r := rec(topic, "", value, ms)
	r.Key = []byte{}
	return r
}

// checkEmptyKeys fails unless every record of recs has a non-nil key, and at least one has the
// empty key: what a changelog or repartition topic written for key "" must hold.
func checkEmptyKeys(t *testing.T, what string, recs []*kgo.Record) {
	t.Helper()
	empty := 0
	for _, r := range recs {
		if r.Key == nil {
			t.Errorf("%s: a record with a null key at partition %d offset %d, want the empty key", what, r.Partition, r.Offset)
		} else if len(r.Key) == 0 {
			empty++
		}
	}
	if empty == 0 {
		t.Errorf("%s: no record with the empty key among %d", what, len(recs))
	}
}

// producedRecords is a franz-go hook that keeps a copy of every record the application's
// producer wrote successfully, by topic: what it sent to the repartition and FK join topics,
// which the application purges once consumed.
type producedRecords struct {
	mu   sync.Mutex
	recs map[string][]*kgo.Record
}

// OnProduceRecordUnbuffered implements kgo.HookProduceRecordUnbuffered.
func (p *producedRecords) OnProduceRecordUnbuffered(r *kgo.Record, err error) {
	if err != nil {
		return
	}
	c := &kgo.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
	if r.Key != nil {
		c.Key = append([]byte{}, r.Key...)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.recs == nil {
		p.recs = map[string][]*kgo.Record{}
	}
	p.recs[r.Topic] = append(p.recs[r.Topic], c)
}

// of returns the records written to topic.
func (p *producedRecords) of(topic string) []*kgo.Record {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.recs[topic])
}

// A count of the empty key survives a restore: an instance that restores the count store
// from its changelog (a fresh state directory) continues the count of "" where the first
// instance left it, and the changelog holds the empty key, not a null one (Apache Kafka
// refuses a null key in a compacted topic; a restore skips null keys).
func TestEmptyKeyCountRestored(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	cfg := testConfig(t)
	outputs := collect(t, out)

	r1 := start(t, newApp(t, countTopology(in, out), cfg))
	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs, emptyKeyRec(in, "v", i))
	}
	kafkatest.Produce(t, kafkatest.Client(t), recs...)
	kafkatest.Eventually(t, 60*time.Second, `count 10 of key ""`, func() bool { return outputs.reached(map[string]int64{"": 10}) })
	if err := r1.stop(); err != nil {
		t.Fatal(err)
	}
	checkEmptyKeys(t, "changelog", kafkatest.Drain(t, cfg.ApplicationID+"-counts-changelog", 300*time.Millisecond, 20*time.Second))
	checkEmptyKeys(t, "output", kafkatest.Drain(t, out, 300*time.Millisecond, 20*time.Second))

	// A second instance with an empty state directory restores the store.
	rc := &restoreCounter{}
	cfg.RestoreListener = rc
	cfg.StateDir = t.TempDir()
	app := newApp(t, countTopology(in, out), cfg)
	r2 := start(t, app)
	kafkatest.Eventually(t, 60*time.Second, "running", func() bool { return app.State() == kstream.StateRunning })
	if n := rc.total("counts"); n < 1 {
		t.Errorf("restored %d records of the count store, want at least 1", n)
	}
	kafkatest.Produce(t, kafkatest.Client(t), emptyKeyRec(in, "v", 10))
	kafkatest.Eventually(t, 60*time.Second, `count 11 of key ""`, func() bool {
		outputs.mu.Lock()
		defer outputs.mu.Unlock()
		return len(outputs.seqs[""]) >= 11
	})
	outputs.checkExact(t, map[string]int64{"": 11})
	if err := r2.stop(); err != nil {
		t.Fatal(err)
	}
}

// emptyKeyFKInput is a history of fkJoinTopology's inputs with an empty primary key (order
// "") and an empty foreign key (order o1 of customer ""), each joined as an ordinary key:
// the orders come first, so that the customers' rows answer subscriptions already stored
// (the right side's path), then changes on both sides (the left side's path).
var emptyKeyFKInput = []struct{ topic, key, value string }{
	{"orders", "", "c1|pen"},
	{"orders", "o1", "|book"},
	{"customers", "c1", "Ann"},
	{"customers", "", "Nobody"},
	{"customers", "", "Zed"},
	{"orders", "", "|pen2"},
	{"orders", "o1", "c1|book2"},
	{"customers", "c1", "Bob"},
	{"orders", "", "<delete>"},
}

// emptyKeyFKWant is the output of emptyKeyFKInput, in order per key: key=value, or key=<delete>
// for a tombstone.
var emptyKeyFKWant = map[string][]string{
	"":   {"pen@Ann", "pen2@Zed", "<delete>"},
	"o1": {"book@Nobody", "book@Zed", "book2@Ann", "book2@Bob"},
}

// The internal topics of fkJoinTopology, after the application id and a dash.
const (
	fkRegistrationTopic = "KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000004-topic"
	fkResponseTopic     = "KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000012-topic"
)

// A foreign-key join with the empty key on either side, on the test driver: the empty
// primary key and the empty foreign key join as any other key (Kafka Streams' String serde
// writes "" as zero bytes, not a null; only a null foreign key is dropped).
func TestEmptyKeyFKJoinOnDriver(t *testing.T) {
	d, err := kstreamtest.New(fkJoinTopology("orders", "customers", "out"), kstream.Config{ApplicationID: "fk"},
		kstreamtest.Partitions(3))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	ins := map[string]*kstreamtest.InputTopic[[]byte, []byte]{}
	for i, r := range emptyKeyFKInput {
		if ins[r.topic] == nil {
			ins[r.topic] = kstreamtest.CreateInputTopic(d, r.topic, serde.Bytes(), serde.Bytes())
		}
		v := []byte(r.value)
		if r.value == "<delete>" {
			v = nil
		}
		if err := ins[r.topic].PipeRaw([]byte(r.key), v, time.UnixMilli(int64(1000*(i+1)))); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := kstreamtest.CreateOutputTopic(d, "out", serde.Bytes(), serde.Bytes()).ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	var raw []*kgo.Record
	for _, r := range recs {
		if r.HasNullKey() {
			t.Errorf("output record with a null key: %q", r.Value)
		}
		raw = append(raw, &kgo.Record{Key: r.Key, Value: r.Value})
	}
	checkFKOutput(t, raw)
	// The subscriptions and the responses to them have the empty keys as empty keys too.
	for _, topic := range []string{"fk-" + fkRegistrationTopic, "fk-" + fkResponseTopic} {
		recs, err := kstreamtest.CreateOutputTopic(d, topic, serde.Bytes(), serde.Bytes()).ReadRecords()
		if err != nil {
			t.Fatal(err)
		}
		empty := 0
		for _, r := range recs {
			if r.HasNullKey() {
				t.Errorf("%s: a record with a null key", topic)
			} else if len(r.Key) == 0 {
				empty++
			}
		}
		if empty == 0 {
			t.Errorf("%s: no record with the empty key among %d", topic, len(recs))
		}
	}
	if n := d.DroppedRecords(); n != 0 {
		t.Errorf("%d dropped records, want 0", n)
	}
}

// checkFKOutput compares the output of emptyKeyFKInput with emptyKeyFKWant.
func checkFKOutput(t *testing.T, recs []*kgo.Record) {
	t.Helper()
	got := map[string][]string{}
	for _, r := range recs {
		v := string(r.Value)
		if r.Value == nil {
			v = "<delete>"
		}
		got[string(r.Key)] = append(got[string(r.Key)], v)
	}
	if !maps.EqualFunc(got, emptyKeyFKWant, slices.Equal) {
		t.Errorf("joined %q, want %q", got, emptyKeyFKWant)
	}
}

// GroupBy to the key "": the repartition topic carries the empty key (on the partition the
// Java producer gives it: murmur2 of zero bytes), the count of "" is exact, and the count's
// changelog and the output topic hold the empty key, not a null one.
func TestEmptyKeyGroupByRepartition(t *testing.T) {
	t.Parallel()
	const parts = 3
	in := kafkatest.CreateTopic(t, "in", parts, nil)
	out := kafkatest.CreateTopic(t, "out", parts, nil)
	cfg := testConfig(t)
	produced := &producedRecords{}
	cfg.ProducerOptions = []kgo.Opt{kgo.WithHooks(produced)}
	b := kstream.NewBuilder()
	byValue := kstream.GroupBy(kstream.Stream(b, in, serde.String(), serde.String()),
		func(_, v string) string { return v }, serde.String(), kstream.Named("by-value"))
	kstream.Count(byValue, "counts").ToStream().To(out, nil, nil)
	outputs := collect(t, out)
	start(t, newApp(t, b, cfg))

	var recs []*kgo.Record
	want := map[string]int64{}
	for i := range 30 {
		v := "x"
		if i%3 == 0 {
			v = "" // an empty value, regrouped to the empty key
		}
		want[v]++
		recs = append(recs, rec(in, fmt.Sprintf("k%d", i%5), v, i))
	}
	kafkatest.Produce(t, kafkatest.Client(t), recs...)
	kafkatest.Eventually(t, 60*time.Second, "the counts", func() bool { return outputs.reached(want) })
	outputs.checkExact(t, want)

	emptyPart := partition.ForKey([]byte{}, parts)
	repart := produced.of(cfg.ApplicationID + "-by-value-repartition")
	checkEmptyKeys(t, "repartition topic", repart)
	for _, r := range repart {
		if len(r.Key) == 0 && r.Partition != emptyPart {
			t.Errorf("repartition topic: the empty key on partition %d, want %d (murmur2 of zero bytes, as Java's producer)", r.Partition, emptyPart)
		}
	}
	checkEmptyKeys(t, "changelog", kafkatest.Drain(t, cfg.ApplicationID+"-counts-changelog", 300*time.Millisecond, 20*time.Second))
	checkEmptyKeys(t, "output", kafkatest.Drain(t, out, 300*time.Millisecond, 20*time.Second))
}

// A standby follows the count of "" (it applies the changelog's empty key, where it skipped
// the null key the changelog used to hold), and the instance that takes over from it when
// the active one leaves continues the count.
func TestEmptyKeyStandby(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	appID := kafkatest.Name(t, "app")
	outputs := collect(t, out)
	var apps []*kstream.App
	var runs []*running
	for i := range 2 {
		cfg := testConfig(t)
		cfg.ApplicationID = appID
		cfg.NumStandbys = 1
		cfg.ApplicationServer = fmt.Sprintf("host%d:80", i)
		app := newApp(t, countTopology(in, out), cfg)
		apps = append(apps, app)
		runs = append(runs, start(t, app))
	}
	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs, emptyKeyRec(in, "v", i))
	}
	kafkatest.Produce(t, kafkatest.Client(t), recs...)
	kafkatest.Eventually(t, 60*time.Second, `count 10 of key ""`, func() bool { return outputs.reached(map[string]int64{"": 10}) })

	// The instance with the standby of the single partition reads 10 from it.
	standby := -1
	kafkatest.Eventually(t, 60*time.Second, `the standby holding count 10 of key ""`, func() bool {
		for i, a := range apps {
			for _, lp := range a.LocalStorePartitions() {
				if lp.Store != "counts" || !lp.Standby {
					continue
				}
				st, err := kstream.QueryStore[string, int64](a, "counts", kstream.StaleStores(0))
				if err != nil {
					t.Fatal(err)
				}
				if n, ok, err := st.Get(""); err == nil && ok && n == 10 {
					standby = i
					return true
				}
			}
		}
		return false
	})
	// The active instance leaves; the standby's instance takes the task over and counts on.
	if err := runs[1-standby].stop(); err != nil {
		t.Fatal(err)
	}
	kafkatest.Produce(t, kafkatest.Client(t), emptyKeyRec(in, "v", 10))
	kafkatest.Eventually(t, 90*time.Second, `count 11 of key ""`, func() bool {
		outputs.mu.Lock()
		defer outputs.mu.Unlock()
		return len(outputs.seqs[""]) >= 11
	})
	outputs.checkExact(t, map[string]int64{"": 11})
}

// A global table holds the empty key: a stream joins it through a key function that
// returns "", the store answers a query of "", and an instance bootstrapping the table
// from its topic (an empty state directory) has it too. The record with a null key is
// skipped, as ever.
func TestEmptyKeyGlobalTable(t *testing.T) {
	t.Parallel()
	gt := kafkatest.CreateTopic(t, "global", 2, nil)
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	null := rec(gt, "", "null-key", 0)
	null.Key = nil
	kafkatest.Produce(t, kafkatest.Client(t), emptyKeyRec(gt, "empty", 0), rec(gt, "a", "A", 0), null)
	topology := func() *kstream.Builder {
		b := kstream.NewBuilder()
		g := kstream.GlobalTable(b, gt, serde.String(), serde.String(), "global-store")
		kstream.LeftJoinGlobal(kstream.Stream(b, in, serde.String(), serde.String()), g,
			func(_, v string) string { return v },
			func(_, v, gv string, found bool) string {
				if !found {
					return v + "=<none>"
				}
				return v + "=" + gv
			}).To(out, nil, nil)
		return b
	}
	cfg := testConfig(t)
	for round := range 2 {
		cfg.StateDir = t.TempDir() // each instance bootstraps the table from its topic
		app := newApp(t, topology(), cfg)
		r := start(t, app)
		st, err := kstream.QueryStore[string, string](app, "global-store")
		if err != nil {
			t.Fatal(err)
		}
		kafkatest.Eventually(t, 60*time.Second, `the global store holding key ""`, func() bool {
			v, ok, err := st.Get("")
			return err == nil && ok && v == "empty"
		})
		var keys []string
		if err := st.All(func(k, _ string) bool { keys = append(keys, k); return true }); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(keys, []string{"", "a"}) {
			t.Errorf("round %d: global store keys %q, want \"\" and a", round, keys)
		}
		kafkatest.Produce(t, kafkatest.Client(t), rec(in, "s", "", round), rec(in, "s", "a", round))
		joined := kafkatest.Consume(t, out, 2*(round+1), 30*time.Second)
		var got []string
		for _, r := range joined[2*round:] {
			got = append(got, string(r.Value))
		}
		if want := []string{"=empty", "a=A"}; !slices.Equal(got, want) {
			t.Errorf("round %d: joined %q, want %q", round, got, want)
		}
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
	}
}

// A foreign-key join with the empty key on either side, on a broker: as on the test driver
// (TestEmptyKeyFKJoinOnDriver), step by step, so that the customers' rows answer
// subscriptions already stored; the registration and response topics hold the empty keys
// as empty keys.
func TestEmptyKeyFKJoinOnBroker(t *testing.T) {
	t.Parallel()
	orders := kafkatest.CreateTopic(t, "orders", 3, nil)
	customers := kafkatest.CreateTopic(t, "customers", 2, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	cfg := testConfig(t)
	produced := &producedRecords{}
	cfg.ProducerOptions = []kgo.Opt{kgo.WithHooks(produced)}
	start(t, newApp(t, fkJoinTopology(orders, customers, out), cfg))
	cl := kafkatest.Client(t)
	produce := func(recs ...struct{ topic, key, value string }) {
		for _, r := range recs {
			topic := map[string]string{"orders": orders, "customers": customers}[r.topic]
			kr := emptyKeyRec(topic, r.value, 0)
			kr.Key = append(kr.Key, r.key...)
			if r.value == "<delete>" {
				kr.Value = nil
			}
			kafkatest.Produce(t, cl, kr)
		}
	}
	reg := cfg.ApplicationID + "-" + fkRegistrationTopic
	produce(emptyKeyFKInput[:2]...)
	kafkatest.Eventually(t, 60*time.Second, "the subscriptions of both orders received", func() bool {
		n := int64(0)
		for _, end := range endOffsets(t, reg) {
			n += end
		}
		return n == 2 && committedAll(t, cfg.ApplicationID, reg)
	})
	// Then the rest, waiting after each step for its outputs (counted in emptyKeyFKWant's
	// order: 2, 1, 2, 1, 1), so that each one's order is the driver's.
	outputs := 0
	for _, step := range []struct{ from, to, outputs int }{{2, 4, 2}, {4, 5, 1}, {5, 7, 2}, {7, 8, 1}, {8, 9, 1}} {
		produce(emptyKeyFKInput[step.from:step.to]...)
		outputs += step.outputs
		kafkatest.Consume(t, out, outputs, 60*time.Second)
	}
	recs := kafkatest.Drain(t, out, 500*time.Millisecond, 20*time.Second)
	for _, r := range recs {
		if r.Key == nil {
			t.Errorf("output: a record with a null key: %q", r.Value)
		}
	}
	checkFKOutput(t, recs)
	checkEmptyKeys(t, "registration topic", produced.of(reg))
	checkEmptyKeys(t, "response topic", produced.of(cfg.ApplicationID+"-"+fkResponseTopic))
}

// Interactive queries of the empty key: the typed store gets, ranges over and locates key
// "" (on the partition of zero key bytes); a raw scan returns it as an empty key, not nil;
// the query server answers ?key="" and lists the key as "" (not null), also one entry per
// page (the cursor after "" is not the end).
func TestEmptyKeyQuery(t *testing.T) {
	t.Parallel()
	const parts = 2
	in := kafkatest.CreateTopic(t, "in", parts, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.ApplicationServer = ln.Addr().String()
	b := kstream.NewBuilder()
	kstream.Count(kstream.GroupBy(kstream.Stream(b, in, serde.String(), serde.String()),
		func(_, v string) string { return v }, serde.String()), "counts")
	app := newApp(t, b, cfg)
	start(t, app)
	srv := query.NewServer(query.Config{App: app, Logger: testLogger(t)})
	ctx := kafkatest.Context(t, 2*time.Minute)
	srvDone := make(chan error, 1)
	sctx, stopServer := context.WithCancel(ctx)
	go func() { srvDone <- srv.Serve(sctx, ln, nil) }()
	t.Cleanup(func() { stopServer(); <-srvDone })

	want := map[string]int64{"": 3, "a": 2, "b": 1}
	var recs []*kgo.Record
	for k, n := range want {
		for i := range n {
			recs = append(recs, rec(in, fmt.Sprintf("k%d", i), k, int(i)))
		}
	}
	kafkatest.Produce(t, kafkatest.Client(t), recs...)
	st, err := kstream.QueryStore[string, int64](app, "counts")
	if err != nil {
		t.Fatal(err)
	}
	kafkatest.Eventually(t, 60*time.Second, "every count queryable", func() bool {
		for k, n := range want {
			if got, ok, err := st.Get(k); err != nil || !ok || got != n {
				return false
			}
		}
		return true
	})
	var keys []string
	if err := st.All(func(k string, _ int64) bool { keys = append(keys, k); return true }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys, []string{"", "a", "b"}) {
		t.Errorf("All: keys %q, want \"\", a, b", keys)
	}
	keys = nil
	if err := st.Range("", "a", func(k string, _ int64) bool { keys = append(keys, k); return true }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys, []string{"", "a"}) {
		t.Errorf(`Range("", "a"): keys %q, want "" and a`, keys)
	}
	if km, err := app.KeyMetadata("counts", ""); err != nil || km.Partition != partition.ForKey([]byte{}, parts) {
		t.Errorf(`KeyMetadata(""): %+v, %v; want partition %d`, km, err, partition.ForKey([]byte{}, parts))
	}
	raw, err := app.RawStore("counts")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := raw.Scan(nil, nil, false, func(e kstream.RawEntry) bool {
		if len(e.Key) == 0 {
			n++
			if e.Key == nil {
				t.Errorf("RawStore.Scan: the empty key as nil, a null key")
			}
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("RawStore.Scan: the empty key %d times, want once", n)
	}

	// The query server.
	base := "http://" + ln.Addr().String() + "/v1/stores/counts/"
	httpGet := func(path string, out any) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s: %s", path, resp.Status, body)
		}
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("GET %s: %v: %s", path, err, body)
		}
	}
	var e query.Entry
	httpGet("keys?key="+url.QueryEscape(`""`), &e)
	if string(e.Key) != `""` || string(e.Value) != "3" {
		t.Errorf(`GET keys?key="": key %s value %s, want "" and 3`, e.Key, e.Value)
	}
	var page query.Page
	httpGet("all", &page)
	if len(page.Entries) != 3 || string(page.Entries[0].Key) != `""` {
		t.Errorf(`GET all: %d entries, the first with key %s; want 3, the first "" (not null)`, len(page.Entries), page.Entries[0].Key)
	}
	// One entry per page: the first page ends at "", and its cursor leads on.
	var got []string
	for cursor, pages := "", 0; pages < 10; pages++ {
		page = query.Page{}
		httpGet("all?limit=1&cursor="+url.QueryEscape(cursor), &page)
		for _, en := range page.Entries {
			got = append(got, string(en.Key))
		}
		if cursor = page.Cursor; cursor == "" {
			break
		}
	}
	if !slices.Equal(got, []string{`""`, `"a"`, `"b"`}) {
		t.Errorf("GET all, one entry per page: keys %q, want \"\", a, b", got)
	}
	typed, err := query.StoreOf[string, int64](query.NewClient("http://"+ln.Addr().String()), "counts").All(ctx, query.PageSize(1))
	if err != nil || len(typed) != 3 || typed[0].Key != "" || typed[0].Value != 3 {
		t.Errorf("query.Client All, one entry per page: %+v, %v; want 3 keys, the first \"\" = 3", typed, err)
	}
}

// A suppression buffer keeps the empty key across a restore: the count of "" buffered by
// UntilTimeLimit is restored from the buffer's changelog into an empty state directory and
// emitted when stream time passes its limit.
func TestEmptyKeySuppressionBufferRestored(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	topology := func() *kstream.Builder {
		b := kstream.NewBuilder()
		kstream.Count(kstream.Stream(b, in, serde.String(), serde.String()).GroupByKey(), "counts").
			Suppress(kstream.UntilTimeLimit(10*time.Second, kstream.Unbounded()).WithName("sup")).
			ToStream().To(out, nil, nil)
		return b
	}
	cfg := testConfig(t)
	r1 := start(t, newApp(t, topology(), cfg))
	kafkatest.Produce(t, kafkatest.Client(t), emptyKeyRec(in, "v", 0), emptyKeyRec(in, "v", 1000))
	kafkatest.Eventually(t, 60*time.Second, "the input committed", func() bool { return committedAll(t, cfg.ApplicationID, in) })
	if err := r1.stop(); err != nil {
		t.Fatal(err)
	}
	checkEmptyKeys(t, "suppression changelog", kafkatest.Drain(t, cfg.ApplicationID+"-sup-store-changelog", 300*time.Millisecond, 20*time.Second))

	cfg.StateDir = t.TempDir()
	start(t, newApp(t, topology(), cfg))
	kafkatest.Produce(t, kafkatest.Client(t), rec(in, "z", "v", 20000)) // stream time 20 s: "" (buffered at 1 s) is due
	recs := kafkatest.Consume(t, out, 1, 60*time.Second)
	if n, _ := serde.Int64().Deserialize(recs[0].Value); recs[0].Key == nil || len(recs[0].Key) != 0 || n != 2 {
		t.Errorf("emitted key %q (null %v) = %d, want the empty key = 2", recs[0].Key, recs[0].Key == nil, n)
	}
}
