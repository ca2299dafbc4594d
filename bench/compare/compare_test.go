package main

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// These tests need no broker and no Java: the statistics, the table and the raw loops'
// processing. The comparison itself runs with go run ./bench/compare (bench/README.md).

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{math.NaN(), 5, 1}, 3},
		{[]float64{7}, 7},
	} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	if got := median(nil); !math.IsNaN(got) {
		t.Errorf("median(nil) = %v, want NaN", got)
	}
}

func TestPairedRatioAndTable(t *testing.T) {
	runs := []run{
		{round: 1, contestant: "raw", wall: 1, cpu: 1, rssKiB: 1024, out: 10, running: -1},
		{round: 1, contestant: "kstream", wall: 2, cpu: 3, rssKiB: 2048, out: 10, running: 0.5},
		{round: 2, contestant: "raw", wall: 1, cpu: 2, rssKiB: 1024, out: 10, running: -1},
		{round: 2, contestant: "kstream", wall: 4, cpu: 2, rssKiB: 2048, out: 10, running: 0.5},
		{round: 3, contestant: "raw", wall: 1, err: errors.New("failed")},
		{round: 3, contestant: "kstream", wall: 8, cpu: 1, rssKiB: 2048, out: 10, running: 0.5},
	}
	wall := metric{"wall", func(r run) float64 { return r.wall }}
	// Rounds 1 and 2 pair up (2/1, 4/1); round 3's raw run failed.
	if got := pairedRatio(runs, "kstream", "raw", wall); got != 3 {
		t.Errorf("paired wall ratio = %v, want 3", got)
	}
	if got := medianOf(runs, "kstream", wall); got != 4 {
		t.Errorf("kstream median wall = %v, want 4", got)
	}
	var b strings.Builder
	printTable(&b, "== t ==", 100, []string{"raw", "kstream"}, runs)
	got := b.String()
	for _, want := range []string{
		"raw      2/3", "100", "kstream      3/3", "25", // records/s: 100/1 and 100/4
		"kstream/raw: records/s 0.25x (per round 0.38x), CPU s 1.33x (per round 2.00x), peak RSS 2.00x (per round 2.00x)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
}

func TestGroupAndResultField(t *testing.T) {
	for x, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 1234567.4: "1,234,567", -2500: "-2,500"} {
		if got := group(x); got != want {
			t.Errorf("group(%v) = %q, want %q", x, got, want)
		}
	}
	line := "RESULT contestant=java scenario=count done_ms=1234 start_ms=10 running_ms=567"
	if got := resultField(line, "running_ms"); got != 567 {
		t.Errorf("running_ms = %v, want 567", got)
	}
	if got := resultField(line, "absent"); got != -1000 {
		t.Errorf("absent field = %v, want -1000", got)
	}
}

// emitted runs a raw processor over records with the given keys and collects its output,
// flushing at the end as a commit does.
func emitted(t *testing.T, scenario string, keys ...string) []*kgo.Record {
	t.Helper()
	if rawRunner(scenario) == nil {
		t.Fatalf("no raw loop for %s", scenario)
	}
	var out []*kgo.Record
	emit := func(r *kgo.Record) { out = append(out, r) }
	p := rawProcessorOf(scenario)
	for _, k := range keys {
		p.process(&kgo.Record{Key: []byte(k), Value: []byte{1, 2, 3}, Timestamp: time.UnixMilli(1)}, emit)
	}
	if p.flush != nil {
		p.flush(emit)
	}
	return out
}

func TestRawProcessors(t *testing.T) {
	count := func(rs []*kgo.Record) []string {
		var s []string
		for _, r := range rs {
			s = append(s, string(r.Key)+"="+string('0'+rune(binary.BigEndian.Uint64(r.Value))))
		}
		return s
	}
	if got, want := count(emitted(t, "count", "a", "b", "a", "a")), []string{"a=1", "b=1", "a=2", "a=3"}; !slices.Equal(got, want) {
		t.Errorf("count emitted %v, want %v", got, want)
	}
	got := count(emitted(t, "count-cache", "a", "b", "a", "a"))
	slices.Sort(got)
	if want := []string{"a=3", "b=1"}; !slices.Equal(got, want) {
		t.Errorf("count-cache emitted %v, want %v", got, want)
	}
	fm := emitted(t, "filter-mapvalues", "x")
	if len(fm) != 1 || !slices.Equal(fm[0].Value, []byte{1, 2, 0xfc}) {
		t.Errorf("filter-mapvalues emitted %v", fm)
	}
	if keepFilter([]byte{0, 1}) || !keepFilter([]byte{1, 0}) || !keepFilter(nil) {
		t.Error("keepFilter: want values starting with 0 dropped, others kept")
	}
	for _, s := range scenarios {
		if rawRunner(s.name) == nil || kstreamRunner(s.name) == nil {
			t.Errorf("scenario %s lacks a raw or kstream contestant", s.name)
		}
	}
}

func TestPeakRSSKiB(t *testing.T) {
	f := t.TempDir() + "/status"
	if err := os.WriteFile(f, []byte("Name:\tjava\nVmPeak:\t  999 kB\nVmHWM:\t  123456 kB\nVmRSS:\t 1000 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, ok := peakRSSKiB(f); !ok || got != 123456 {
		t.Errorf("peakRSSKiB = %d, %v; want 123456, true", got, ok)
	}
	if _, ok := peakRSSKiB(f + ".missing"); ok {
		t.Error("peakRSSKiB of a missing file: want false")
	}
}

// The -memtrace diagnostic reports the breakdown at its highest samples and writes heap
// profiles there. Samples are taken directly (the tracer's own ticker may add more).
func TestMemTrace(t *testing.T) {
	dir := t.TempDir()
	mt := startMemTrace(dir, "app")
	mt.observe(mt.sample())
	var b strings.Builder
	mt.report(&b)
	out := b.String()
	for _, want := range []string{"MEMTRACE peak-rss at ", "MEMTRACE peak-live at ", " + outside go "} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "rss 0.0 MiB") {
		t.Errorf("report has no resident set:\n%s", out)
	}
	for _, f := range []string{"app.peak-rss.heap", "app.peak-live.heap"} {
		if st, err := os.Stat(dir + "/" + f); err != nil || st.Size() == 0 {
			t.Errorf("profile %s: %v", f, err)
		}
	}
}

func TestLatencyStatsAndTable(t *testing.T) {
	var samples []time.Duration
	for i := 100; i >= 1; i-- { // 1..100 ms, unsorted
		samples = append(samples, time.Duration(i)*time.Millisecond)
	}
	l := latencyOf(samples, 9990)
	if l.p50 != 50 || l.p90 != 90 || l.p99 != 99 || l.max != 100 || l.samples != 100 {
		t.Errorf("latencyOf = %+v, want p50 50, p90 90, p99 99, max 100 over 100 samples", *l)
	}
	if got := quantileMs(nil, 0.5); !math.IsNaN(got) {
		t.Errorf("quantileMs(nil) = %v, want NaN", got)
	}
	runs := []run{
		{round: 1, contestant: "kstream", cpu: 1, rssKiB: 1024, lat: &latencyStats{p50: 5, p90: 8, p99: 10, max: 20, rate: 10000}},
		{round: 1, contestant: "java", cpu: 4, rssKiB: 4096, lat: &latencyStats{p50: 20, p90: 30, p99: 40, max: 50, rate: 10000}},
		{round: 2, contestant: "java", err: errors.New("failed")},
	}
	var b strings.Builder
	printLatencyTable(&b, "== l ==", []string{"kstream", "java"}, runs)
	got := b.String()
	for _, want := range []string{
		"kstream      1/1     5.0     8.0    10.0    20.0", "java      1/2    20.0    30.0    40.0    50.0",
		"kstream/java: p50 0.25x (per round 0.25x), p99 0.25x (per round 0.25x), CPU s 0.25x (per round 0.25x)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
}
