package query

import (
	"context"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/kstream-go/kstream/internal/kafkatest"
)

// BenchmarkRoutedGet reads counts from 3 instances through the HTTP client of one: about
// two thirds of the gets are forwarded. It reports the p99 latency.
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
	var mu sync.Mutex
	var lat []time.Duration
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		i := 0
		for pb.Next() {
			w := words[i%len(words)]
			i++
			start := time.Now()
			if _, ok, err := counts.Get(context.Background(), w); err != nil || !ok {
				b.Errorf("get %q: %v %v", w, ok, err)
				return
			}
			mine = append(mine, time.Since(start))
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		b.ReportMetric(float64(slices.Max(lat).Microseconds()), "max-µs")
	}
}
