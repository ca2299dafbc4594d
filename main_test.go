package kstream_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestMain(m *testing.M) { kafkatest.Main(m) }

// testLogger logs to the test at warn level so failures show what the app saw.
func testLogger(t testing.TB) *slog.Logger {
	lvl := slog.LevelWarn
	if os.Getenv("KSTREAM_TEST_DEBUG") != "" {
		lvl = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: lvl}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// testConfig is a Config for a fresh application on the shared broker.
func testConfig(t testing.TB) kstream.Config {
	return kstream.Config{
		ApplicationID:     kafkatest.Name(t, "app"),
		Brokers:           kafkatest.Brokers(t),
		CommitInterval:    200 * time.Millisecond,
		SessionTimeout:    6 * time.Second,
		HeartbeatInterval: 200 * time.Millisecond,
		Logger:            testLogger(t),
		// Not the default under os.TempDir(), which outlives the test: a test's stores
		// (tens of MiB each with Pebble) would pile up there run after run.
		StateDir: t.TempDir(),
		// The record cache is on by default (10 MiB, as in Kafka Streams) and forwards a
		// table's updates once per commit; most tests here are about something else and
		// assert every update, so they run without it. The cache's own tests
		// (recordcache_test.go) set it, or leave the default.
		CacheMaxBytes: -1,
	}
}

// running is an App started in the background.
type running struct {
	app    *kstream.App
	cancel context.CancelFunc
	done   chan struct{}
	err    error
	once   sync.Once
}

// start runs app until the test ends (or stop is called).
func start(t testing.TB, app *kstream.App) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{app: app, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = app.Run(ctx)
	}()
	t.Cleanup(func() {
		if err := r.stop(); err != nil && !errors.Is(err, context.Canceled) {
			t.Logf("app stopped with: %v", err)
		}
	})
	return r
}

// stop cancels the app and waits up to 30s for Run to return.
func (r *running) stop() error {
	r.once.Do(r.cancel)
	select {
	case <-r.done:
		return r.err
	case <-time.After(30 * time.Second):
		return fmt.Errorf("app did not stop within 30s")
	}
}

// wait waits for Run to return by itself.
func (r *running) wait(d time.Duration) (error, bool) {
	select {
	case <-r.done:
		return r.err, true
	case <-time.After(d):
		return nil, false
	}
}

// newApp builds an app or fails the test.
func newApp(t testing.TB, b *kstream.Builder, cfg kstream.Config) *kstream.App {
	t.Helper()
	app, err := kstream.New(b, cfg)
	if err != nil {
		t.Fatalf("kstream.New: %v", err)
	}
	return app
}

// baseTime is the time origin of the records that rec makes: a multiple of 1e7 ms between
// about 2.8 and 5.6 hours ago. It must be recent: a broker deletes records older than the
// topic's retention.ms (7 days by default), and the in-process broker does so batch by
// batch on its cleaner's tick, so that a record with an old timestamp could vanish between
// its production and its first fetch (the fetch then gets OFFSET_OUT_OF_RANGE, the consumer
// resets past it, and the test waits for an output that never comes). With a fixed origin
// in 2023, TestTableJoinAndAggregateOnBroker failed so when other tests ran beside it. And
// it must be less than a day old: a window store's changelog keeps records for the store's
// retention plus a day (by their timestamps), and with an origin 28 to 56 hours ago Apache
// Kafka deleted the windows of the tests' stores within seconds, so that a store restored
// or followed elsewhere lacked them (TestAlignedEventTimeReprocessingOnBroker and
// TestQueryTwoInstancesStandbyAndRebalance failed so now and then; see
// TestWindowedChangelogOlderThanRetention).
var baseTime = time.UnixMilli((time.Now().UnixMilli()/1e7 - 1) * 1e7)

// rec is an input record with a key, a value, a timestamp offset in ms and optional headers.
func rec(topic, key, value string, tsMs int, headers ...string) *kgo.Record {
	r := &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte(value), Timestamp: baseTime.Add(time.Duration(tsMs) * time.Millisecond)}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: headers[i], Value: []byte(headers[i+1])})
	}
	return r
}

// childConfig is the Config of an application in a child process (kafkatest.StartChild):
// APP_ID, STATE_DIR and the brokers from the environment, commits every 100 ms, a 6 s
// session, logs at info on stderr, no record cache, and exactly-once if GUARANTEE=eos.
func childConfig() kstream.Config {
	cfg := kstream.Config{
		ApplicationID:     os.Getenv("APP_ID"),
		Brokers:           strings.Split(os.Getenv(kafkatest.EnvBrokers), ","),
		StateDir:          os.Getenv("STATE_DIR"),
		CommitInterval:    100 * time.Millisecond,
		SessionTimeout:    6 * time.Second,
		HeartbeatInterval: 200 * time.Millisecond,
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
		// Without the record cache (on by default), as testConfig: the crash and
		// failover tests assert every update.
		CacheMaxBytes: -1,
	}
	if os.Getenv("GUARANTEE") == "eos" {
		cfg.Guarantee = kstream.ExactlyOnce
	}
	if os.Getenv("GROUP_PROTOCOL") == "streams" {
		cfg.GroupProtocol = kstream.GroupProtocolStreams
	}
	return cfg
}
