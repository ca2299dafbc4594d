package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// logLines keeps what an app logs (warn and above) and logs it to the test too.
type logLines struct {
	t     testing.TB
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Write(p []byte) (int, error) {
	line := strings.TrimRight(string(p), "\n")
	l.t.Log(line)
	l.mu.Lock()
	l.lines = append(l.lines, line)
	l.mu.Unlock()
	return len(p), nil
}

// has reports whether one line contains every one of subs.
func (l *logLines) has(subs ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		ok := true
		for _, s := range subs {
			ok = ok && strings.Contains(line, s)
		}
		if ok {
			return true
		}
	}
	return false
}

// testConfig is the Config of a fresh application on the shared broker, logging to logs,
// without the record cache.
func testConfig(t testing.TB, logs *logLines) kstream.Config {
	return kstream.Config{
		ApplicationID:     kafkatest.Name(t, "app"),
		Brokers:           kafkatest.Brokers(t),
		CommitInterval:    100 * time.Millisecond,
		SessionTimeout:    6 * time.Second,
		HeartbeatInterval: 200 * time.Millisecond,
		Logger:            slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
		// The record cache (on by default) would merge a key's updates of a commit; the
		// tests read every count the application wrote.
		CacheMaxBytes: -1,
	}
}

// running is an App run in the background until stop.
type running struct {
	app    *kstream.App
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// startApp builds the app of b and runs it until the test ends or stop is called.
func startApp(t *testing.T, b *kstream.Builder, cfg kstream.Config) *running {
	t.Helper()
	app, err := kstream.New(b, cfg)
	if err != nil {
		t.Fatalf("kstream.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{app: app, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- app.Run(ctx) }()
	t.Cleanup(func() { _ = r.stop() })
	return r
}

// stop cancels the app and waits for Run to return.
func (r *running) stop() error {
	r.once.Do(func() {
		r.cancel()
		select {
		case r.err = <-r.done:
			if errors.Is(r.err, context.Canceled) {
				r.err = nil
			}
		case <-time.After(30 * time.Second):
			r.err = errors.New("the app did not stop within 30s")
		}
	})
	return r.err
}

// waitRunning waits until the app is RUNNING with tasks.
func (r *running) waitRunning(t *testing.T) {
	t.Helper()
	kafkatest.Eventually(t, 30*time.Second, "the app running with tasks", func() bool {
		return r.app.State() == kstream.StateRunning && len(r.app.Tasks()) > 0
	})
}

// countBuilder counts the records of in per key into "counts" and writes each new count to
// out.
func countBuilder(in, out string) *kstream.Builder {
	b := kstream.NewBuilder()
	kstream.Count(kstream.Stream(b, in, serde.String(), serde.String()).GroupByKey(), "counts").ToStream().To(out, nil, serde.Int64())
	return b
}

// produceKeys writes one record per key to partition 0 of topic.
func produceKeys(t *testing.T, topic string, keys ...string) {
	t.Helper()
	var recs []*kgo.Record
	for _, k := range keys {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(k), Value: []byte("v")})
	}
	kafkatest.Produce(t, kafkatest.Client(t), recs...)
}

// endOffset returns the end offset of partition p of topic.
func endOffset(t *testing.T, topic string, p int32) int64 {
	t.Helper()
	ends, err := kadm.NewClient(kafkatest.Client(t)).ListEndOffsets(kafkatest.Context(t, 10*time.Second), topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	o, _ := ends.Lookup(topic, p)
	return o.Offset
}

// counts reads n records of partition 0 of topic from offset from, as "key=count".
func counts(t *testing.T, topic string, from int64, n int) []string {
	t.Helper()
	cl := kafkatest.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(from)}}))
	ctx := kafkatest.Context(t, 30*time.Second)
	var out []string
	for len(out) < n && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			v, err := serde.Int64().Deserialize(r.Value)
			if err != nil {
				t.Errorf("%s@%d: %v", topic, r.Offset, err)
			}
			out = append(out, fmt.Sprintf("%s=%d", r.Key, v))
		})
	}
	if len(out) < n {
		t.Fatalf("%s from offset %d: got %v, want %d records", topic, from, out, n)
	}
	return out
}

// committed returns the offsets group committed, as "topic/partition" -> offset.
func committed(t *testing.T, group string) map[string]int64 {
	t.Helper()
	resp, err := kadm.NewClient(kafkatest.Client(t)).FetchOffsets(kafkatest.Context(t, 10*time.Second), group)
	if err != nil {
		t.Fatalf("fetching the offsets of %s: %v", group, err)
	}
	out := map[string]int64{}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Err == nil {
			out[fmt.Sprintf("%s/%d", o.Topic, o.Partition)] = o.At
		}
	})
	return out
}

// cli runs the kstream command line args in-process and returns its stdout, stderr and
// error.
func cli(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	err := run(kafkatest.Context(t, 60*time.Second), args, &stdout, &stderr)
	t.Logf("kstream %s\n%s%s(err %v, %v)", strings.Join(args, " "), stdout.String(), stderr.String(), err, time.Since(start).Round(time.Millisecond))
	return stdout.String(), stderr.String(), err
}

// mustCLI is cli that fails the test on an error.
func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, _, err := cli(t, args...)
	if err != nil {
		t.Fatalf("kstream %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// brokers is the -brokers value of the shared test broker.
func brokers(t *testing.T) string { return strings.Join(kafkatest.Brokers(t), ",") }
