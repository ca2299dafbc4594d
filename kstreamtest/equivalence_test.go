package kstreamtest_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
)

func viaDriver(t *testing.T, repartition bool) []kvts {
	b := kstream.NewBuilder()
	confStateless(kstream.Stream(b, "in", serde.String(), serde.String()), "out", repartition)
	d, err := kstreamtest.New(b, kstream.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	in := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String())
	for _, r := range confInput() {
		if r.topic != "in" {
			continue
		}
		if err := in.PipeRaw(confBytes(r.key), confBytes(r.value), r.ts, r.headers...); err != nil {
			t.Fatal(err)
		}
	}
	return readAll(t, kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.String()))
}

func viaBroker(t *testing.T, repartition bool, n int) []kvts {
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	b := kstream.NewBuilder()
	confStateless(kstream.Stream(b, in, serde.String(), serde.String()), out, repartition)
	app, err := kstream.New(b, kstream.Config{ApplicationID: kafkatest.Name(t, "app"), Brokers: kafkatest.Brokers(t), CommitInterval: 100 * time.Millisecond, SessionTimeout: 6 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	var raw []*kgo.Record
	for _, r := range confInput() {
		if r.topic != "in" {
			continue
		}
		kr := &kgo.Record{Topic: in, Key: confBytes(r.key), Value: confBytes(r.value), Timestamp: r.ts}
		for _, h := range r.headers {
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		raw = append(raw, kr)
	}
	kafkatest.Produce(t, kafkatest.Client(t), raw...)
	recs := kafkatest.Consume(t, out, n, 60*time.Second)
	res := make([]kvts, 0, len(recs))
	for _, r := range recs {
		var hs []string
		for _, h := range r.Headers {
			hs = append(hs, h.Key+"="+string(h.Value))
		}
		res = append(res, kvts{string(r.Key), string(r.Value), r.Timestamp.Sub(t0).Milliseconds(), strings.Join(hs, ",")})
	}
	return res
}

// The same topology and input give the same output through the driver and through the
// runtime on a broker (the "stateless" conformance topology): in the same order within one
// sub-topology and one partition.
func TestDriverMatchesRuntime(t *testing.T) {
	t.Parallel()
	want := viaDriver(t, false)
	got := viaBroker(t, false, len(want))
	if !slices.Equal(got, want) {
		t.Fatalf("broker output differs from the driver's\nbroker: %v\ndriver: %v", got, want)
	}
}

// Across a repartition topic the interleaving of branches may differ (on a broker the
// repartitioned records come back later), so the outputs are compared as multisets.
func TestDriverMatchesRuntimeAcrossRepartition(t *testing.T) {
	t.Parallel()
	want := viaDriver(t, true)
	got := viaBroker(t, true, len(want))
	cmp := func(a, b kvts) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) }
	slices.SortFunc(want, cmp)
	slices.SortFunc(got, cmp)
	if !slices.Equal(got, want) {
		t.Fatalf("broker output differs from the driver's\nbroker: %v\ndriver: %v", got, want)
	}
}
