package kstreamtest_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
)

// The last windows of a burst close on idleness with CloseWhenIdle: a revenue per
// customer per minute (10 s of grace) gets orders at 10:00:05 and 10:00:50, then nothing.
// Without the option its window never closes; with CloseWhenIdle(30s) it closes once the
// wall clock has moved 30 s past the last order (stream time 10:01:20 at 30 s + 30 s,
// past the window's end plus grace at 10:01:10), and not before. A record that comes
// later, for a window the idle time has closed, is late.
func TestCloseWhenIdle(t *testing.T) {
	base := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	build := func(opts ...kstream.CloseOption) *kstream.Builder {
		b := kstream.NewBuilder()
		w := kstream.Stream(b, "orders", serde.String(), serde.String()).GroupByKey().
			WindowedBy(kstream.TimeWindowsOf(time.Minute).WithGrace(10 * time.Second)).EmitOnWindowClose(opts...)
		revenue := kstream.WindowedAggregate(w, func() int64 { return 0 }, func(_ string, v string, acc int64) int64 {
			n, _ := strconv.ParseInt(v, 10, 64)
			return acc + n
		}, serde.Int64(), "revenue")
		kstream.Map(revenue.ToStream(), func(k serde.Windowed[string], v int64) (string, string) {
			return fmt.Sprintf("%s@%s", k.Key, k.Start.UTC().Format("15:04")), strconv.FormatInt(v, 10)
		}).To("revenue", serde.String(), serde.String())
		return b
	}
	run := func(t *testing.T, opts ...kstream.CloseOption) (*kstreamtest.Driver, *kstreamtest.InputTopic[string, string], func() []string) {
		d, err := kstreamtest.New(build(opts...), kstream.Config{ApplicationID: "shop"}, kstreamtest.WallClock(base))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		in := kstreamtest.CreateInputTopic(d, "orders", serde.String(), serde.String())
		out := kstreamtest.CreateOutputTopic(d, "revenue", serde.String(), serde.String())
		for _, o := range []struct {
			at     time.Duration
			amount string
		}{{5 * time.Second, "7"}, {50 * time.Second, "5"}} {
			if err := in.PipeAt("c1", o.amount, base.Add(o.at)); err != nil {
				t.Fatal(err)
			}
		}
		return d, in, func() []string {
			recs, err := out.ReadRecords()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range recs {
				got = append(got, r.Key+"="+r.Value)
			}
			return got
		}
	}
	t.Run("without", func(t *testing.T) {
		d, _, read := run(t)
		if err := d.AdvanceWallClockTime(10 * time.Minute); err != nil {
			t.Fatal(err)
		}
		if got := read(); len(got) != 0 {
			t.Errorf("results %v, want none: without records, stream time does not move", got)
		}
	})
	t.Run("with", func(t *testing.T) {
		d, in, read := run(t, kstream.CloseWhenIdle(30*time.Second))
		if err := d.AdvanceWallClockTime(29 * time.Second); err != nil {
			t.Fatal(err)
		}
		if got := read(); len(got) != 0 {
			t.Fatalf("results %v after 29 s of quiet, want none yet", got)
		}
		var got []string
		for range 60 {
			if err := d.AdvanceWallClockTime(time.Second); err != nil {
				t.Fatal(err)
			}
			got = append(got, read()...)
		}
		if strings.Join(got, ",") != "c1@10:00=12" {
			t.Errorf("results %v, want [c1@10:00=12] once the quiet time moved stream time past 10:01:10", got)
		}
		// Stream time is now about 10:01:39 (10:00:50 plus 49 s of quiet): an order for the
		// closed window is late.
		if err := in.PipeAt("c1", "100", base.Add(55*time.Second)); err != nil {
			t.Fatal(err)
		}
		if got := read(); len(got) != 0 || d.DroppedRecords() != 1 {
			t.Errorf("a late order after the idle close: results %v, %d dropped; want none, 1 dropped", got, d.DroppedRecords())
		}
	})
	t.Run("session windows refuse it", func(t *testing.T) {
		b := kstream.NewBuilder()
		kstream.SessionCount(kstream.Stream(b, "orders", serde.String(), serde.String()).GroupByKey().
			WindowedBySession(kstream.SessionWindowsOf(time.Minute)).EmitOnWindowClose(kstream.CloseWhenIdle(time.Second)), "s")
		if _, err := b.Build(); err == nil || !strings.Contains(err.Error(), "CloseWhenIdle") {
			t.Errorf("Build: %v, want an error naming CloseWhenIdle", err)
		}
	})
}
