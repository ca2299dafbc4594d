package kstream_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Sibling independence: a filter that drops everything must not hide records from its
// siblings (the replaced library's bug).
func TestSiblingIndependenceFilter(t *testing.T) {
	got := pipe(t, func(b *kstream.Builder, in, out string) {
		s := strs(b, in)
		s.Filter(func(string, string) bool { return false }).To(out, nil, nil)
		kstream.MapValues(s, strings.ToUpper).To(out, nil, serde.String())
	}, input(""), 4)
	check(t, got, sorted(
		want("a", "APPLE", 1, "h:1", parts), want("b", "BANANA", 2, "", parts),
		want("c", "CHERRY", 3, "h:3", parts), want("a", "AVOCADO", 4, "", parts)))
}

// Same for a split where no branch matches and there is no default branch.
func TestSiblingIndependenceSplitNoMatch(t *testing.T) {
	got := pipe(t, func(b *kstream.Builder, in, out string) {
		s := strs(b, in)
		br := s.Split().Branch("never", func(string, string) bool { return false }).NoDefaultBranch()
		br["never"].To(out, nil, nil)
		kstream.MapValues(s, strings.ToUpper).To(out, nil, serde.String())
	}, input(""), 4)
	check(t, got, sorted(
		want("a", "APPLE", 1, "h:1", parts), want("b", "BANANA", 2, "", parts),
		want("c", "CHERRY", 3, "h:3", parts), want("a", "AVOCADO", 4, "", parts)))
}

// A processing error handled with Continue skips only the failing operator's subtree.
func TestProcessingErrorContinueKeepsSiblings(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", parts, nil)
	out := kafkatest.CreateTopic(t, "out", parts, nil)
	b := kstream.NewBuilder()
	s := strs(b, in)
	kstream.Process(s, func() kstream.Processor[string, string, string, string] {
		return kstream.ProcessorFunc[string, string, string, string](func(ctx kstream.ProcessorContext[string, string], r kstream.Record[string, string]) error {
			if r.Key == "b" {
				return errors.New("b is not allowed")
			}
			if r.Key == "c" {
				panic("c panics")
			}
			ctx.Forward(r)
			return nil
		})
	}, kstream.Named("picky")).To(out, serde.String(), serde.String())
	kstream.MapValues(s, strings.ToUpper).To(out, nil, serde.String())
	cfg := testConfig(t)
	var mu sync.Mutex
	var ecs []kstream.ErrorContext
	cfg.ProcessingErrorHandler = kstream.ErrorHandlerFunc(func(ec kstream.ErrorContext) kstream.ErrorResponse {
		mu.Lock()
		ecs = append(ecs, ec)
		mu.Unlock()
		return kstream.Continue()
	})
	start(t, newApp(t, b, cfg))
	kafkatest.Produce(t, kafkatest.Client(t), input(in)...)
	check(t, reduce(kafkatest.Consume(t, out, 6, 30*time.Second)), sorted(
		want("a", "apple", 1, "h:1", parts), want("a", "avocado", 4, "", parts),
		want("a", "APPLE", 1, "h:1", parts), want("b", "BANANA", 2, "", parts),
		want("c", "CHERRY", 3, "h:3", parts), want("a", "AVOCADO", 4, "", parts)))
	mu.Lock()
	defer mu.Unlock()
	if len(ecs) != 2 {
		t.Fatalf("handler saw %d errors, want 2: %+v", len(ecs), ecs)
	}
	for _, ec := range ecs {
		if ec.Operator != "picky" || ec.Topic != in || ec.Offset < 0 || ec.Kind != kstream.ProcessingError {
			t.Fatalf("bad error context: %+v", ec)
		}
	}
}

// lockedBuffer is a log sink safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A fixed sink topic that does not exist stops the app at start with an error, and a log
// line, naming the topic.
func TestMissingSinkTopic(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", parts, nil)
	missing := kafkatest.Name(t, "missing")
	b := kstream.NewBuilder()
	strs(b, in).To(missing, nil, nil)
	cfg := testConfig(t)
	var logs lockedBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	r := start(t, newApp(t, b, cfg))
	err, done := r.wait(30 * time.Second)
	if !done {
		t.Fatal("Run did not return")
	}
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", missing)) {
		t.Fatalf("error %v does not name topic %s", err, missing)
	}
	if !strings.Contains(logs.String(), missing) {
		t.Fatalf("no log line names %s:\n%s", missing, logs.String())
	}
}

// A topic chosen per record that does not exist is a production error naming the topic,
// the partition and the input record.
func TestMissingDynamicTopic(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", parts, nil)
	missing := kafkatest.Name(t, "missing")
	b := kstream.NewBuilder()
	strs(b, in).ToTopicFunc(func(kstream.Record[string, string]) string { return missing }, nil, nil)
	cfg := testConfig(t)
	var logs lockedBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	r := start(t, newApp(t, b, cfg))
	kafkatest.Produce(t, kafkatest.Client(t), rec(in, "a", "v", 1))
	err, done := r.wait(60 * time.Second)
	if !done {
		t.Fatal("Run did not return")
	}
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("topic %q", missing)) || !strings.Contains(err.Error(), "offset 0") {
		t.Fatalf("error %v does not name topic %s and the input offset", err, missing)
	}
	if !strings.Contains(logs.String(), missing) {
		t.Fatalf("no log line names %s:\n%s", missing, logs.String())
	}
}

// A missing source topic is reported by name at start.
func TestMissingSourceTopic(t *testing.T) {
	t.Parallel()
	missing := kafkatest.Name(t, "missing")
	out := kafkatest.CreateTopic(t, "out", parts, nil)
	b := kstream.NewBuilder()
	strs(b, missing).To(out, nil, nil)
	err, done := start(t, newApp(t, b, testConfig(t))).wait(30 * time.Second)
	if !done || err == nil || !strings.Contains(err.Error(), "source topic "+fmt.Sprintf("%q", missing)) {
		t.Fatalf("got %v (returned %v), want an error naming source topic %s", err, done, missing)
	}
}

// corruptInput has a record whose value is not a valid int64 (3 bytes) between good ones.
func corruptInput(topic string) []*kgo.Record {
	good := func(k string, n int64, ts int) *kgo.Record {
		b, _ := serde.Int64().Serialize(n)
		r := rec(topic, k, "", ts)
		r.Value = b
		return r
	}
	bad := rec(topic, "bad", "xyz", 2, "trace", "t-1")
	return []*kgo.Record{good("k1", 1, 1), bad, good("k2", 2, 3)}
}

func TestDeserializationLogAndContinue(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	b := kstream.NewBuilder()
	kstream.MapValues(kstream.Stream(b, in, serde.String(), serde.Int64()), func(n int64) string { return fmt.Sprint(n * 10) }).
		To(out, nil, serde.String())
	cfg := testConfig(t)
	cfg.DeserializationErrorHandler = kstream.LogAndContinue()
	var logs lockedBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	start(t, newApp(t, b, cfg))
	kafkatest.Produce(t, kafkatest.Client(t), corruptInput(in)...)
	check(t, reduce(kafkatest.Consume(t, out, 2, 30*time.Second)), sorted(want("k1", "10", 1, "", 1), want("k2", "20", 3, "", 1)))
	if extra := kafkatest.Drain(t, out, 500*time.Millisecond, 30*time.Second); len(extra) != 2 {
		t.Fatalf("got %d records, want 2", len(extra))
	}
	l := logs.String()
	if !strings.Contains(l, "deserialization error") || !strings.Contains(l, "topic="+in) || !strings.Contains(l, "offset=1") {
		t.Fatalf("log does not describe the skipped record:\n%s", l)
	}
}

func TestDeserializationDeadLetter(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	dlq := kafkatest.CreateTopic(t, "dlq", 1, nil)
	b := kstream.NewBuilder()
	kstream.MapValues(kstream.Stream(b, in, serde.String(), serde.Int64(), kstream.Named("numbers")), func(n int64) string { return fmt.Sprint(n * 10) }).
		To(out, nil, serde.String())
	cfg := testConfig(t)
	cfg.DeserializationErrorHandler = kstream.DeadLetterQueue(dlq)
	start(t, newApp(t, b, cfg))
	kafkatest.Produce(t, kafkatest.Client(t), corruptInput(in)...)
	kafkatest.Consume(t, out, 2, 30*time.Second)
	dl := kafkatest.Consume(t, dlq, 1, 30*time.Second)
	if len(dl) != 1 {
		t.Fatalf("dead-letter records: %d", len(dl))
	}
	d := dl[0]
	if string(d.Key) != "bad" || string(d.Value) != "xyz" {
		t.Fatalf("dead-letter record is not the raw input: key %q value %q", d.Key, d.Value)
	}
	h := map[string]string{}
	for _, hd := range d.Headers {
		h[hd.Key] = string(hd.Value)
	}
	wantH := map[string]string{
		"trace":                      "t-1",
		kstream.HeaderErrorKind:      "deserialization",
		kstream.HeaderErrorTopic:     in,
		kstream.HeaderErrorPartition: "0",
		kstream.HeaderErrorOffset:    "1",
		kstream.HeaderErrorOperator:  "numbers",
	}
	for k, v := range wantH {
		if h[k] != v {
			t.Errorf("header %s = %q, want %q (all: %v)", k, h[k], v, h)
		}
	}
	if !strings.Contains(h[kstream.HeaderErrorMessage], "want 8") {
		t.Errorf("error message header %q does not explain the failure", h[kstream.HeaderErrorMessage])
	}
	checkJavaDeadLetter(t, d, "trace", baseTime.Add(2*time.Millisecond))
}

// checkJavaDeadLetter checks a dead-letter record against Kafka Streams' format (KIP-1034):
// the input record's timestamp, its own headers first (named in own), then Java's six
// headers in Java's order, then kstream's, each once.
func checkJavaDeadLetter(t *testing.T, d *kgo.Record, own string, ts time.Time) {
	t.Helper()
	if !d.Timestamp.Equal(ts) {
		t.Errorf("dead-letter timestamp %v, want the input record's %v", d.Timestamp, ts)
	}
	var keys []string
	for _, h := range d.Headers {
		keys = append(keys, h.Key)
	}
	wantKeys := []string{
		"__streams.errors.exception", "__streams.errors.message", "__streams.errors.stacktrace",
		"__streams.errors.topic", "__streams.errors.partition", "__streams.errors.offset",
		kstream.HeaderErrorKind, kstream.HeaderErrorOperator,
	}
	if own != "" {
		wantKeys = append([]string{own}, wantKeys...)
	}
	if !slices.Equal(keys, wantKeys) {
		t.Errorf("dead-letter header keys\n got %q\nwant %q", keys, wantKeys)
	}
	for _, h := range d.Headers {
		if strings.HasPrefix(h.Key, "__streams.errors.") && len(h.Value) == 0 {
			t.Errorf("header %s is empty", h.Key)
		}
	}
}

// A processing error that is a panic: the dead letter's exception header names the panic's
// type, and its stack-trace header holds the goroutine's stack.
func TestProcessingPanicDeadLetter(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	dlq := kafkatest.CreateTopic(t, "dlq", 1, nil)
	b := kstream.NewBuilder()
	kstream.MapValues(kstream.Stream(b, in, serde.String(), serde.String()), func(v string) string {
		if v == "boom" {
			var m map[string]int
			m[v] = 1 // a runtime error: assignment to entry in nil map
		}
		return strings.ToUpper(v)
	}, kstream.Named("shout")).To(out, nil, nil)
	cfg := testConfig(t)
	cfg.ProcessingErrorHandler = kstream.DeadLetterQueue(dlq)
	start(t, newApp(t, b, cfg))
	kafkatest.Produce(t, kafkatest.Client(t), rec(in, "a", "ok", 1), rec(in, "b", "boom", 2, "trace", "t-2"), rec(in, "c", "fine", 3))
	check(t, reduce(kafkatest.Consume(t, out, 2, 30*time.Second)), sorted(want("a", "OK", 1, "", 1), want("c", "FINE", 3, "", 1)))
	dl := kafkatest.Consume(t, dlq, 1, 30*time.Second)
	d := dl[0]
	if string(d.Key) != "b" || string(d.Value) != "boom" {
		t.Fatalf("dead-letter record is not the raw input: key %q value %q", d.Key, d.Value)
	}
	checkJavaDeadLetter(t, d, "trace", baseTime.Add(2*time.Millisecond))
	h := map[string]string{}
	for _, hd := range d.Headers {
		h[hd.Key] = string(hd.Value)
	}
	if got := h[kstream.HeaderErrorException]; got != "panic(runtime.plainError)" && !strings.HasPrefix(got, "panic(runtime.") {
		t.Errorf("exception header %q, want the panic's runtime error type", got)
	}
	if !strings.Contains(h[kstream.HeaderErrorMessage], "nil map") {
		t.Errorf("message header %q", h[kstream.HeaderErrorMessage])
	}
	if st := h[kstream.HeaderErrorStacktrace]; !strings.Contains(st, "goroutine") || !strings.Contains(st, "errors_test.go") {
		t.Errorf("stack-trace header has no goroutine stack through the operator:\n%s", st)
	}
	if h[kstream.HeaderErrorTopic] != in || h[kstream.HeaderErrorPartition] != "0" || h[kstream.HeaderErrorOffset] != "1" ||
		h[kstream.HeaderErrorKind] != "processing" || h[kstream.HeaderErrorOperator] != "shout" {
		t.Errorf("headers %v", h)
	}
}

// Under the default handler a corrupt record stops the app with an error that names the
// record's coordinates, and its offset is not committed.
func TestDeserializationFailStops(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	b := kstream.NewBuilder()
	kstream.Stream(b, in, serde.String(), serde.Int64()).To(out, nil, nil)
	cfg := testConfig(t)
	r := start(t, newApp(t, b, cfg))
	kafkatest.Produce(t, kafkatest.Client(t), corruptInput(in)...)
	err, done := r.wait(30 * time.Second)
	var re *kstream.RecordError
	if !done || !errors.As(err, &re) || re.Topic != in || re.Offset != 1 || re.Kind != kstream.DeserializationError {
		t.Fatalf("got %v, want a RecordError at %s offset 1", err, in)
	}
	if msg := err.Error(); !strings.Contains(msg, "Config.DeserializationErrorHandler is LogAndFail") || !strings.Contains(msg, "kstream.DeadLetterQueue(topic)") {
		t.Errorf("error %q does not name the handlers that would skip the record", msg)
	}
	committed := committedOffsets(t, cfg.ApplicationID, in)
	if committed[0] > 1 {
		t.Fatalf("committed offset %d is past the failed record", committed[0])
	}
}

// Production errors (a topic that does not exist, a value that cannot be serialized) go to
// the dead-letter topic with the raw input record, and the app goes on.
func TestProductionErrorDeadLetter(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	dlq := kafkatest.CreateTopic(t, "dlq", 1, nil)
	missing := kafkatest.Name(t, "missing")
	b := kstream.NewBuilder()
	picky := serde.Funcs(func(v string) ([]byte, error) {
		if v == "unserializable" {
			return nil, errors.New("refusing to serialize")
		}
		return []byte(v), nil
	}, nil)
	strs(b, in).ToTopicFunc(func(r kstream.Record[string, string]) string {
		if r.Key == "lost" {
			return missing
		}
		return out
	}, serde.String(), picky, kstream.Named("router"))
	cfg := testConfig(t)
	cfg.ProductionErrorHandler = kstream.DeadLetterQueue(dlq)
	r := start(t, newApp(t, b, cfg))
	kafkatest.Produce(t, kafkatest.Client(t), rec(in, "ok1", "v1", 1), rec(in, "lost", "v2", 2), rec(in, "bad", "unserializable", 3), rec(in, "ok2", "v4", 4))
	check(t, reduce(kafkatest.Consume(t, out, 2, 60*time.Second)), sorted(want("ok1", "v1", 1, "", 1), want("ok2", "v4", 4, "", 1)))
	dl := kafkatest.Consume(t, dlq, 2, 60*time.Second)
	byKey := map[string]map[string]string{}
	for _, d := range dl {
		h := map[string]string{"value": string(d.Value)}
		for _, hd := range d.Headers {
			h[hd.Key] = string(hd.Value)
		}
		byKey[string(d.Key)] = h
	}
	lost, bad := byKey["lost"], byKey["bad"]
	if lost["value"] != "v2" || lost[kstream.HeaderErrorSinkTopic] != missing || lost[kstream.HeaderErrorOffset] != "1" ||
		lost[kstream.HeaderErrorKind] != "production" || lost[kstream.HeaderErrorOperator] != "router" || !strings.Contains(lost[kstream.HeaderErrorMessage], missing) {
		t.Errorf("dead letter for the missing topic: %v", lost)
	}
	if bad["value"] != "unserializable" || bad[kstream.HeaderErrorOffset] != "2" || !strings.Contains(bad[kstream.HeaderErrorMessage], "refusing to serialize") {
		t.Errorf("dead letter for the serialization error: %v", bad)
	}
	for _, h := range []map[string]string{lost, bad} {
		if h[kstream.HeaderErrorException] == "" || !strings.Contains(h[kstream.HeaderErrorStacktrace], h[kstream.HeaderErrorMessage]) || h[kstream.HeaderErrorTopic] != in {
			t.Errorf("Kafka Streams' dead-letter headers missing: %v", h)
		}
	}
	if err, done := r.wait(100 * time.Millisecond); done {
		t.Fatalf("app stopped: %v", err)
	}
}

// A record that fails under LogAndFail (the default) stops the topology with an error that
// names the Config field of its handler and the handlers that would have skipped or
// dead-lettered it; under a handler of the user's own, which said Fail, it does not.
func TestLogAndFailErrorNamesHandlers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   kstream.Config
		pipe  func(d *kstreamtest.Driver) error
		kind  kstream.ErrorKind
		field string // "" for no hint
	}{
		{name: "deserialization default", kind: kstream.DeserializationError, field: "Config.DeserializationErrorHandler",
			pipe: func(d *kstreamtest.Driver) error {
				return kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.Int64()).PipeRaw([]byte("k"), []byte("not 8 bytes"), time.UnixMilli(1))
			}},
		{name: "deserialization explicit LogAndFail", kind: kstream.DeserializationError, field: "Config.DeserializationErrorHandler",
			cfg: kstream.Config{DeserializationErrorHandler: kstream.LogAndFail()},
			pipe: func(d *kstreamtest.Driver) error {
				return kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.Int64()).PipeRaw([]byte("k"), []byte("x"), time.UnixMilli(1))
			}},
		{name: "processing default", kind: kstream.ProcessingError, field: "Config.ProcessingErrorHandler",
			pipe: func(d *kstreamtest.Driver) error {
				return kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.Int64()).Pipe("k", -1)
			}},
		{name: "own handler", kind: kstream.DeserializationError,
			cfg: kstream.Config{DeserializationErrorHandler: kstream.ErrorHandlerFunc(func(kstream.ErrorContext) kstream.ErrorResponse { return kstream.Fail() })},
			pipe: func(d *kstreamtest.Driver) error {
				return kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.Int64()).PipeRaw([]byte("k"), []byte("x"), time.UnixMilli(1))
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := kstream.NewBuilder()
			src := kstream.Stream(b, "in", serde.String(), serde.Int64())
			kstream.Process(src, func() kstream.Processor[string, int64, string, int64] {
				return kstream.ProcessorFunc[string, int64, string, int64](func(ctx kstream.ProcessorContext[string, int64], r kstream.Record[string, int64]) error {
					if r.Value < 0 {
						return errors.New("negative")
					}
					ctx.Forward(r)
					return nil
				})
			}, kstream.Named("check")).To("out", nil, nil)
			d, err := kstreamtest.New(b, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			err = tc.pipe(d)
			var re *kstream.RecordError
			if !errors.As(err, &re) || re.Kind != tc.kind {
				t.Fatalf("got %v, want a %s RecordError", err, tc.kind)
			}
			msg := err.Error()
			if tc.field == "" {
				if strings.Contains(msg, "LogAndContinue") || strings.Contains(msg, "DeadLetterQueue") {
					t.Fatalf("a failure under the user's own handler names the built-in ones: %s", msg)
				}
				return
			}
			for _, want := range []string{tc.field + " is LogAndFail", "kstream.LogAndContinue()", "kstream.DeadLetterQueue(topic)", `topic "in" partition 0 offset 0`} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not contain %q", msg, want)
				}
			}
		})
	}
}
