package kstream

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kstream-go/kstream/internal/runtime"
	"github.com/prometheus/client_golang/prometheus"
)

// asyncShared is what the async operators of an instance share: Config.AsyncMaxInFlight's
// tokens, and each operator's counters, all its tasks together ([Stats].Async, the
// kstream_async_* metrics, the ops page).
type asyncShared struct {
	sem chan struct{} // nil without a cap
	mu  sync.Mutex
	ops map[string]*asyncStats
	// waker wakes the instance's tasks whose calls finished (async.go), made with the
	// first task's environment (every task of an instance has the same).
	waker *asyncWaker
}

// wakerFor returns the instance's waker, made on first use with env.
func (s *asyncShared) wakerFor(env runtime.TaskEnv) *asyncWaker {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waker == nil {
		s.waker = newAsyncWaker(env.Wake)
	}
	return s.waker
}

func newAsyncShared(maxInFlight int) *asyncShared {
	s := &asyncShared{ops: map[string]*asyncStats{}}
	if maxInFlight > 0 {
		s.sem = make(chan struct{}, maxInFlight)
	}
	return s
}

// operator returns the counters of the operator named name, created on first use.
func (s *asyncShared) operator(name string) *asyncStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.ops[name]
	if st == nil {
		st = &asyncStats{}
		s.ops[name] = st
	}
	return st
}

// asyncStats are the counters of one async operator.
type asyncStats struct {
	inFlight atomic.Int64 // calls running (waits between retries included)
	held     atomic.Int64 // records in hand: called, waiting for their key, or waiting to leave
	calls    atomic.Int64 // calls made, retries included
	retries  atomic.Int64
	failures atomic.Int64 // records whose call failed for good
	// callLatency is the time of each call; queueWait the time from a record's arrival at
	// the operator to its first call (waiting behind its key, or for Config.AsyncMaxInFlight).
	callLatency, queueWait latencyHist
}

// asyncBuckets are the upper bounds (seconds) of the async operators' histograms: 100µs to
// about 105s.
var asyncBuckets = prometheus.ExponentialBuckets(100e-6, 4, 11)

// latencyHist is a histogram over asyncBuckets, updated with atomics.
type latencyHist struct {
	counts [12]atomic.Int64 // per bucket, the last one +Inf
	sumNs  atomic.Int64
	n      atomic.Int64
	maxNs  atomic.Int64
}

func (h *latencyHist) observe(d time.Duration) {
	s := d.Seconds()
	i, _ := slices.BinarySearch(asyncBuckets, s)
	h.counts[i].Add(1)
	h.sumNs.Add(int64(d))
	h.n.Add(1)
	for {
		m := h.maxNs.Load()
		if int64(d) <= m || h.maxNs.CompareAndSwap(m, int64(d)) {
			return
		}
	}
}

// mean is the mean observation, 0 without any.
func (h *latencyHist) mean() time.Duration {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	return time.Duration(h.sumNs.Load() / n)
}

// quantile estimates the q quantile as the upper bound of the bucket that holds it (the
// longest observation for the last bucket).
func (h *latencyHist) quantile(q float64) time.Duration {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	want := int64(math.Ceil(q * float64(n)))
	var acc int64
	for i := range h.counts {
		acc += h.counts[i].Load()
		if acc >= want {
			if i < len(asyncBuckets) {
				return min(time.Duration(asyncBuckets[i]*float64(time.Second)), time.Duration(h.maxNs.Load()))
			}
			break
		}
	}
	return time.Duration(h.maxNs.Load())
}

// AsyncOperatorStats are the counters of one async operator ([MapValuesAsync],
// [FlatMapValuesAsync]), all tasks of the instance together, since it started.
type AsyncOperatorStats struct {
	// Operator is the operator's name, as [Topology.Describe] shows it.
	Operator string
	// InFlight is the number of calls running now (backoffs between retries included);
	// Held the records in hand now: called, waiting behind an earlier record of their key,
	// or finished and waiting for their outputs to leave.
	InFlight, Held int64
	// Calls counts the calls made, retries included; Retries the retries; Failures the
	// records whose call failed for good (handed to the processing error handler).
	Calls, Retries, Failures int64
	// CallLatencyAvg and CallLatencyP99 are the mean and (bucketed) 99th percentile of a
	// call's time; QueueWaitAvg and QueueWaitP99 those of the time from a record's arrival
	// at the operator to its first call.
	CallLatencyAvg, CallLatencyP99 time.Duration
	QueueWaitAvg, QueueWaitP99     time.Duration
}

// stats returns the counters of every operator, sorted by name.
func (s *asyncShared) stats() []AsyncOperatorStats {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]AsyncOperatorStats, 0, len(s.ops))
	for name, st := range s.ops {
		out = append(out, AsyncOperatorStats{Operator: name, InFlight: st.inFlight.Load(), Held: st.held.Load(),
			Calls: st.calls.Load(), Retries: st.retries.Load(), Failures: st.failures.Load(),
			CallLatencyAvg: st.callLatency.mean(), CallLatencyP99: st.callLatency.quantile(0.99),
			QueueWaitAvg: st.queueWait.mean(), QueueWaitP99: st.queueWait.quantile(0.99)})
	}
	slices.SortFunc(out, func(a, b AsyncOperatorStats) int {
		switch {
		case a.Operator < b.Operator:
			return -1
		case a.Operator > b.Operator:
			return 1
		}
		return 0
	})
	return out
}

// asyncCollector exports the async operators' counters as Prometheus metrics (registered
// with the runtime's, under Config.Metrics; docs/metrics.md).
type asyncCollector struct {
	s                                                      *asyncShared
	inFlight, held, calls, retries, failures, lat, waitLat *prometheus.Desc
}

func newAsyncCollector(s *asyncShared) *asyncCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("kstream_async_"+name, help, []string{"operator"}, nil)
	}
	return &asyncCollector{s: s,
		inFlight: d("in_flight_calls", "Calls of an async operator running now, all tasks (backoffs between retries included)."),
		held:     d("held_records", "Records an async operator holds now: called, waiting behind their key, or waiting for their outputs to leave."),
		calls:    d("calls_total", "Calls made by an async operator, retries included."),
		retries:  d("retries_total", "Retried calls of an async operator (errors marked Retriable, call timeouts)."),
		failures: d("failures_total", "Records whose async call failed for good and went to the processing error handler."),
		lat:      d("call_latency_seconds", "Time of one call of an async operator's function."),
		waitLat:  d("queue_wait_seconds", "Time from a record's arrival at an async operator to its first call (behind its key, or Config.AsyncMaxInFlight)."),
	}
}

// Describe implements prometheus.Collector.
func (c *asyncCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.inFlight, c.held, c.calls, c.retries, c.failures, c.lat, c.waitLat} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *asyncCollector) Collect(ch chan<- prometheus.Metric) {
	c.s.mu.Lock()
	ops := make(map[string]*asyncStats, len(c.s.ops))
	for k, v := range c.s.ops {
		ops[k] = v
	}
	c.s.mu.Unlock()
	for name, st := range ops {
		ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(st.inFlight.Load()), name)
		ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(st.held.Load()), name)
		ch <- prometheus.MustNewConstMetric(c.calls, prometheus.CounterValue, float64(st.calls.Load()), name)
		ch <- prometheus.MustNewConstMetric(c.retries, prometheus.CounterValue, float64(st.retries.Load()), name)
		ch <- prometheus.MustNewConstMetric(c.failures, prometheus.CounterValue, float64(st.failures.Load()), name)
		ch <- histMetric(c.lat, &st.callLatency, name)
		ch <- histMetric(c.waitLat, &st.queueWait, name)
	}
}

func histMetric(d *prometheus.Desc, h *latencyHist, name string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(asyncBuckets))
	var acc int64
	for i, ub := range asyncBuckets {
		acc += h.counts[i].Load()
		buckets[ub] = uint64(acc)
	}
	n := acc + h.counts[len(asyncBuckets)].Load()
	return prometheus.MustNewConstHistogram(d, uint64(n), float64(h.sumNs.Load())/1e9, buckets, name)
}
