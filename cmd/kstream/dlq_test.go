package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
)

// recordString shows a record as "key=value ts=<ms> headers=[k:v ...] @partition/offset".
func recordString(r *kgo.Record) string {
	var hs []string
	for _, h := range r.Headers {
		hs = append(hs, h.Key+":"+string(h.Value))
	}
	return fmt.Sprintf("%s=%s ts=%d headers=%v @%d/%d", r.Key, r.Value, r.Timestamp.UnixMilli(), hs, r.Partition, r.Offset)
}

// readFrom returns the committed records of topic's partitions from the given offsets,
// waiting for n of them.
func readFrom(t *testing.T, topic string, from map[int32]int64, n int) []string {
	t.Helper()
	offs := map[int32]kgo.Offset{}
	for p, o := range from {
		offs[p] = kgo.NewOffset().At(o)
	}
	cl := kafkatest.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	ctx := kafkatest.Context(t, 30*time.Second)
	var out []string
	for len(out) < n && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { out = append(out, recordString(r)) })
	}
	if len(out) < n {
		t.Fatalf("%s: got %v, want %d records", topic, out, n)
	}
	slices.Sort(out)
	return out
}

// kstream dlq replay sends the records an exactly-once app dead-lettered (a
// deserialization and a processing error) back to their source partition, as they were,
// with filters on kind, source topic and count, or to another topic with -to; a dry run
// sends nothing.
func TestDLQReplay(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, &logLines{t: t})
	cfg.Guarantee = kstream.ExactlyOnce
	cfg.StateDir = t.TempDir()
	in := kafkatest.CreateTopic(t, "in", 2, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	dlq := kafkatest.CreateTopic(t, "dlq", 1, nil)
	other := kafkatest.CreateTopic(t, "other", 1, nil)
	cfg.DeserializationErrorHandler = kstream.DeadLetterQueue(dlq)
	cfg.ProcessingErrorHandler = kstream.DeadLetterQueue(dlq)

	values := serde.Funcs(func(s string) ([]byte, error) { return []byte(s), nil }, func(b []byte) (string, error) {
		if string(b) == "bad" {
			return "", errors.New("not a value")
		}
		return string(b), nil
	})
	b := kstream.NewBuilder()
	upper := kstream.MapValues(kstream.Stream(b, in, serde.String(), values), func(v string) string {
		if v == "boom" {
			panic("boom")
		}
		return strings.ToUpper(v)
	}, kstream.Named("upper"))
	upper.To(out, serde.String(), serde.String())
	r := startApp(t, b, cfg)

	ts := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	p := kafkatest.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	kafkatest.Produce(t, p,
		&kgo.Record{Topic: in, Partition: 0, Key: []byte("k1"), Value: []byte("ok1"), Timestamp: ts},
		&kgo.Record{Topic: in, Partition: 0, Key: []byte("k2"), Value: []byte("bad"), Timestamp: ts.Add(1 * time.Millisecond), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("1")}}},
		&kgo.Record{Topic: in, Partition: 1, Key: []byte("k3"), Value: []byte("boom"), Timestamp: ts.Add(2 * time.Millisecond), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("2")}}},
		&kgo.Record{Topic: in, Partition: 1, Key: []byte("k4"), Value: []byte("ok2"), Timestamp: ts.Add(3 * time.Millisecond)})
	readFrom(t, out, map[int32]int64{0: 0}, 2)
	dead := kafkatest.Consume(t, dlq, 2, 30*time.Second, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	// The two input partitions' tasks dead-letter in either order.
	byKey := map[string]*kgo.Record{}
	for _, d := range dead {
		byKey[string(d.Key)] = d
	}
	if byKey["k2"] == nil || byKey["k3"] == nil {
		t.Fatalf("dead letters: %s, %s", recordString(dead[0]), recordString(dead[1]))
	}
	deser, proc := fmt.Sprintf("%s/0@%d", dlq, byKey["k2"].Offset), fmt.Sprintf("%s/0@%d", dlq, byKey["k3"].Offset)
	replayed := map[string]string{ // the records as they were
		"k2": fmt.Sprintf("k2=bad ts=%d headers=[h:1]", ts.Add(time.Millisecond).UnixMilli()),
		"k3": fmt.Sprintf("k3=boom ts=%d headers=[h:2]", ts.Add(2*time.Millisecond).UnixMilli()),
	}
	first := string(dead[0].Key)
	if dead[1].Offset < dead[0].Offset {
		first = string(dead[1].Key)
	}
	base := []string{"dlq", "replay", "-brokers", brokers(t), "-topic", dlq}

	// A dry run prints both and sends nothing.
	got := mustCLI(t, append(base, "-dry-run")...)
	for _, want := range []string{
		"Dry run: nothing is sent.\n",
		fmt.Sprintf("would  %s: deserialization error at %s/0@1 (operator ", deser, in),
		fmt.Sprintf("key \"k2\", timestamp %s -> %s/0\n", ts.Add(time.Millisecond).UTC().Format(time.RFC3339Nano), in),
		fmt.Sprintf("would  %s: processing error at %s/1@0 (operator upper), key \"k3\"", proc, in),
		"would replay 2 record(s), skipped 0.\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("dry run output lacks %q", want)
		}
	}
	if e0, e1 := endOffset(t, in, 0), endOffset(t, in, 1); e0 != 2 || e1 != 2 {
		t.Fatalf("after the dry run %s ends at %d, %d, want 2, 2", in, e0, e1)
	}

	// -kind processing: k3 goes back to partition 1 as it was, without the error headers.
	got = mustCLI(t, append(base, "-kind", "processing")...)
	for _, want := range []string{
		fmt.Sprintf("skip   %s: kind \"deserialization\" not selected\n", deser),
		fmt.Sprintf("replay %s: processing error at %s/1@0 (operator upper), key \"k3\"", proc, in),
		fmt.Sprintf("-> %s/1@2\n", in),
		"replayed 1 record(s), skipped 1.\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("-kind processing output lacks %q", want)
		}
	}
	if got, want := readFrom(t, in, map[int32]int64{1: 2}, 1), []string{replayed["k3"] + " @1/2"}; !slices.Equal(got, want) {
		t.Fatalf("replayed: %v, want %v", got, want)
	}

	// -to another topic, -source-topic, -limit 1: the first dead letter only.
	got = mustCLI(t, append(base, "-to", other, "-source-topic", in, "-limit", "1")...)
	if !strings.Contains(got, fmt.Sprintf("replay %s/0@%d: ", dlq, min(dead[0].Offset, dead[1].Offset))) || !strings.Contains(got, fmt.Sprintf("-> %s/0@0\n", other)) ||
		!strings.HasSuffix(got, "replayed 1 record(s), skipped 0.\n") {
		t.Errorf("-to -limit 1 output:\n%s", got)
	}
	if got, want := readFrom(t, other, map[int32]int64{0: 0}, 1), []string{replayed[first] + " @0/0"}; !slices.Equal(got, want) {
		t.Fatalf("replayed to %s: %v, want %v", other, got, want)
	}

	// Filters that select nothing; offsets past the end.
	got = mustCLI(t, append(base, "-source-topic", "nope", "-dry-run")...)
	if !strings.Contains(got, "source topic \""+in+"\" not selected") || !strings.HasSuffix(got, "would replay 0 record(s), skipped 2.\n") {
		t.Errorf("-source-topic nope output:\n%s", got)
	}
	got = mustCLI(t, append(base, "-from-offset", "1000")...)
	if got != "replayed 0 record(s), skipped 0.\n" {
		t.Errorf("-from-offset past the end output:\n%s", got)
	}
	got = mustCLI(t, append(base, "-since", "1m", "-dry-run")...) // dead letters carry their input's timestamp: a minute ago
	if !strings.HasSuffix(got, "would replay 0 record(s), skipped 2.\n") {
		t.Errorf("-since 1m output:\n%s", got)
	}
	if e0, e1 := endOffset(t, in, 0), endOffset(t, in, 1); e0 != 2 || e1 != 3 {
		t.Fatalf("%s ends at %d, %d, want 2, 3 (one record replayed)", in, e0, e1)
	}
	if _, _, err := cli(t, "dlq", "replay", "-brokers", brokers(t), "-topic", dlq, "-kind", "oops"); !errors.Is(err, errUsage) {
		t.Errorf("-kind oops: %v, want a usage error", err)
	}
}
