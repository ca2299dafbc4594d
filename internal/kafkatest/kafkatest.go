// Package kafkatest is the integration-test kit: a broker shared by the tests of one
// package (the in-process broker by default, or the real cluster named by
// KSTREAM_TEST_BROKERS), uniquely named topics, and helpers to produce and read records
// with deadlines.
package kafkatest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kstream-go/kstream/embedded"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
)

// EnvBrokers names a real cluster to run the integration tier against.
const EnvBrokers = "KSTREAM_TEST_BROKERS"

var (
	mu      sync.Mutex
	shared  *embedded.Broker
	brokers []string
	seq     atomic.Int64
	runID   = fmt.Sprintf("%x", time.Now().UnixNano()&0xffffff)
)

// Tier reports which broker the tests use: "kafka" when KSTREAM_TEST_BROKERS is set,
// "embedded" otherwise.
func Tier() string {
	if os.Getenv(EnvBrokers) != "" {
		return "kafka"
	}
	return "embedded"
}

// Brokers returns the seed brokers of the shared test broker, starting the in-process one
// on first use.
func Brokers(t testing.TB) []string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if brokers != nil {
		return brokers
	}
	if env := os.Getenv(EnvBrokers); env != "" {
		brokers = strings.Split(env, ",")
		return brokers
	}
	b, err := embedded.Start()
	if err != nil {
		t.Fatalf("starting the in-process broker: %v", err)
	}
	shared, brokers = b, b.Brokers()
	return brokers
}

// Embedded returns the in-process broker, or nil on the real-Kafka tier.
func Embedded(t testing.TB) *embedded.Broker {
	Brokers(t)
	mu.Lock()
	defer mu.Unlock()
	return shared
}

// Main runs the tests of a package, closes the shared broker, and checks that no goroutine
// outlived the tests.
//
// In a child process started by [StartChild], Main runs the registered child instead.
func Main(m *testing.M) {
	runChild()
	raiseParallel()
	code := m.Run()
	mu.Lock()
	if shared != nil {
		if err := shared.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "closing the in-process broker:", err)
		}
		shared, brokers = nil, nil
	}
	mu.Unlock()
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreCurrent()); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// parallelDefault is how many parallel tests run at once when -test.parallel is not given.
// Integration tests spend most of their time waiting for a broker (a session timeout, a
// child process that restarts, a commit interval), not on a CPU: go test's default of one
// per core would leave the machine idle while they wait. 8 was tried before and made some
// tests flaky on 2 cores; one cause found since was not the load but records stamped in
// 2023, which the in-process broker's retention deleted between produce and fetch (see
// baseTime in the root package's main_test.go). With 8, go test ./... of the root package
// kept the 2 cores 80-95% idle for most of its 3 minutes (the crash and fault tests sleep
// while their child processes restart), so without the race detector 16 run at once; with
// it (CI's in-process tier), whose tests cost several times the CPU, 8 until fifteen tests
// that had run alone joined the parallel ones (their subtests were parallel, they were not):
// a rehearsal of .ci/run saw two tests fail under the race detector that had not failed
// before (a fleet's standbys moved by a rebalance, a join during which an exactly-once
// instance processed nothing for 5.6 s), so with it 4. If a test turns flaky under load,
// lower these and say why here.
var parallelDefault = map[bool]int{false: 16, true: 4}[raceEnabled]

// raiseParallel sets -test.parallel to parallelDefault unless the command line set it.
func raiseParallel() {
	if !flag.Parsed() {
		flag.Parse()
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", fmt.Sprint(parallelDefault))
	}
}

// Context returns a context that ends after d or at the end of the test.
func Context(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Name returns a name unique to this test run, for topics and application ids.
func Name(t testing.TB, base string) string {
	name := strings.NewReplacer("/", "-", " ", "-", "#", "-").Replace(t.Name())
	if len(name) > 60 {
		name = name[:60]
	}
	return fmt.Sprintf("%s-%s-%s-%d", base, name, runID, seq.Add(1))
}

// Client returns a plain client for the shared broker, closed at the end of the test.
func Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(Brokers(t)...)}, opts...)...)
	if err != nil {
		t.Fatalf("kgo client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// CreateTopic creates a uniquely named topic with the given partitions and returns its name.
func CreateTopic(t testing.TB, base string, partitions int32, configs map[string]*string) string {
	t.Helper()
	return CreateTopicNamed(t, Name(t, base), partitions, configs)
}

// CreateTopicNamed creates the topic name (made unique by the caller, as with Name) with the
// given partitions and returns its name once the broker's metadata shows it.
func CreateTopicNamed(t testing.TB, name string, partitions int32, configs map[string]*string) string {
	t.Helper()
	adm := kadm.NewClient(Client(t))
	ctx := Context(t, 30*time.Second)
	resp, err := adm.CreateTopic(ctx, partitions, 1, configs, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("creating topic %s: %v", name, err)
	}
	// Wait until the topic is visible in metadata (a real cluster propagates it lazily).
	for ctx.Err() == nil {
		d, err := adm.ListTopics(ctx, name)
		if err == nil && d[name].Err == nil && len(d[name].Partitions) == int(partitions) {
			return name
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("topic %s not visible: %v", name, ctx.Err())
	return ""
}

// Produce writes records synchronously; a record with Partition >= 0 and no key goes to that
// partition only if the client uses a manual partitioner, so callers pick the partitioner.
func Produce(t testing.TB, cl *kgo.Client, recs ...*kgo.Record) {
	t.Helper()
	ctx := Context(t, 60*time.Second)
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("producing %d records: %v", len(recs), err)
	}
}

// ManualProducer returns a client that writes each record to its Partition field.
func ManualProducer(t testing.TB) *kgo.Client {
	return Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
}

// Consume reads topic from the start until it has n records or d passes, and returns what
// it read. It fails the test if fewer than n arrived.
func Consume(t testing.TB, topic string, n int, d time.Duration, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	recs := ConsumeAtMost(t, topic, n, d, opts...)
	if len(recs) < n {
		t.Fatalf("topic %s: got %d records within %s, want %d", topic, len(recs), d, n)
	}
	return recs
}

// ConsumeAtMost reads topic from the start until it has n records or d passes.
func ConsumeAtMost(t testing.TB, topic string, n int, d time.Duration, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	cl := Client(t, append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	ctx := Context(t, d)
	var out []*kgo.Record
	for len(out) < n && ctx.Err() == nil {
		f := cl.PollFetches(ctx)
		f.EachError(func(tp string, p int32, err error) {
			if ctx.Err() == nil {
				t.Logf("consume %s/%d: %v", tp, p, err)
			}
		})
		out = append(out, f.Records()...)
	}
	return out
}

// Drain reads topic until no new record arrives for quiet, or d passes. The quiet period
// counts only once every partition that held records when Drain began has delivered one:
// on a loaded broker a consumer's first fetch can take longer than quiet, and stopping
// then would return nothing (or one partition's records) as if the topic were empty.
func Drain(t testing.TB, topic string, quiet, d time.Duration, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	ctx := Context(t, d)
	pending := nonEmptyPartitions(ctx, t, topic)
	cl := Client(t, append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	var out []*kgo.Record
	for ctx.Err() == nil {
		wait := quiet
		if len(pending) > 0 {
			wait = d
		}
		pctx, cancel := context.WithTimeout(ctx, wait)
		f := cl.PollFetches(pctx)
		cancel()
		recs := f.Records()
		if len(recs) == 0 && pctx.Err() != nil {
			break
		}
		for _, r := range recs {
			delete(pending, r.Partition)
		}
		out = append(out, recs...)
	}
	return out
}

// nonEmptyPartitions lists the partitions of topic whose end offset is past their start.
func nonEmptyPartitions(ctx context.Context, t testing.TB, topic string) map[int32]bool {
	t.Helper()
	adm := kadm.NewClient(Client(t))
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		t.Fatalf("listing start offsets of %s: %v", topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("listing end offsets of %s: %v", topic, err)
	}
	out := map[int32]bool{}
	ends.Each(func(o kadm.ListedOffset) {
		if s, ok := starts.Lookup(topic, o.Partition); ok && o.Offset > s.Offset {
			out[o.Partition] = true
		}
	})
	return out
}

// Eventually polls cond every 20ms until it is true or d passes.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s", d, what)
}
