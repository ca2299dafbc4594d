package query

import (
	"context"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kstream-go/kstream/internal/kafkatest"
)

// BenchmarkRoutedGet reads counts from 3 instances through the HTTP client of one: first
// the words that instance owns (answered locally, the baseline), then the others (forwarded
// one hop to their owner), each with b.N gets from GOMAXPROCS goroutines. It reports
// gets/s, p50 and p99 latency of both, and the forwarded/local ratios.
func BenchmarkRoutedGet(b *testing.B) {
	in := kafkatest.CreateTopic(b, "words", 12, nil)
	produceWords(b, in)
	insts := startCluster(b, in, 3, clusterOptions{})
	var clients []*Client
	for _, inst := range insts {
		clients = append(clients, newClient(b, inst))
	}
	waitReady(b, insts, clients)
	counts := StoreOf[string, int64](clients[0], "counts")
	var self string
	for _, m := range insts[0].app.Metadata() {
		if m.Self {
			self = m.MemberID
		}
	}
	var local, remote []string
	for _, w := range words {
		km, err := insts[0].app.KeyMetadata("counts", w)
		if err != nil {
			b.Fatal(err)
		}
		if km.ActiveMember == self {
			local = append(local, w)
		} else {
			remote = append(remote, w)
		}
	}
	if len(local) == 0 || len(remote) == 0 {
		b.Skipf("instance 0 owns %d of %d words: no baseline or no forwarded words", len(local), len(words))
	}
	run := func(ws []string) (perSec float64, p50, p99 time.Duration) {
		var mu sync.Mutex
		var lat []time.Duration
		start := time.Now()
		var next atomic.Int64
		var wg sync.WaitGroup
		for range runtime.GOMAXPROCS(0) * 4 {
			wg.Go(func() {
				var mine []time.Duration
				for {
					i := next.Add(1)
					if i > int64(b.N) {
						break
					}
					w := ws[int(i)%len(ws)]
					t0 := time.Now()
					if _, ok, err := counts.Get(context.Background(), w); err != nil || !ok {
						b.Errorf("get %q: %v %v", w, ok, err)
						return
					}
					mine = append(mine, time.Since(t0))
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		if len(lat) == 0 {
			return 0, 0, 0
		}
		return float64(len(lat)) / elapsed.Seconds(), lat[len(lat)/2], lat[len(lat)*99/100]
	}
	b.ResetTimer()
	lps, l50, l99 := run(local)
	rps, r50, r99 := run(remote)
	b.StopTimer()
	b.ReportMetric(lps, "local-gets/s")
	b.ReportMetric(rps, "routed-gets/s")
	b.ReportMetric(float64(l99.Microseconds()), "local-p99-µs")
	b.ReportMetric(float64(r50.Microseconds()), "routed-p50-µs")
	b.ReportMetric(float64(r99.Microseconds()), "routed-p99-µs")
	b.ReportMetric(rps/lps, "routed/local-throughput")
	b.ReportMetric(float64(l50.Microseconds()), "local-p50-µs")
}
