package kstream_test

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/embedded"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// notLeaderFor makes the in-process broker answer NOT_LEADER_FOR_PARTITION to the
// ListOffsets requests that name topic, n times, as a real broker does for a partition
// that is listed but not led yet. It returns the number of answers given so far. Other
// requests (of tests running in parallel) are not touched, and the hook goes away after the
// n-th answer.
func notLeaderFor(t *testing.T, topic string, n int32) *atomic.Int32 {
	t.Helper()
	broker := kafkatest.Embedded(t)
	if broker == nil {
		t.Skip("needs the in-process broker's request hooks")
	}
	c := broker.Cluster()
	var injected atomic.Int32
	c.ControlKey(int16(kmsg.ListOffsets), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		req := kr.(*kmsg.ListOffsetsRequest)
		if !slices.ContainsFunc(req.Topics, func(rt kmsg.ListOffsetsRequestTopic) bool { return rt.Topic == topic }) {
			c.KeepControl()
			return nil, nil, false
		}
		if injected.Load() >= n {
			c.DropControl()
			return nil, nil, false
		}
		injected.Add(1)
		c.KeepControl()
		resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewListOffsetsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewListOffsetsResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	return &injected
}

// The changelog's partition is listed but has no leader for a while (NOT_LEADER_FOR_PARTITION
// on every ListOffsets): restoration waits, with a warning, instead of failing; the app
// reaches RUNNING and counts on exactly from the restored value. (Before: 2 of 12 starts on
// a real broker died with `end offset of changelog ... NOT_LEADER_FOR_PARTITION`.)
func TestRestoreWaitsForChangelogLeader(t *testing.T) {
	t.Parallel()
	logs := &logCapture{t: t}
	cfg := testConfig(t)
	cfg.Logger = logs.logger()
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	changelog := prepareChangelog(t, cfg, func(topic string) {
		kafkatest.Produce(t, kafkatest.ManualProducer(t), &kgo.Record{Topic: topic, Key: []byte("a"), Value: count(41)})
	})
	const faults = 12
	injected := notLeaderFor(t, changelog, faults)

	// kgo retries a ListOffsets answered NOT_LEADER_FOR_PARTITION by itself, up to 20 times
	// over about 30s, before it returns the error: fewer retries make it return the error
	// as soon as on a real cluster whose partition stays leaderless for longer.
	cfg.ClientOptions = []kgo.Opt{kgo.RequestRetries(1)}
	cfg.StateDir = t.TempDir()
	rc := &restoreCounter{}
	cfg.RestoreListener = rc
	app := start(t, countApp(t, cfg, in, out))
	kafkatest.Eventually(t, 120*time.Second, "running", func() bool {
		if err, done := app.wait(0); done {
			t.Fatalf("Run returned: %v", err)
		}
		return app.app.State() == kstream.StateRunning
	})
	if got := injected.Load(); got != faults {
		t.Fatalf("%d faults injected, want %d", got, faults)
	}
	if rc.total("counts") != 1 {
		t.Fatalf("restored %d records, want 1", rc.total("counts"))
	}
	feedKeys(t, in, "a", "b", "a")
	if got := newReader(t, out).next(3); !slices.Equal(got, []string{"a=42", "b=1", "a=43"}) {
		t.Fatalf("counts: %v", got)
	}
	if !logs.has("waiting for the cluster", changelog, "NOT_LEADER_FOR_PARTITION") {
		t.Fatal("no warning saying what restoration waits for")
	}
	t.Logf("%d NOT_LEADER_FOR_PARTITION answers injected", injected.Load())
}

// A dead-letter topic that does not exist fails Run at start, naming the topic and the
// handler (before: the first bad record found out, exactly when it was needed); so does one
// listed in Config.DeadLetterTopics for a custom handler.
func TestMissingDeadLetterTopic(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	dlq := kafkatest.CreateTopic(t, "dlq", 1, nil)
	missing := kafkatest.Name(t, "missing-dlq")
	for _, tc := range []struct {
		name    string
		set     func(*kstream.Config)
		handler string
	}{
		{"deserialization", func(c *kstream.Config) { c.DeserializationErrorHandler = kstream.DeadLetterQueue(missing) }, "Config.DeserializationErrorHandler"},
		{"processing", func(c *kstream.Config) { c.ProcessingErrorHandler = kstream.DeadLetterQueue(missing) }, "Config.ProcessingErrorHandler"},
		{"production", func(c *kstream.Config) {
			c.DeserializationErrorHandler = kstream.DeadLetterQueue(dlq) // exists: fine
			c.ProductionErrorHandler = kstream.DeadLetterQueue(missing)
		}, "Config.ProductionErrorHandler"},
		{"custom", func(c *kstream.Config) {
			c.ProductionErrorHandler = kstream.ErrorHandlerFunc(func(kstream.ErrorContext) kstream.ErrorResponse { return kstream.DeadLetter(missing) })
			c.DeadLetterTopics = []string{dlq, missing}
		}, "Config.DeadLetterTopics"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			tc.set(&cfg)
			r := start(t, countApp(t, cfg, in, out))
			err, done := r.wait(30 * time.Second)
			if !done {
				t.Fatal("Run did not fail at start")
			}
			if err == nil || !strings.Contains(err.Error(), "dead-letter topic \""+missing+"\"") || !strings.Contains(err.Error(), tc.handler) ||
				!strings.Contains(err.Error(), "does not exist") {
				t.Fatalf("got %v, want an error naming dead-letter topic %s and %s", err, missing, tc.handler)
			}
		})
	}
	// With every dead-letter topic in place the app starts and counts.
	cfg := testConfig(t)
	cfg.DeserializationErrorHandler = kstream.DeadLetterQueue(dlq)
	cfg.DeadLetterTopics = []string{dlq}
	r := start(t, countApp(t, cfg, in, out))
	feedKeys(t, in, "a")
	if got := newReader(t, out).next(1); !slices.Equal(got, []string{"a=1"}) {
		t.Fatalf("counts: %v", got)
	}
	if err, done := r.wait(0); done {
		t.Fatalf("Run returned: %v", err)
	}
}

// Run started while the broker is down waits for it (logging what it waits for) instead of
// failing at once, and processes once the broker is up.
func TestRunWaitsForBrokerAtStart(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close() // nothing listens there until the broker starts below
	logs := &logCapture{t: t}
	cfg := testConfig(t)
	cfg.Brokers = []string{fmt.Sprintf("127.0.0.1:%d", port)}
	cfg.StateDir, cfg.Logger = t.TempDir(), logs.logger()
	const in, out = "in", "out"
	r := start(t, countApp(t, cfg, in, out))
	if err, done := r.wait(3 * time.Second); done {
		t.Fatalf("Run returned while the broker was down: %v", err)
	}
	if st := r.app.State(); st != kstream.StateCreated {
		t.Fatalf("state %v while the broker is down, want CREATED", st)
	}
	if !logs.has("waiting for the cluster", "reading metadata of topics") {
		t.Fatal("no warning saying what Run waits for")
	}

	b, err := embedded.Start(embedded.Port(port), embedded.Topics(1, in, out))
	if err != nil {
		t.Fatalf("starting the broker on port %d: %v", port, err)
	}
	defer func() {
		if err := r.stop(); err != nil { // before the broker goes
			t.Errorf("stopping the app: %v", err)
		}
		if err := b.Close(); err != nil {
			t.Errorf("closing the broker: %v", err)
		}
	}()
	began := time.Now()
	kafkatest.Eventually(t, 60*time.Second, "running", func() bool {
		if err, done := r.wait(0); done {
			t.Fatalf("Run returned: %v", err)
		}
		return r.app.State() == kstream.StateRunning
	})
	t.Logf("RUNNING %s after the broker started", time.Since(began).Round(time.Millisecond))
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.ConsumeTopics(out), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := kafkatest.Context(t, 30*time.Second)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: in, Key: []byte("a"), Value: []byte("v")}, &kgo.Record{Topic: in, Key: []byte("a"), Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < 2 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(rec *kgo.Record) {
			n, _ := serde.Int64().Deserialize(rec.Value)
			got = append(got, fmt.Sprintf("%s=%d", rec.Key, n))
		})
	}
	if !slices.Equal(got, []string{"a=1", "a=2"}) {
		t.Fatalf("counts: %v", got)
	}
}
