package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The -memtrace diagnostic: with -memtrace DIR the driver passes DIR to the Go contestants,
// which sample their memory every memtracePeriod and, before they exit, print to stderr
// (their log, kept with -keep-logs) what the resident set was made of at its highest sample,
// and write heap profiles to DIR: <run id>.peak-live.heap at the highest live Go heap and
// <run id>.peak-rss.heap at the highest resident set. It costs a little CPU (a sample reads
// /proc/self/statm and runtime/metrics; a profile is written at each new high), so runs with
// it are not for the figures.

// memtracePeriod is how often -memtrace samples.
const memtracePeriod = 20 * time.Millisecond

// memSample is one sample of the process's memory, in bytes.
type memSample struct {
	at       time.Duration
	rss      uint64 // VmRSS
	live     uint64 // Go heap live at the last GC
	objects  uint64 // Go heap objects, live and garbage not yet swept
	heapFree uint64 // Go heap free, still mapped (resident unless the OS reclaimed it)
	goOther  uint64 // the rest of the Go runtime's mapped memory, released heap excluded
	goal     uint64 // the GC's heap goal
}

// outside is the RSS that is not the Go runtime's: the binary and, with cgo, Pebble's block
// cache and memtables.
func (s memSample) outside() int64 {
	return int64(s.rss) - int64(s.objects+s.heapFree+s.goOther)
}

var memMetrics = []string{
	"/gc/heap/live:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/total:bytes",
	"/memory/classes/heap/released:bytes",
	"/gc/heap/goal:bytes",
}

// memTracer samples the memory of this process.
type memTracer struct {
	dir, id string
	start   time.Time
	ms      []metrics.Sample

	mu             sync.Mutex
	first          memSample
	peakRSS        memSample
	peakLive       memSample
	n              int
	stop           context.CancelFunc
	done           chan struct{}
	pageSize       uint64
	profileRSSAtMB uint64 // the RSS (MiB) of the last peak-rss profile
}

// startMemTrace starts sampling; stop it with report.
func startMemTrace(dir, id string) *memTracer {
	t := &memTracer{dir: dir, id: id, start: time.Now(), done: make(chan struct{}), pageSize: uint64(os.Getpagesize())}
	for _, n := range memMetrics {
		t.ms = append(t.ms, metrics.Sample{Name: n})
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.stop = cancel
	t.first = t.sample()
	go func() {
		defer close(t.done)
		tick := time.NewTicker(memtracePeriod)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				t.observe(t.sample())
			}
		}
	}()
	return t
}

func (t *memTracer) sample() memSample {
	metrics.Read(t.ms)
	v := func(i int) uint64 {
		if t.ms[i].Value.Kind() == metrics.KindUint64 {
			return t.ms[i].Value.Uint64()
		}
		return 0
	}
	s := memSample{at: time.Since(t.start), live: v(0), objects: v(1), heapFree: v(2), goal: v(5)}
	s.goOther = v(3) - v(4) - v(1) - v(2)
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			if pages, err := strconv.ParseUint(f[1], 10, 64); err == nil {
				s.rss = pages * t.pageSize
			}
		}
	}
	return s
}

func (t *memTracer) observe(s memSample) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n++
	first := t.n == 1
	if first || s.rss > t.peakRSS.rss {
		t.peakRSS = s
		if mb := s.rss >> 20; mb > t.profileRSSAtMB+2 {
			t.profileRSSAtMB = mb
			t.writeProfile("peak-rss")
		}
	}
	if first || s.live > t.peakLive.live {
		t.peakLive = s
		t.writeProfile("peak-live")
	}
}

func (t *memTracer) writeProfile(what string) {
	f, err := os.Create(filepath.Join(t.dir, t.id+"."+what+".heap"))
	if err != nil {
		return
	}
	_ = pprof.WriteHeapProfile(f)
	_ = f.Close()
}

// report stops sampling and prints the breakdown to w.
func (t *memTracer) report(w io.Writer) {
	t.stop()
	<-t.done
	t.mu.Lock()
	defer t.mu.Unlock()
	mib := func(b uint64) float64 { return float64(b) / (1 << 20) }
	line := func(name string, s memSample) {
		fmt.Fprintf(w, "MEMTRACE %s at %.2fs: rss %.1f MiB = go heap objects %.1f (live at last GC %.1f, goal %.1f) + go heap free %.1f + go other %.1f + outside go %.1f (at start %.1f)\n",
			name, s.at.Seconds(), mib(s.rss), mib(s.objects), mib(s.live), mib(s.goal), mib(s.heapFree), mib(s.goOther),
			float64(s.outside())/(1<<20), float64(t.first.outside())/(1<<20))
	}
	fmt.Fprintf(w, "MEMTRACE %d samples every %v; profiles in %s\n", t.n, memtracePeriod, t.dir)
	line("peak-rss", t.peakRSS)
	line("peak-live", t.peakLive)
}
