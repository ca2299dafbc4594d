package kstream_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/serde/avro"
	"github.com/kstream-go/kstream/serde/registry"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

// EnvTestRegistry names a real Confluent-compatible registry's base URL for the tests that
// can run on one (testing/registry/registry.sh starts one); EnvRegistryScript names
// registry.sh itself, for TestRealRegistryRestart, which restarts that registry.
const (
	EnvTestRegistry   = "KSTREAM_TEST_REGISTRY"
	EnvRegistryScript = "KSTREAM_TEST_REGISTRY_SH"
)

type avroOrder struct {
	ID     string `avro:"id"`
	Amount int64  `avro:"amount"`
}

const avroOrderSchema = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"string"},{"name":"amount","type":"long"}]}`

// A topology reads and writes Avro values in the Confluent wire format: the application binds
// the registry serde to each topic it is used with, so that its subjects are named as a
// Kafka Streams application's (TopicNameStrategy): "<source>-value", "<sink>-value", and
// "<application.id>-<name>-repartition-value" for a repartition topic,
// "<application.id>-<store>-changelog-value" for a store. A record without the
// magic byte goes to the deserialization error handler, which names the topic, partition
// and offset, and the subject.
//
// With KSTREAM_TEST_REGISTRY set (see docs/testing.md), it runs on that real registry rather
// than the fake; its topics, and so its subjects, are unique to the run.
func TestRegistrySerdesThroughTopology(t *testing.T) {
	url := os.Getenv(EnvTestRegistry)
	if url == "" {
		fake := srfake.New()
		t.Cleanup(fake.Close)
		url = fake.URL()
	}
	rc := registryClient(t, url)
	subjectExists := func(subject string) bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := rc.SR().SubjectVersions(ctx, subject)
		return err == nil
	}
	orders, err := avro.New[avroOrder](rc, avroOrderSchema, registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	in := kafkatest.CreateTopic(t, "orders", 2, nil)
	out := kafkatest.CreateTopic(t, "big-orders", 2, nil)

	b := kstream.NewBuilder()
	big := kstream.Stream(b, in, serde.String(), orders).
		Filter(func(_ string, o avroOrder) bool { return o.Amount >= 10 }).
		Repartition("by-id")
	big.To(out, nil, nil)
	// A store of Avro values: its serdes bind to its changelog topic.
	kstream.Reduce(big.GroupByKey(), func(_, o avroOrder) avroOrder { return o }, "last-order")
	cfg := testConfig(t)
	var mu sync.Mutex
	var bad []kstream.ErrorContext
	cfg.DeserializationErrorHandler = kstream.ErrorHandlerFunc(func(ec kstream.ErrorContext) kstream.ErrorResponse {
		mu.Lock()
		bad = append(bad, ec)
		mu.Unlock()
		return kstream.Continue()
	})
	start(t, newApp(t, b, cfg))

	write := orders.Bind(in, false)
	var recs []*kgo.Record
	for i, amount := range []int64{5, 12, 30, 7, 99} {
		v, err := write.Serialize(avroOrder{ID: string(rune('a' + i)), Amount: amount})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: in, Key: []byte{byte('a' + i)}, Value: v})
	}
	recs = append(recs, &kgo.Record{Topic: in, Key: []byte("x"), Value: []byte("not avro")})
	kafkatest.Produce(t, kafkatest.ManualProducer(t), recs...)

	got := map[string]int64{}
	for _, r := range kafkatest.Consume(t, out, 3, 60*time.Second) {
		o, err := orders.Deserialize(r.Value)
		if err != nil {
			t.Fatalf("output record at offset %d: %v", r.Offset, err)
		}
		got[o.ID] = o.Amount
	}
	if want := map[string]int64{"b": 12, "c": 30, "e": 99}; len(got) != len(want) || got["b"] != 12 || got["c"] != 30 || got["e"] != 99 {
		t.Errorf("output %v, want %v", got, want)
	}
	kafkatest.Eventually(t, 30*time.Second, "the store's changelog subject", func() bool {
		return subjectExists(cfg.ApplicationID + "-last-order-changelog-value")
	})
	for _, subject := range []string{in + "-value", out + "-value", cfg.ApplicationID + "-by-id-repartition-value"} {
		if !subjectExists(subject) {
			t.Errorf("subject %q not registered", subject)
		}
	}
	kafkatest.Eventually(t, 30*time.Second, "the bad record reported", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(bad) == 1
	})
	mu.Lock()
	defer mu.Unlock()
	ec := bad[0]
	if ec.Topic != in || ec.Offset < 0 || !errors.Is(ec.Err, registry.ErrNoMagicByte) {
		t.Errorf("bad record reported as %+v, want topic %s, an offset and ErrNoMagicByte", ec, in)
	}
}

// A registry outage while the application runs is weather: a record whose schema id the
// application has not seen yet waits (its task retries the registry with backoff) until
// the registry answers again, then goes on. No record is lost, none goes to the error
// handler or a dead-letter topic.
func TestRegistryOutageLosesNothing(t *testing.T) {
	srv, down, refused := flakyRegistry(t)
	// The records' schema is registered (by their producer) while the registry is up; the
	// application has not read it yet when the registry goes down.
	in, out, _, _, handled, write := runAmounts(t, srv.URL, registry.Retry{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}, kstream.Continue())
	var recs []*kgo.Record
	for i := range 20 {
		v, err := write.Serialize(avroOrder{ID: fmt.Sprint(i), Amount: int64(i)})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: in, Key: []byte(fmt.Sprint(i)), Value: v})
	}
	down.Store(true)
	kafkatest.Produce(t, kafkatest.ManualProducer(t), recs...)
	kafkatest.Eventually(t, 30*time.Second, "the application asking the registry that is down, several times", func() bool { return refused.Load() >= 3 })
	down.Store(false)
	got := kafkatest.Consume(t, out, 20, 60*time.Second)
	for i, r := range got {
		if n, _ := serde.Int64().Deserialize(r.Value); n != int64(i) || string(r.Key) != fmt.Sprint(i) {
			t.Errorf("output %d: %s=%d, want %d=%d", i, r.Key, n, i, i)
		}
	}
	if n := handled.Load(); n != 0 {
		t.Errorf("%d records went to the deserialization error handler during the outage", n)
	}
}

func registryClient(t *testing.T, url string) *registry.Client {
	t.Helper()
	rc, err := registry.NewClient(registry.Config{URLs: []string{url}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	return rc
}

// The real registry (KSTREAM_TEST_REGISTRY, started by testing/registry/registry.sh, named
// by KSTREAM_TEST_REGISTRY_SH) is killed with SIGKILL while the application has records to
// read whose schema it has not fetched yet, stays down 10 s, and is restarted on its data:
// the application waits for it (its task retries the registry with backoff) and then goes
// on; no record is lost, none goes to the error handler. It restarts the registry other
// tests use, so it runs alone.
func TestRealRegistryRestart(t *testing.T) {
	url, script := os.Getenv(EnvTestRegistry), os.Getenv(EnvRegistryScript)
	if url == "" || script == "" {
		t.Skipf("needs a real registry started by testing/registry/registry.sh: set %s and %s=testing/registry/registry.sh (run alone: it restarts the registry)",
			EnvTestRegistry, EnvRegistryScript)
	}
	if abs, err := filepath.Abs(script); err == nil {
		script = abs
	}
	registrySh := func(cmd string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		began := time.Now()
		out, err := exec.CommandContext(ctx, "bash", script, cmd).CombinedOutput()
		if err != nil {
			t.Fatalf("registry.sh %s: %v\n%s", cmd, err, out)
		}
		t.Logf("registry.sh %s (%s): %s", cmd, time.Since(began).Round(time.Millisecond), strings.TrimSpace(string(out)))
	}
	rc, err := registry.NewClient(registry.Config{URLs: []string{url}, Retry: registry.Retry{Initial: 100 * time.Millisecond, Max: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	orders, err := avro.New[avroOrder](rc, avroOrderSchema, registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	in := kafkatest.CreateTopic(t, "orders", 1, nil)
	out := kafkatest.CreateTopic(t, "copy", 1, nil)
	b := kstream.NewBuilder()
	kstream.MapValues(kstream.Stream(b, in, serde.String(), orders), func(o avroOrder) int64 { return o.Amount }).
		To(out, serde.String(), serde.Int64())
	cfg := testConfig(t)
	var handled atomic.Int64
	cfg.DeserializationErrorHandler = kstream.ErrorHandlerFunc(func(kstream.ErrorContext) kstream.ErrorResponse {
		handled.Add(1)
		return kstream.Continue()
	})
	start(t, newApp(t, b, cfg))

	// The producer registers the schema while the registry is up, under a subject of this
	// run; the application has not fetched it when the registry dies.
	producer, err := avro.New[avroOrder](registryClient(t, url), avroOrderSchema, registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	write := producer.Bind(in, false)
	var recs []*kgo.Record
	for i := range 20 {
		v, err := write.Serialize(avroOrder{ID: fmt.Sprint(i), Amount: int64(i)})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: in, Key: []byte(fmt.Sprint(i)), Value: v})
	}
	registrySh("kill")
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			registrySh("restart") // leave the registry up for what runs next
		}
	})
	kafkatest.Produce(t, kafkatest.ManualProducer(t), recs...)
	// The outage itself: the registry stays down for the 10 s this check watches the output.
	if n := len(kafkatest.ConsumeAtMost(t, out, 1, 10*time.Second)); n != 0 {
		t.Errorf("%d records came out while the registry was down", n)
	}
	registrySh("restart")
	restarted = true
	began := time.Now()
	got := kafkatest.Consume(t, out, 20, 60*time.Second)
	t.Logf("all 20 records out %s after the registry's restart", time.Since(began).Round(time.Millisecond))
	for i, r := range got {
		if n, _ := serde.Int64().Deserialize(r.Value); n != int64(i) || string(r.Key) != fmt.Sprint(i) {
			t.Errorf("output %d: %s=%d, want %d=%d", i, r.Key, n, i, i)
		}
	}
	if n := handled.Load(); n != 0 {
		t.Errorf("%d records went to the deserialization error handler during the outage", n)
	}
}

// A schema that the registry refuses as incompatible is an error at start, before the
// application joins its group: Run returns it, naming the operator, the subject and the
// registry's message, and processes nothing.
func TestRegistryIncompatibleSchemaIsAStartError(t *testing.T) {
	in := kafkatest.CreateTopic(t, "orders", 1, nil)
	out := kafkatest.CreateTopic(t, "orders-out", 1, nil)
	fake := srfake.New()
	t.Cleanup(fake.Close)
	const msg = "Schema being registered is incompatible with an earlier schema for subject"
	fake.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPost && r.URL.Path == "/subjects/"+out+"-value/versions" {
			w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
			w.WriteHeader(http.StatusConflict)
			fmt.Fprintf(w, `{"error_code":409,"message":%q}`, msg)
			return true
		}
		return false
	})
	rc := registryClient(t, fake.URL())
	orders, err := avro.New[avroOrder](rc, avroOrderSchema, registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := kstream.NewBuilder()
	kstream.Stream(b, in, serde.String(), orders).To(out, nil, nil, kstream.Named("write-orders"))
	cfg := testConfig(t)
	r := start(t, newApp(t, b, cfg))
	err, done := r.wait(30 * time.Second)
	if !done {
		t.Fatal("Run did not return")
	}
	if !errors.Is(err, registry.ErrIncompatible) {
		t.Fatalf("Run returned %v, want an error wrapping registry.ErrIncompatible", err)
	}
	t.Logf("start error: %v", err)
	for _, want := range []string{"write-orders", out + "-value", msg} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the start error does not name %q: %v", want, err)
		}
	}
}

// A registry that stays unreachable longer than the client's Retry.For is still weather: the
// record is not given to the error handler (not skipped, not dead-lettered), the instance
// stops with an error wrapping serde.ErrUnavailable, and nothing is committed past it, so
// that the next run reads it again.
func TestRegistryGivenUpIsNotSkipped(t *testing.T) {
	srv, down, _ := flakyRegistry(t)
	in, _, cfg, r, handled, write := runAmounts(t, srv.URL,
		registry.Retry{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond, For: 300 * time.Millisecond}, kstream.DeadLetter("dead-letters"))
	v, err := write.Serialize(avroOrder{ID: "a", Amount: 1})
	if err != nil {
		t.Fatal(err)
	}
	down.Store(true)
	kafkatest.Produce(t, kafkatest.ManualProducer(t), &kgo.Record{Topic: in, Key: []byte("a"), Value: v})
	err, done := r.wait(60 * time.Second)
	if !done {
		t.Fatal("Run did not stop after the registry retries were spent")
	}
	if !errors.Is(err, serde.ErrUnavailable) || !errors.Is(err, registry.ErrRegistryUnavailable) {
		t.Fatalf("Run returned %v, want an error wrapping serde.ErrUnavailable", err)
	}
	var re *kstream.RecordError
	if !errors.As(err, &re) || re.Topic != in || re.Offset != 0 {
		t.Errorf("Run's error %v does not name the record (topic %s, offset 0)", err, in)
	}
	if n := handled.Load(); n != 0 {
		t.Errorf("the error handler was called %d times", n)
	}
	if got := committedOffsets(t, cfg.ApplicationID, in); got[0] > 0 {
		t.Errorf("committed offset %d of %s: the record was committed", got[0], in)
	}
}

// An application stopped while a task waits for an unavailable registry (which it would wait
// for as long as the outage lasts) stops at once: the wait ends with the shutdown, the record
// is not handed to the error handler, and nothing is committed past it.
func TestRegistryOutageDoesNotHoldUpShutdown(t *testing.T) {
	srv, down, refused := flakyRegistry(t)
	in, _, cfg, r, handled, write := runAmounts(t, srv.URL, registry.Retry{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond}, kstream.Continue())
	val, err := write.Serialize(avroOrder{ID: "a", Amount: 1})
	if err != nil {
		t.Fatal(err)
	}
	down.Store(true)
	kafkatest.Produce(t, kafkatest.ManualProducer(t), &kgo.Record{Topic: in, Key: []byte("a"), Value: val})
	kafkatest.Eventually(t, 30*time.Second, "the task waiting for the registry", func() bool { return refused.Load() >= 3 })
	began := time.Now()
	err = r.stop()
	t.Logf("Run returned %v after %v", err, time.Since(began).Round(time.Millisecond))
	if err != nil && strings.Contains(err.Error(), "did not stop") {
		t.Fatal(err)
	}
	if !errors.Is(err, serde.ErrUnavailable) {
		t.Errorf("Run returned %v, want an error wrapping serde.ErrUnavailable (the record was not processed)", err)
	}
	if n := handled.Load(); n != 0 {
		t.Errorf("the error handler was called %d times", n)
	}
	if got := committedOffsets(t, cfg.ApplicationID, in); got[0] > 0 {
		t.Errorf("committed offset %d of %s: the record was committed", got[0], in)
	}
}

// flakyRegistry serves an in-memory registry that answers 503 while down is set, counting
// the requests it refused.
func flakyRegistry(t *testing.T) (srv *httptest.Server, down *atomic.Bool, refused *atomic.Int64) {
	fake := srfake.NewRegistry()
	down, refused = new(atomic.Bool), new(atomic.Int64)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			refused.Add(1)
			http.Error(w, `{"error_code":50301,"message":"down for the test"}`, http.StatusServiceUnavailable)
			return
		}
		fake.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, down, refused
}

// runAmounts starts the topology of the outage tests: the Avro orders of a new topic in,
// their amounts written to a new topic out, read through a registry client at url that
// retries as retry. The deserialization error handler counts its calls in handled and
// answers resp. write is a producer's serde of in's values, through its own client.
func runAmounts(t *testing.T, url string, retry registry.Retry, resp kstream.ErrorResponse) (in, out string, cfg kstream.Config, r *running, handled *atomic.Int64, write *avro.Serde[avroOrder]) {
	t.Helper()
	rc, err := registry.NewClient(registry.Config{URLs: []string{url}, Retry: retry})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	orders, err := avro.New[avroOrder](rc, avroOrderSchema, registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	in = kafkatest.CreateTopic(t, "orders", 1, nil)
	out = kafkatest.CreateTopic(t, "amounts", 1, nil)
	b := kstream.NewBuilder()
	kstream.MapValues(kstream.Stream(b, in, serde.String(), orders), func(o avroOrder) int64 { return o.Amount }).
		To(out, serde.String(), serde.Int64())
	cfg = testConfig(t)
	handled = new(atomic.Int64)
	cfg.DeserializationErrorHandler = kstream.ErrorHandlerFunc(func(kstream.ErrorContext) kstream.ErrorResponse {
		handled.Add(1)
		return resp
	})
	r = start(t, newApp(t, b, cfg))
	producer, err := avro.New[avroOrder](registryClient(t, url), avroOrderSchema, registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return in, out, cfg, r, handled, producer.Bind(in, false)
}
