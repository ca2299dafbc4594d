package kstream_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ResetByDuration, per source and as Config.OffsetReset: a partition without a committed
// offset starts at the first record stamped at or after now minus the duration, or at the
// end when every record is older; a source's own policy overrides the config's.
func TestOffsetResetByDuration(t *testing.T) {
	t.Parallel()
	own := kafkatest.CreateTopic(t, "own", 1, nil)
	dflt := kafkatest.CreateTopic(t, "dflt", 1, nil)
	old := kafkatest.CreateTopic(t, "old", 1, nil)
	early := kafkatest.CreateTopic(t, "early", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	now := time.Now()
	at := func(topic, v string, ago time.Duration) *kgo.Record {
		return &kgo.Record{Topic: topic, Key: []byte(v), Value: []byte(v), Timestamp: now.Add(-ago)}
	}
	cl := kafkatest.Client(t)
	kafkatest.Produce(t, cl,
		at(own, "own-3h", 3*time.Hour), at(own, "own-90m", 90*time.Minute), at(own, "own-30m", 30*time.Minute), at(own, "own-1m", time.Minute),
		at(dflt, "dflt-2h", 2*time.Hour), at(dflt, "dflt-10m", 10*time.Minute),
		at(old, "old-5h", 5*time.Hour),
		at(early, "early-5h", 5*time.Hour))

	b := kstream.NewBuilder()
	kstream.Stream(b, own, serde.String(), serde.String(), kstream.WithOffsetReset(kstream.ResetByDuration(time.Hour))).To(out, nil, nil)
	kstream.Stream(b, dflt, serde.String(), serde.String()).To(out, nil, nil)
	kstream.Stream(b, old, serde.String(), serde.String()).To(out, nil, nil)
	kstream.Stream(b, early, serde.String(), serde.String(), kstream.WithOffsetReset(kstream.ResetEarliest)).To(out, nil, nil)
	cfg := testConfig(t)
	cfg.OffsetReset = kstream.ResetByDuration(time.Hour)
	app := newApp(t, b, cfg)
	start(t, app)

	values := func(recs []*kgo.Record) []string {
		var vs []string
		for _, r := range recs {
			vs = append(vs, string(r.Value))
		}
		slices.Sort(vs)
		return vs
	}
	want := []string{"dflt-10m", "early-5h", "own-1m", "own-30m"}
	if got := values(kafkatest.Consume(t, out, len(want), 30*time.Second)); !slices.Equal(got, want) {
		t.Fatalf("processed %v, want %v", got, want)
	}
	// "old" had no record within the hour: it started at its end, so a new record is the
	// next one processed, and nothing older came through meanwhile.
	kafkatest.Produce(t, cl, at(old, "old-new", 0))
	want = append(want, "old-new")
	slices.Sort(want)
	got := values(kafkatest.Consume(t, out, len(want), 30*time.Second))
	if !slices.Equal(got, want) {
		t.Fatalf("processed %v, want %v", got, want)
	}
	if more := kafkatest.ConsumeAtMost(t, out, len(want)+1, 500*time.Millisecond); len(more) > len(want) {
		t.Fatalf("processed %v, want %v", values(more), want)
	}
}

// A negative duration is refused, per source at Build and in the Config at New.
func TestOffsetResetByDurationNegative(t *testing.T) {
	b := kstream.NewBuilder()
	kstream.Stream(b, "in", serde.String(), serde.String(), kstream.WithOffsetReset(kstream.ResetByDuration(-time.Minute))).To("out", nil, nil)
	if _, err := b.Build(); err == nil || !strings.Contains(err.Error(), "Stream(in): WithOffsetReset: ResetByDuration(-1m0s): the duration must not be negative") {
		t.Errorf("Build: %v", err)
	}
	b = kstream.NewBuilder()
	kstream.Stream(b, "in", serde.String(), serde.String()).To("out", nil, nil)
	_, err := kstream.New(b, kstream.Config{ApplicationID: "a", Brokers: []string{"127.0.0.1:1"}, OffsetReset: kstream.ResetByDuration(-time.Second)})
	if err == nil || !strings.Contains(err.Error(), "Config.OffsetReset: ResetByDuration(-1s)") {
		t.Errorf("New: %v", err)
	}
	if s := kstream.ResetByDuration(90 * time.Minute).String(); s != "by_duration:1h30m0s" {
		t.Errorf("String: %q", s)
	}
	if d, ok := kstream.ResetByDuration(time.Hour).Duration(); !ok || d != time.Hour {
		t.Errorf("Duration: %v, %v", d, ok)
	}
	if _, ok := kstream.ResetLatest.Duration(); ok {
		t.Error("ResetLatest has a duration")
	}
}
