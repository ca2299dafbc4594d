package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// nopTask is a Task that does nothing, to measure what the runtime adds per record.
type nopTask struct{}

func (nopTask) Timestamp(*kgo.Record, int64) (int64, error) { return 0, nil }
func (nopTask) Process(*kgo.Record, int64) error            { return nil }
func (nopTask) Punctuate(time.Time) (bool, error)           { return false, nil }
func (nopTask) NextPunctuation() time.Time                  { return time.Time{} }
func (nopTask) Cut()                                        {}
func (nopTask) Committed()                                  {}
func (nopTask) Aborted()                                    {}
func (nopTask) PreCommit(context.Context) error             { return nil }
func (nopTask) Close() error                                { return nil }

// BenchmarkProcessMetrics measures what Config.Metrics adds to the processing of one record
// (counting, the processed position, sampled latencies): compare its "on" and "off" figures
// with the CPU a record costs in the passthrough benchmark (about 1.5 µs).
func BenchmarkProcessMetrics(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			r := &Runtime{cfg: Config{ApplicationID: "bench"}, standby: &standbys{}}
			t := &taskRun{id: TaskID{0, 0}, task: nopTask{}}
			pos := newPartPos()
			if on {
				r.met = newMetrics(r, prometheus.NewRegistry())
				t.met = r.TaskMetrics(t.id)
				pos.met = r.met.partition(t.id, topicPartition{"in", 0})
			}
			rec := &kgo.Record{Topic: "in", Offset: 0, Timestamp: time.Now()}
			now := time.Now()
			ts := now.UnixMilli()
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if err := t.process(rec, ts, now); err != nil {
					b.Fatal(err)
				}
				pos.next = int64(i) + 1
				if pos.met != nil {
					pos.met.pos.Store(pos.next)
				}
			}
		})
	}
}

// TestPartitionLag checks the lag a partition reports: the end of the last fetch minus the
// processed position, or the first offset fetched before any record is processed.
// (TestMetricsExactlyOnce covers a partition that ends in transaction markers.)
func TestPartitionLag(t *testing.T) {
	r := &Runtime{cfg: Config{ApplicationID: "app"}}
	r.met = newMetrics(r, prometheus.NewRegistry())
	pm := r.met.partition(TaskID{0, 1}, topicPartition{"in", 1})
	if _, ok := pm.lag(); ok {
		t.Fatal("lag known before any fetch")
	}
	pos := newPartPos()
	pos.fetchedTo, pos.end = 13, 20
	pm.noteFetch(pos, []*kgo.Record{{Offset: 10}, {Offset: 11}, {Offset: 12}})
	if lag, ok := pm.lag(); !ok || lag != 10 {
		t.Fatalf("lag before processing: %d %v, want 10 (end 20, first fetched 10)", lag, ok)
	}
	pm.pos.Store(12)
	if lag, _ := pm.lag(); lag != 8 {
		t.Fatalf("lag at 12: %d, want 8", lag)
	}
	pos.fetchedTo = 20
	pm.noteFetch(pos, []*kgo.Record{{Offset: 13}, {Offset: 19}}) // a gap: compaction
	pm.pos.Store(20)
	if lag, _ := pm.lag(); lag != 0 {
		t.Fatalf("lag at the end: %d, want 0", lag)
	}
}

// TestRestoreMetrics checks the restoration figures a scrape reports: records restored,
// offsets remaining, and the ETA from the rate so far.
func TestRestoreMetrics(t *testing.T) {
	r := &Runtime{cfg: Config{ApplicationID: "app"}}
	r.standby = newStandbys(r)
	reg := prometheus.NewRegistry()
	r.met = newMetrics(r, reg)
	if err := r.met.register(); err != nil {
		t.Fatal(err)
	}
	value := func(name string) (float64, bool) {
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if f.GetName() != name {
				continue
			}
			for _, m := range f.Metric {
				if m.Counter != nil {
					return m.Counter.GetValue(), true
				}
				return m.Gauge.GetValue(), true
			}
		}
		return 0, false
	}
	// One restoration, as state.go's restore notes it (the record Status reads too).
	ls := &loggedStore{spec: StoreSpec{Name: "counts", Changelog: "app-counts-changelog"}, partition: 2}
	prog := r.startRestore(TaskID{0, 2}, ls, 100, 5100)
	if v, _ := value("kstream_store_restore_remaining_records"); v != 5000 {
		t.Fatalf("remaining at the start: %v, want 5000", v)
	}
	if _, ok := value("kstream_store_restore_eta_seconds"); ok {
		t.Fatal("an ETA before the first batch")
	}
	prog.update(1100, 1000)
	// 1000 offsets in the 10 s since the start: 100/s, so 4000 remaining take 40 s.
	prog.began = time.Now().Add(-10 * time.Second)
	if v, _ := value("kstream_store_restore_records_total"); v != 1000 {
		t.Errorf("restored: %v, want 1000", v)
	}
	if v, _ := value("kstream_store_restore_remaining_records"); v != 4000 {
		t.Errorf("remaining: %v, want 4000", v)
	}
	if v, _ := value("kstream_store_restore_eta_seconds"); v < 40 || v > 41 {
		t.Errorf("ETA: %v s, want 40 s (a little more as time passes: the rate so far falls)", v)
	}
	prog.update(5100, 4000)
	if v, _ := value("kstream_store_restore_records_total"); v != 5000 {
		t.Errorf("restored at the end: %v, want 5000", v)
	}
	if v, _ := value("kstream_store_restore_eta_seconds"); v != 0 {
		t.Errorf("ETA at the end: %v, want 0", v)
	}
	r.endRestore(prog)
	if v, _ := value("kstream_store_restore_records_total"); v != 5000 {
		t.Errorf("restored after the end: %v, want 5000", v)
	}
	if v, _ := value("kstream_store_restore_remaining_records"); v != 0 {
		t.Errorf("remaining after the end: %v, want 0", v)
	}
	// A second restoration of the same store partition adds to the count.
	prog = r.startRestore(TaskID{0, 2}, ls, 5100, 5300)
	prog.update(5200, 100)
	if v, _ := value("kstream_store_restore_records_total"); v != 5100 {
		t.Errorf("restored during a second restoration: %v, want 5100", v)
	}
	if v, _ := value("kstream_store_restore_remaining_records"); v != 100 {
		t.Errorf("remaining during a second restoration: %v, want 100", v)
	}
	if rs := r.restoreStatus(time.Now()); len(rs) != 1 || rs[0].Restored != 100 || rs[0].Remaining != 100 || rs[0].Position != 5200 {
		t.Errorf("Status's restorations: %+v, want the second one at 5200 with 100 restored and 100 remaining", rs)
	}
	r.endRestore(prog)
	r.met.unregister()
	if fams, _ := reg.Gather(); len(fams) != 0 {
		t.Errorf("%d metric families left after unregister", len(fams))
	}
}
