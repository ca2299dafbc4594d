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
