package kstreamtest_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
)

func TestWindowedCountSmoke(t *testing.T) {
	for _, onClose := range []bool{false, true} {
		b := kstream.NewBuilder()
		s := kstream.Stream(b, "in", serde.String(), serde.String())
		w := s.GroupByKey().WindowedBy(kstream.TimeWindowsOf(10 * time.Second).AdvanceBy(5 * time.Second).WithGrace(2 * time.Second))
		if onClose {
			w = w.EmitOnWindowClose()
		}
		kstream.MapValues(kstream.WindowedCount(w, "counts").ToStream(), func(n int64) string { return fmt.Sprint(n) }).
			To("out", serde.TimeWindowed(serde.String(), 10*time.Second), serde.String())
		d := driverWith(t, b, kstream.Config{ApplicationID: "win"})
		in := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String())
		out := kstreamtest.CreateOutputTopic(d, "out", serde.TimeWindowed(serde.String(), 10*time.Second), serde.String())
		for _, r := range []struct {
			k  string
			ms int64
		}{{"a", 1000}, {"a", 6000}, {"b", 12000}, {"a", 3000}, {"a", 17000}, {"a", 1000}, {"a", 30000}} {
			if err := in.PipeAt(r.k, "v", time.UnixMilli(r.ms)); err != nil {
				t.Fatal(err)
			}
		}
		recs, err := out.ReadRecords()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("onClose=%v dropped=%d", onClose, d.DroppedRecords())
		for _, r := range recs {
			t.Logf("  %v = %s @%d", r.Key, r.Value, r.Timestamp.UnixMilli())
		}
	}
}

// The driver reads a windowed aggregation's store: its windows and values, by key and time
// range, after the records piped so far.
func TestDriverWindowStore(t *testing.T) {
	b := kstream.NewBuilder()
	s := kstream.Stream(b, "in", serde.String(), serde.String())
	kstream.WindowedCount(s.GroupByKey().WindowedBy(kstream.TimeWindowsOf(10*time.Second)), "counts", kstream.WithRetention(time.Minute))
	d := driverWith(t, b, kstream.Config{ApplicationID: "win"})
	in := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String())
	for _, r := range []struct {
		k  string
		ms int64
	}{{"a", 1000}, {"a", 6000}, {"b", 12000}, {"a", 13000}, {"a", 25000}} {
		if err := in.PipeAt(r.k, "v", time.UnixMilli(r.ms)); err != nil {
			t.Fatal(err)
		}
	}
	ws, err := kstreamtest.WindowStore(d, "counts", 0, serde.String(), serde.Int64())
	if err != nil {
		t.Fatal(err)
	}
	it, err := ws.FetchRange("a", time.UnixMilli(0), time.UnixMilli(20000)) // start times, inclusive
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var got []string
	for it.Next() {
		got = append(got, fmt.Sprintf("%v=%d", it.Key(), it.Value()))
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if want := "[[a@0/10000]=2 [a@10000/20000]=1 [a@20000/30000]=1]"; fmt.Sprint(got) != want {
		t.Fatalf("window store of a: %v, want %s", got, want)
	}
	if v, ok, err := ws.Fetch("b", time.UnixMilli(10000)); err != nil || !ok || v != 1 {
		t.Fatalf("Fetch(b, 10000) = %d, %v, %v; want 1", v, ok, err)
	}
	if _, err := kstreamtest.SessionStore(d, "counts", 0, serde.String(), serde.Int64()); err == nil {
		t.Fatal("SessionStore opened a window store")
	}
}

// With no grace and the default retention (the window size), the record that closes a
// window also moves the store's stream time so that the window is at the retention edge:
// the aggregation still emits its final result, as Kafka Streams' time-ordered store does.
func TestEmitOnWindowCloseNoGrace(t *testing.T) {
	b := kstream.NewBuilder()
	s := kstream.Stream(b, "in", serde.String(), serde.String())
	w := s.GroupByKey().WindowedBy(kstream.TimeWindowsOf(10 * time.Second)).EmitOnWindowClose()
	kstream.MapValues(kstream.WindowedCount(w, "counts").ToStream(), func(n int64) string { return fmt.Sprint(n) }).
		To("out", serde.TimeWindowed(serde.String(), 10*time.Second), serde.String())
	d := driverWith(t, b, kstream.Config{ApplicationID: "win"})
	in := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String())
	for _, ms := range []int64{1000, 5000, 12000, 25000} {
		if err := in.PipeAt("a", "v", time.UnixMilli(ms)); err != nil {
			t.Fatal(err)
		}
	}
	kvs, err := kstreamtest.CreateOutputTopic(d, "out", serde.TimeWindowed(serde.String(), 10*time.Second), serde.String()).ReadKeyValues()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(kvs), "[{[a@0/10000] 2} {[a@10000/20000] 1}]"; got != want {
		t.Fatalf("final results %s, want %s", got, want)
	}
}
