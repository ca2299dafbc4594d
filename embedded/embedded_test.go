package embedded_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/kstream-go/kstream/embedded"
)

// testTimeout bounds every blocking call in these tests.
const testTimeout = 20 * time.Second

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// start starts a broker and closes it at the end of the test.
func start(t *testing.T, opts ...embedded.Option) *embedded.Broker {
	t.Helper()
	b, err := embedded.Start(opts...)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

func newClient(t *testing.T, brokers []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	return cl
}

func produce(ctx context.Context, t *testing.T, brokers []string, topic string, n int) {
	t.Helper()
	cl := newClient(t, brokers)
	defer cl.Close()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: []byte(fmt.Sprintf("value-%03d", i))}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce %d records to %s: %v", n, topic, err)
	}
}

// consume reads topic from the start until it has n records and returns the
// distinct values seen.
func consume(ctx context.Context, t *testing.T, brokers []string, topic string, n int, opts ...kgo.Opt) map[string]bool {
	t.Helper()
	cl := newClient(t, brokers, append([]kgo.Opt{
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}, opts...)...)
	defer cl.Close()
	seen := make(map[string]bool)
	got := 0
	for got < n {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consume %s: got %d of %d records: %v", topic, got, n, err)
		}
		fetches.EachError(func(topic string, p int32, err error) {
			t.Logf("fetch error %s/%d: %v", topic, p, err)
		})
		fetches.EachRecord(func(r *kgo.Record) {
			got++
			seen[string(r.Value)] = true
		})
	}
	if got != n {
		t.Fatalf("consume %s: got %d records, want %d", topic, got, n)
	}
	return seen
}

func roundTrip(t *testing.T, brokers []string, topic string) {
	t.Helper()
	ctx := testCtx(t)
	produce(ctx, t, brokers, topic, 1)
	if seen := consume(ctx, t, brokers, topic, 1); !seen["value-000"] {
		t.Fatalf("consumed %v, want value-000", seen)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func portOf(t *testing.T, addr string) int {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("split %q: %v", addr, err)
	}
	if host != "127.0.0.1" {
		t.Fatalf("host of %q = %q, want 127.0.0.1", addr, host)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p <= 0 {
		t.Fatalf("bad port in %q", addr)
	}
	return p
}

// assertPortFree checks that addr can be listened on again.
func assertPortFree(t *testing.T, addr string) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("port of %s not released after Close: %v", addr, err)
	}
	ln.Close()
}

func TestRandomPort(t *testing.T) {
	verifyNoLeaks(t)

	b, err := embedded.Start(embedded.Topics(1, "t"))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	portOf(t, b.Addr())
	if got := b.Brokers(); len(got) != 1 || got[0] != b.Addr() {
		t.Fatalf("Brokers() = %v, want [%s]", got, b.Addr())
	}
	if got := len(b.Cluster().ListenAddrs()); got != 1 {
		t.Fatalf("kfake listens on %d addresses, want 1 (single broker)", got)
	}
	roundTrip(t, b.Brokers(), "t")

	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	assertPortFree(t, b.Addr())
}

func TestFixedPort(t *testing.T) {
	verifyNoLeaks(t)

	port := freePort(t)
	b := start(t, embedded.Port(port), embedded.Topics(1, "t"))
	if want := fmt.Sprintf("127.0.0.1:%d", port); b.Addr() != want {
		t.Fatalf("Addr() = %q, want %q", b.Addr(), want)
	}
	roundTrip(t, b.Brokers(), "t")

	// A second broker cannot take the same port.
	_, err := embedded.Start(embedded.Port(port))
	if err == nil || !strings.HasPrefix(err.Error(), "embedded: ") {
		t.Fatalf("second Start on port %d: err = %v, want embedded: ... error", port, err)
	}
}

func TestDataDirPersistence(t *testing.T) {
	verifyNoLeaks(t)

	dir := t.TempDir()
	const n = 100
	ctx := testCtx(t)

	// First life: create a topic, write 100 records, commit a group offset.
	b1, err := embedded.Start(embedded.DataDir(dir), embedded.Topics(3, "persist"))
	if err != nil {
		t.Fatalf("Start 1: %v", err)
	}
	addr1 := b1.Addr()
	produce(ctx, t, b1.Brokers(), "persist", n)
	func() {
		cl := newClient(t, b1.Brokers())
		defer cl.Close()
		offsets := make(kadm.Offsets)
		offsets.Add(kadm.Offset{Topic: "persist", Partition: 0, At: 7, LeaderEpoch: -1})
		resp, err := kadm.NewClient(cl).CommitOffsets(ctx, "g", offsets)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatalf("commit offsets: %v", err)
		}
	}()
	if err := b1.Close(); err != nil {
		t.Fatalf("Close 1: %v", err)
	}

	// Second life on the same port.
	b2, err := embedded.Start(embedded.DataDir(dir), embedded.Port(portOf(t, addr1)), embedded.Topics(3, "persist"))
	if err != nil {
		t.Fatalf("Start 2 on same port: %v", err)
	}
	if b2.Addr() != addr1 {
		t.Fatalf("Addr() = %s, want %s", b2.Addr(), addr1)
	}
	if seen := consume(ctx, t, b2.Brokers(), "persist", n); len(seen) != n {
		t.Fatalf("after restart on same port: %d distinct values, want %d", len(seen), n)
	}
	if err := b2.Close(); err != nil {
		t.Fatalf("Close 2: %v", err)
	}

	// Third life on a new random port, seeding an extra topic: the old
	// data, the group offset and the topic's 3 partitions are still there,
	// and the new topic is created.
	b3 := start(t, embedded.DataDir(dir), embedded.Topics(3, "persist"), embedded.Topics(2, "added"))
	if seen := consume(ctx, t, b3.Brokers(), "persist", n); len(seen) != n {
		t.Fatalf("after restart on new port: %d distinct values, want %d", len(seen), n)
	}
	cl := newClient(t, b3.Brokers())
	defer cl.Close()
	adm := kadm.NewClient(cl)
	topics, err := adm.ListTopics(ctx, "persist", "added")
	if err != nil {
		t.Fatalf("list topics: %v", err)
	}
	for topic, want := range map[string]int{"persist": 3, "added": 2} {
		td, ok := topics[topic]
		if !ok || td.Err != nil {
			t.Fatalf("topic %s after restart: ok=%v err=%v", topic, ok, td.Err)
		}
		if got := len(td.Partitions); got != want {
			t.Fatalf("topic %s has %d partitions, want %d", topic, got, want)
		}
	}
	fetched, err := adm.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatalf("fetch offsets: %v", err)
	}
	if o, ok := fetched.Lookup("persist", 0); !ok || o.At != 7 {
		t.Fatalf("committed offset after restart = %+v (ok=%v), want 7", o, ok)
	}
}

func TestDataDirInUse(t *testing.T) {
	verifyNoLeaks(t)

	dir := t.TempDir()
	b, err := embedded.Start(embedded.DataDir(dir))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if _, err := embedded.Start(embedded.DataDir(dir)); err == nil {
		t.Fatal("second Start on the same data dir succeeded")
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	b2, err := embedded.Start(embedded.DataDir(dir))
	if err != nil {
		t.Fatalf("Start after Close: %v", err)
	}
	if err := b2.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func TestCloseIdempotent(t *testing.T) {
	verifyNoLeaks(t)

	for _, name := range []string{"memory", "datadir"} {
		t.Run(name, func(t *testing.T) {
			var opts []embedded.Option
			if name == "datadir" {
				opts = append(opts, embedded.DataDir(t.TempDir()))
			}
			b, err := embedded.Start(opts...)
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			var wg sync.WaitGroup
			errs := make([]error, 4)
			for i := range errs {
				wg.Go(func() { errs[i] = b.Close() })
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("concurrent Close %d: %v", i, err)
				}
			}
			if err := b.Close(); err != nil {
				t.Fatalf("Close again: %v", err)
			}
			if err := b.Compact(); !errors.Is(err, embedded.ErrClosed) {
				t.Fatalf("Compact after Close: %v, want ErrClosed", err)
			}
			if err := b.ApplyRetention(); !errors.Is(err, embedded.ErrClosed) {
				t.Fatalf("ApplyRetention after Close: %v, want ErrClosed", err)
			}
		})
	}
}

// TestCloseWithConnectedClient checks that Close does not wait for clients
// to disconnect and that it tears their connections down.
func TestCloseWithConnectedClient(t *testing.T) {
	verifyNoLeaks(t)

	b, err := embedded.Start(embedded.Topics(1, "t"))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	ctx := testCtx(t)
	cl := newClient(t, b.Brokers(), kgo.ConsumeTopics("t"))
	defer cl.Close()
	if err := cl.Ping(ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}
	// Leave a fetch outstanding while the broker goes away.
	pollDone := make(chan struct{})
	pollCtx, cancelPoll := context.WithCancel(ctx)
	go func() {
		defer close(pollDone)
		cl.PollFetches(pollCtx)
	}()

	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("Close did not return with a client connected")
	}
	assertPortFree(t, b.Addr())
	cancelPoll()
	<-pollDone
}

func TestAutoCreateTopics(t *testing.T) {
	verifyNoLeaks(t)

	t.Run("off by default", func(t *testing.T) {
		b := start(t)
		ctx := testCtx(t)
		cl := newClient(t, b.Brokers(), kgo.AllowAutoTopicCreation(), kgo.UnknownTopicRetries(2))
		defer cl.Close()
		err := cl.ProduceSync(ctx, &kgo.Record{Topic: "missing", Value: []byte("v")}).FirstErr()
		if !errors.Is(err, kerr.UnknownTopicOrPartition) {
			t.Fatalf("produce to missing topic: err = %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
		}
	})
	t.Run("on", func(t *testing.T) {
		b := start(t, embedded.AutoCreateTopics(true), embedded.Partitions(4))
		ctx := testCtx(t)
		cl := newClient(t, b.Brokers(), kgo.AllowAutoTopicCreation())
		defer cl.Close()
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "auto", Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("produce to auto-created topic: %v", err)
		}
		topics, err := kadm.NewClient(cl).ListTopics(ctx, "auto")
		if err != nil {
			t.Fatalf("list topics: %v", err)
		}
		if got := len(topics["auto"].Partitions); got != 4 {
			t.Fatalf("auto-created topic has %d partitions, want 4", got)
		}
	})
}

func TestDefaultPartitions(t *testing.T) {
	verifyNoLeaks(t)

	b := start(t, embedded.Topics(0, "default"), embedded.Topics(5, "five"))
	ctx := testCtx(t)
	cl := newClient(t, b.Brokers())
	defer cl.Close()
	topics, err := kadm.NewClient(cl).ListTopics(ctx)
	if err != nil {
		t.Fatalf("list topics: %v", err)
	}
	for topic, want := range map[string]int{"default": embedded.DefaultPartitions, "five": 5} {
		if got := len(topics[topic].Partitions); got != want {
			t.Fatalf("topic %s has %d partitions, want %d", topic, got, want)
		}
	}
}

// TestShortSessionTimeout checks that a group member may use a session
// timeout far below Kafka's 6s minimum, and that GroupMinSessionTimeout
// restores a stricter minimum.
func TestShortSessionTimeout(t *testing.T) {
	verifyNoLeaks(t)

	groupOpts := []kgo.Opt{
		kgo.ConsumerGroup("fast"),
		kgo.SessionTimeout(300 * time.Millisecond),
		kgo.HeartbeatInterval(100 * time.Millisecond),
	}
	t.Run("default allows it", func(t *testing.T) {
		b := start(t, embedded.Topics(1, "t"))
		ctx := testCtx(t)
		produce(ctx, t, b.Brokers(), "t", 1)
		consume(ctx, t, b.Brokers(), "t", 1, groupOpts...)
	})
	t.Run("stricter minimum rejects it", func(t *testing.T) {
		b := start(t, embedded.Topics(1, "t"), embedded.GroupMinSessionTimeout(6*time.Second))
		ctx, cancel := context.WithTimeout(testCtx(t), 5*time.Second)
		defer cancel()
		cl := newClient(t, b.Brokers(), append([]kgo.Opt{kgo.ConsumeTopics("t")}, groupOpts...)...)
		defer cl.Close()
		for {
			fetches := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatal("no INVALID_SESSION_TIMEOUT error before the deadline")
			}
			var found bool
			fetches.EachError(func(_ string, _ int32, err error) {
				found = found || errors.Is(err, kerr.InvalidSessionTimeout)
			})
			if found {
				return
			}
		}
	})
}

func TestCompact(t *testing.T) {
	verifyNoLeaks(t)

	b := start(t)
	ctx := testCtx(t)
	cl := newClient(t, b.Brokers())
	defer cl.Close()
	compact := "compact"
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, -1, map[string]*string{"cleanup.policy": &compact}, "c")
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create compacted topic: %v", err)
	}
	var recs []*kgo.Record
	for v := range 5 {
		for k := range 10 {
			recs = append(recs, &kgo.Record{Topic: "c", Key: []byte(strconv.Itoa(k)), Value: []byte(strconv.Itoa(v))})
		}
	}
	for _, r := range recs { // one batch per record, so that compaction has closed batches to work on
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	if err := b.Compact(); err != nil {
		t.Fatalf("Compact: %v", err)
	}
	cons := newClient(t, b.Brokers(), kgo.ConsumeTopics("c"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cons.Close()
	var got []*kgo.Record
	for {
		fetches := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consume: %v", err)
		}
		got = append(got, fetches.Records()...)
		if len(got) > 0 && got[len(got)-1].Offset == int64(len(recs)-1) {
			break
		}
	}
	// The active (last) batch is never compacted, so at most the 10 latest
	// values plus that batch remain.
	if len(got) >= len(recs) || len(got) > 11 {
		t.Fatalf("after Compact %d of %d records remain, want at most 11", len(got), len(recs))
	}
}

func TestInvalidOptions(t *testing.T) {
	verifyNoLeaks(t)

	for name, opt := range map[string]embedded.Option{
		"negative port":   embedded.Port(-1),
		"huge port":       embedded.Port(70000),
		"zero partitions": embedded.Partitions(0),
		"empty topic":     embedded.Topics(1, ""),
		"zero session":    embedded.GroupMinSessionTimeout(0),
	} {
		if b, err := embedded.Start(opt); err == nil {
			b.Close()
			t.Errorf("%s: Start succeeded", name)
		} else if !strings.HasPrefix(err.Error(), "embedded: ") {
			t.Errorf("%s: error %q lacks the embedded: prefix", name, err)
		}
	}
}

// TestLogger checks that kfake's messages reach the slog logger: a KIP-848
// group join is logged at info. It also exercises BrokerConfigs, which lowers
// the KIP-848 heartbeat interval from 5s.
func TestLogger(t *testing.T) {
	verifyNoLeaks(t)

	var mu sync.Mutex
	var buf bytes.Buffer
	h := slog.NewTextHandler(&lockedWriter{mu: &mu, w: &buf}, &slog.HandlerOptions{Level: slog.LevelInfo})
	b := start(t,
		embedded.Logger(slog.New(h)),
		embedded.Topics(1, "t"),
		embedded.BrokerConfigs(map[string]string{"group.consumer.heartbeat.interval.ms": "200"}),
	)
	ctx := testCtx(t)
	produce(ctx, t, b.Brokers(), "t", 1)
	consume(ctx, t, b.Brokers(), "t", 1, kgo.ConsumerGroup("g848"), kgo.ServerSideBalancer())
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	out := buf.String()
	if !strings.Contains(out, "level=INFO") || !strings.Contains(out, "consumerJoin: group=g848") || !strings.Contains(out, "component=kfake") {
		t.Fatalf("log output lacks the info-level group join message:\n%s", out)
	}
	if strings.Contains(out, "level=DEBUG") {
		t.Fatalf("debug messages logged through an info-level handler:\n%s", out)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestFromEnv(t *testing.T) {
	verifyNoLeaks(t)

	t.Run("set", func(t *testing.T) {
		t.Setenv(embedded.EnvBrokers, " kafka-1:9092, kafka-2:9092 ,")
		brokers, stop, err := embedded.FromEnv()
		if err != nil {
			t.Fatalf("FromEnv: %v", err)
		}
		if want := []string{"kafka-1:9092", "kafka-2:9092"}; fmt.Sprint(brokers) != fmt.Sprint(want) {
			t.Fatalf("brokers = %q, want %q", brokers, want)
		}
		if err := stop(); err != nil {
			t.Fatalf("stop: %v", err)
		}
	})
	t.Run("only commas", func(t *testing.T) {
		t.Setenv(embedded.EnvBrokers, " , ")
		if _, _, err := embedded.FromEnv(); err == nil {
			t.Fatal("FromEnv accepted a broker list with no brokers")
		}
	})
	for _, name := range []string{"unset", "empty"} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(embedded.EnvBrokers, "")
			if name == "unset" {
				unsetenv(t, embedded.EnvBrokers)
			}
			brokers, stop, err := embedded.FromEnv(embedded.Topics(1, "t"))
			if err != nil {
				t.Fatalf("FromEnv: %v", err)
			}
			defer func() {
				if err := stop(); err != nil {
					t.Errorf("stop: %v", err)
				}
			}()
			if len(brokers) != 1 {
				t.Fatalf("brokers = %v, want one embedded broker", brokers)
			}
			portOf(t, brokers[0])
			roundTrip(t, brokers, "t")
		})
	}
}

func unsetenv(t *testing.T, key string) {
	t.Helper()
	if err := os.Unsetenv(key); err != nil {
		t.Fatalf("unsetenv %s: %v", key, err)
	}
}

// verifyNoLeaks checks, after the test and all its cleanups (which close the
// brokers) have run, that no goroutine is left behind. goleak retries for a
// while, which covers kfake's run loop exiting just after Close returns.
func verifyNoLeaks(t *testing.T) {
	t.Helper()
	t.Cleanup(func() { goleak.VerifyNone(t) })
}
