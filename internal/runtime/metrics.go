package runtime

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kstream-go/kstream/store"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"
)

// Metrics (Config.Metrics) are Prometheus metrics of the instance, its tasks, stores,
// restorations, standbys and clients; docs/metrics.md lists them. They cost nothing when
// Config.Metrics is nil: every hook is behind a nil check of r.met.
//
// Most figures are counters and positions that the runtime keeps anyway or that cost one
// uncontended atomic operation where they happen; one Collector reads them all at scrape
// time. Histograms are observed only where an observation is rare (a poll, a punctuation)
// or sampled (process latency, end-to-end latency, store latency). The Kafka clients'
// metrics come from franz-go's kprom plugin, one per client, labeled with its role.

// Reasons a record is dropped, the label of kstream_task_dropped_records_total.
const (
	DropNullKey           = "null_key"
	DropNullValue         = "null_value"
	DropNullKeyOrValue    = "null_key_or_value"
	DropExpiredWindow     = "expired_window"
	DropExpiredHistory    = "expired_history" // a versioned table's write older than its history retention
	DropStaleResponse     = "stale_response"
	DropNegativeTimestamp = "negative_timestamp"
	DropDeserialization   = "skipped_deserialization_error"
	DropProcessing        = "skipped_processing_error"
	DropProduction        = "skipped_production_error"
	// DropOutOfOrder is an out-of-order update of a versioned table (older than its key's
	// latest version) that a foreign-key join ignores, as Kafka Streams does (KIP-914).
	DropOutOfOrder = "out_of_order_update"
	DropOther      = "other"
)

var dropReasons = []string{DropNullKey, DropNullValue, DropNullKeyOrValue, DropExpiredWindow, DropExpiredHistory, DropStaleResponse,
	DropNegativeTimestamp, DropDeserialization, DropProcessing, DropProduction, DropOutOfOrder, DropOther}

// Kinds of dead-letter records, the label of kstream_dead_letter_records_total.
var dlqKinds = []string{"deserialization", "processing", "production"}

// sampling: one record in processSample has its process latency measured, one in
// e2eSample its end-to-end latency, one store operation in storeSample its latency.
const (
	processSample = 64
	e2eSample     = 16
	storeSample   = 16
)

// storeOps are the store operations counted, the label op.
var storeOps = [...]string{"put", "get", "range", "delete"}

const (
	opPut = iota
	opGet
	opRange
	opDelete
)

// latencyBuckets are the buckets (seconds) of the latency histograms: 10µs to 10s.
var latencyBuckets = prometheus.ExponentialBuckets(10e-6, 4, 11)

// e2eBuckets are the buckets (seconds) of the end-to-end latency: 1ms to about 4.5h.
var e2eBuckets = prometheus.ExponentialBuckets(0.001, 4, 13)

// metrics is the Prometheus side of a Runtime; nil when Config.Metrics is nil.
type metrics struct {
	r   *Runtime
	reg prometheus.Registerer // the user's, with the application_id label

	polls, pollRecords atomic.Int64
	punctuations       atomic.Int64
	deadLetters        [3]atomic.Int64 // by dlqKinds
	globalDropped      atomic.Int64    // null keys in global topics

	processLatency prometheus.Histogram
	pollLatency    prometheus.Histogram
	punctLatency   prometheus.Histogram
	e2e            *prometheus.HistogramVec // subtopology
	storeLatency   *prometheus.HistogramVec // store, op

	mu     sync.Mutex
	tasks  map[TaskID]*TaskMetrics
	stores map[storeKey]*storeMetrics
	parts  map[topicPartition]*partMetrics // the assigned input partitions

	registered []prometheus.Collector
	descs      descs
}

type storeKey struct {
	task  TaskID
	store string
}

// TaskMetrics are the metrics of one task, kept across revocations (they are counters).
// Its methods are safe for concurrent use.
type TaskMetrics struct {
	m         *metrics
	id        TaskID
	processed atomic.Int64
	dropped   [12]atomic.Int64 // by dropReasons
	e2e       prometheus.Observer
	sample    uint32 // records seen, for sampling; the task's goroutine only
}

// partMetrics are what is known of an input partition's lag: its end as of the last fetch
// that returned records, and the position processed.
type partMetrics struct {
	task      TaskID
	end       atomic.Int64 // -1 unknown
	fetchedTo atomic.Int64 // offset after the last record fetched (control records too)
	dataEnd   atomic.Int64 // offset after the last data record fetched
	pos       atomic.Int64 // offset after the last record processed; -1 unknown
}

// storeMetrics are the figures of one store of one task.
type storeMetrics struct {
	ops     [4]atomic.Int64
	lat     [4]prometheus.Observer
	entries atomic.Int64 // -1 unknown
	sizedAt time.Time    // when entries was last estimated (commit, under r.mu)
	// restored counts the records restored by the restorations that ended (guarded by
	// Runtime.ops.restoreMu); the running one's are in its RestoreProgress (status.go).
	restored int64
}

type descs struct {
	state, processed, taskProcessed, dropped, polls, pollRecords, commits, commitLatency,
	commitLatencyMax, punctuations, txnCommitted, txnAborted, fences, restarts, dlq, lag,
	storeOps, storeEntries, restored, remaining, eta, standbyLag, changelog, expiring,
	enforced, opDropped, opLost *prometheus.Desc
}

func newMetrics(r *Runtime, reg prometheus.Registerer) *metrics {
	reg = prometheus.WrapRegistererWith(prometheus.Labels{"application_id": r.cfg.ApplicationID}, reg)
	m := &metrics{r: r, reg: reg, tasks: map[TaskID]*TaskMetrics{}, stores: map[storeKey]*storeMetrics{}, parts: map[topicPartition]*partMetrics{}}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("kstream_"+name, help, labels, nil)
	}
	m.descs = descs{
		state:            d("state", "1 for the instance's current state, 0 for the others (Kafka Streams' state).", "state"),
		processed:        d("records_processed_total", "Records processed by the instance's tasks (process-total)."),
		taskProcessed:    d("task_records_processed_total", "Records processed by a task (task process-total).", "task"),
		dropped:          d("task_dropped_records_total", "Records dropped by a task, by reason (dropped-records-total).", "task", "reason"),
		polls:            d("polls_total", "Polls of the main consumer (poll-total)."),
		pollRecords:      d("poll_records_total", "Records returned by polls (poll-records-avg is its rate over polls_total's)."),
		commits:          d("commits_total", "Commits of processed offsets; transactions committed under exactly-once (commit-total)."),
		commitLatency:    d("commit_latency_seconds", "Commit latency; the 0.99 quantile is over the last 1024 commits (commit-latency-avg)."),
		commitLatencyMax: d("commit_latency_max_seconds", "Longest commit (commit-latency-max)."),
		punctuations:     d("punctuations_total", "Wall-clock punctuations that ran (punctuate-total)."),
		txnCommitted:     d("transactions_committed_total", "Transactions committed (exactly-once; 0 under at-least-once)."),
		txnAborted:       d("transactions_aborted_total", "Transactions aborted (exactly-once)."),
		fences:           d("producer_fences_total", "Times the transactional producer was fenced and the instance rejoined (task migrations)."),
		restarts:         d("restarts_total", "Restarts of the processing after an uncaught error (UncaughtErrorPolicy RestartProcessing; Kafka Streams' replaced stream threads)."),
		dlq:              d("dead_letter_records_total", "Records written to a dead-letter topic, by kind of error.", "kind"),
		lag:              d("task_consumer_lag_records", "Records of an input partition not processed yet: its end as of the last fetch minus the processed position (records-lag).", "task", "topic", "partition"),
		storeOps:         d("store_operations_total", "Operations on a task's store (put-rate, get-rate, range-rate, delete-rate).", "task", "store", "op"),
		storeEntries:     d("store_entries", "Approximate number of entries of a task's store, estimated at most every 30 s at a commit (estimate-num-keys).", "task", "store"),
		restored:         d("store_restore_records_total", "Changelog records restored into a task's store (restore-total).", "task", "store"),
		remaining:        d("store_restore_remaining_records", "Changelog offsets left to restore (restore-remaining-records-total); 0 when not restoring.", "task", "store"),
		eta:              d("store_restore_eta_seconds", "Estimated time to the end of a running restoration, from its rate so far.", "task", "store"),
		standbyLag:       d("standby_lag_records", "Changelog records a standby store has not applied yet (its changelog end minus its position).", "task", "store"),
		changelog:        d("changelog_records_total", "Changelog records written, all stores."),
		expiring:         d("changelog_expiring_records_total", "Changelog records of time and sliding window aggregations' stores written older than their changelog topic's retention.ms: the broker deletes them, and a restore lacks them."),
		enforced:         d("enforced_processing_total", "Records processed although a partition of the task had none buffered, after max.task.idle (enforced-processing-total)."),
		opDropped:        d("operator_dropped_records_total", "Records an operator of a task dropped, by reason (dropped-records-total, by processor node).", "task", "operator", "reason"),
		opLost:           d("operator_lost_results_total", "Final results an operator of a task never emitted, by reason: window_expired, a window that expired from its store before it closed.", "task", "operator", "reason"),
	}
	m.processLatency = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kstream_process_latency_seconds",
		Help: "Time a task took to process one record, one record in 64 sampled (process-latency).", Buckets: latencyBuckets})
	m.pollLatency = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kstream_poll_latency_seconds",
		Help: "Time a poll of the main consumer took, waiting included (poll-latency).", Buckets: latencyBuckets})
	m.punctLatency = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kstream_punctuate_latency_seconds",
		Help: "Time the wall-clock punctuators of a task took (punctuate-latency).", Buckets: latencyBuckets})
	m.e2e = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kstream_record_e2e_latency_seconds",
		Help: "Wall-clock time at processing minus the record's timestamp, one record in 16 sampled (record-e2e-latency).", Buckets: e2eBuckets}, []string{"subtopology"})
	m.storeLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kstream_store_latency_seconds",
		Help: "Latency of store operations, one in 16 sampled (put-latency, get-latency, range-latency, delete-latency).", Buckets: latencyBuckets}, []string{"store", "op"})
	return m
}

// register registers the metrics; unregister undoes it.
func (m *metrics) register() error {
	cs := []prometheus.Collector{m, m.processLatency, m.pollLatency, m.punctLatency, m.e2e, m.storeLatency}
	cs = append(cs, m.r.cfg.Collectors...)
	for _, c := range cs {
		if err := m.reg.Register(c); err != nil {
			m.unregister()
			return fmt.Errorf("kstream: registering the metrics of application %q (Config.Metrics): %w", m.r.cfg.ApplicationID, err)
		}
		m.registered = append(m.registered, c)
	}
	return nil
}

func (m *metrics) unregister() {
	for _, c := range m.registered {
		m.reg.Unregister(c)
	}
	m.registered = nil
}

// task returns the metrics of task id, created on first use.
func (m *metrics) task(id TaskID) *TaskMetrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	tm := m.tasks[id]
	if tm == nil {
		tm = &TaskMetrics{m: m, id: id, e2e: m.e2e.WithLabelValues(fmt.Sprint(id.SubTopology))}
		m.tasks[id] = tm
	}
	return tm
}

// partition starts following the lag of an assigned input partition of task id.
func (m *metrics) partition(id TaskID, tp topicPartition) *partMetrics {
	pm := &partMetrics{task: id}
	pm.end.Store(-1)
	pm.pos.Store(-1)
	m.mu.Lock()
	m.parts[tp] = pm
	m.mu.Unlock()
	return pm
}

// dropPartition stops reporting the lag of a partition given up.
func (m *metrics) dropPartition(tp topicPartition, pm *partMetrics) {
	m.mu.Lock()
	if m.parts[tp] == pm {
		delete(m.parts, tp)
	}
	m.mu.Unlock()
}

// store returns the metrics of store name of task id, created on first use.
func (m *metrics) store(id TaskID, name string) *storeMetrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := storeKey{id, name}
	sm := m.stores[k]
	if sm == nil {
		sm = &storeMetrics{}
		sm.entries.Store(-1)
		for op, o := range storeOps {
			sm.lat[op] = m.storeLatency.WithLabelValues(name, o)
		}
		m.stores[k] = sm
	}
	return sm
}

// polled notes one poll of the main consumer.
func (m *metrics) polled(took time.Duration, records int) {
	m.polls.Add(1)
	m.pollRecords.Add(int64(records))
	m.pollLatency.Observe(took.Seconds())
}

// deadLetter counts one dead-letter record of kind (dlqKinds).
func (m *metrics) deadLetter(kind string) {
	if i := slices.Index(dlqKinds, kind); i >= 0 {
		m.deadLetters[i].Add(1)
	}
}

// Dropped counts one record dropped by the task for reason (one of the Drop constants;
// others count as DropOther).
func (tm *TaskMetrics) Dropped(reason string) {
	i := slices.Index(dropReasons, reason)
	if i < 0 {
		i = len(dropReasons) - 1
	}
	tm.dropped[i].Add(1)
}

// DeadLettered counts one record the task wrote to a dead-letter topic for an error of kind
// "deserialization", "processing" or "production".
func (tm *TaskMetrics) DeadLettered(kind string) { tm.m.deadLetter(kind) }

// TaskMetrics returns the metrics of task id, or nil without Config.Metrics. Tasks find
// it through their TaskEnv.
func (r *Runtime) TaskMetrics(id TaskID) *TaskMetrics {
	if r.met == nil {
		return nil
	}
	return r.met.task(id)
}

// process runs t.task.Process on rec, counting it and sampling its latencies; it also
// starts and ends the record's process span when tracing is on. now is the time the
// task's batch began.
func (t *taskRun) process(rec *kgo.Record, ts int64, now time.Time) error {
	if t.tracer != nil {
		ctx, span := t.tracer.WithProcessSpan(rec)
		rec.Context = ctx
		defer span.End()
	}
	tm := t.met
	if tm == nil {
		return t.task.Process(rec, ts)
	}
	n := tm.sample
	tm.sample++
	if n%e2eSample == 0 {
		tm.e2e.Observe(float64(now.UnixMilli()-ts) / 1e3)
	}
	var err error
	if n%processSample != 0 {
		err = t.task.Process(rec, ts)
	} else {
		began := time.Now()
		err = t.task.Process(rec, ts)
		tm.m.processLatency.Observe(time.Since(began).Seconds())
	}
	tm.processed.Add(1) // once processed: a scrape during Process does not count it yet
	return err
}

// noteFetch notes what a fetch of a partition tells of its lag (see Runtime.noteFetch).
func (pm *partMetrics) noteFetch(pos *partPos, recs []*kgo.Record) {
	dataEnd := int64(-1)
	for i := len(recs) - 1; i >= 0; i-- {
		if !recs[i].Attrs.IsControl() {
			dataEnd = recs[i].Offset + 1
			break
		}
	}
	if dataEnd >= 0 {
		pm.dataEnd.Store(dataEnd)
	}
	pm.fetchedTo.Store(pos.fetchedTo)
	if pm.pos.Load() < 0 {
		pm.pos.Store(recs[0].Offset)
	}
	pm.end.Store(pos.end)
}

// lag is the partition's lag, and whether it is known.
func (pm *partMetrics) lag() (int64, bool) {
	end, pos := pm.end.Load(), pm.pos.Load()
	if end < 0 || pos < 0 {
		return 0, false
	}
	if pos >= pm.dataEnd.Load() {
		// Every data record fetched is processed: the control records after them are too.
		pos = max(pos, pm.fetchedTo.Load())
	}
	return max(end-pos, 0), true
}

// sized estimates the number of entries of the stores of t, at most every sizeEvery per
// store. It runs in a commit, while no task runs.
func (m *metrics) sized(t *taskRun, now time.Time) {
	for name, ls := range t.stores {
		sm := m.store(t.id, name)
		if !sm.sizedAt.IsZero() && now.Sub(sm.sizedAt) < sizeEvery {
			continue
		}
		sm.sizedAt = now
		if n, err := ls.Backend().ApproximateCount(); err == nil {
			sm.entries.Store(n)
		}
	}
}

// sizeEvery is how often a store's entries are estimated (a Pebble estimate reads up to
// 10 000 keys).
const sizeEvery = 30 * time.Second

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	d := m.descs
	for _, x := range []*prometheus.Desc{d.state, d.processed, d.taskProcessed, d.dropped, d.polls, d.pollRecords,
		d.commits, d.commitLatency, d.commitLatencyMax, d.punctuations, d.txnCommitted, d.txnAborted, d.fences, d.restarts, d.dlq,
		d.lag, d.storeOps, d.storeEntries, d.restored, d.remaining, d.eta, d.standbyLag, d.changelog, d.expiring, d.enforced,
		d.opDropped, d.opLost} {
		ch <- x
	}
}

// Collect implements prometheus.Collector. It reads counters and positions; it never
// waits for the poll loop.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	d := m.descs
	counter := func(desc *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
	}
	cur := State(m.r.state.Load())
	for s := StateCreated; s <= StateError; s++ {
		v := 0.0
		if s == cur {
			v = 1
		}
		gauge(d.state, v, s.String())
	}

	st := m.r.Stats()
	counter(d.commits, st.Commits)
	c := &m.r.stats
	c.mu.Lock()
	sum, n, maxLat := c.sum, c.commits, c.max
	c.mu.Unlock()
	ch <- prometheus.MustNewConstSummary(d.commitLatency, uint64(n), sum.Seconds(), map[float64]float64{0.99: st.CommitLatencyP99.Seconds()})
	gauge(d.commitLatencyMax, maxLat.Seconds())
	txns := int64(0)
	if st.ExactlyOnce {
		txns = st.Commits
	}
	counter(d.txnCommitted, txns)
	counter(d.txnAborted, st.TransactionsAborted)
	counter(d.fences, st.ProducerFences)
	counter(d.restarts, st.Restarts)
	counter(d.changelog, st.ChangelogRecordsTotal)
	counter(d.expiring, st.ExpiringChangelogRecords)
	counter(d.enforced, st.EnforcedProcessing)
	counter(d.polls, m.polls.Load())
	counter(d.pollRecords, m.pollRecords.Load())
	counter(d.punctuations, m.punctuations.Load())
	for i, k := range dlqKinds {
		counter(d.dlq, m.deadLetters[i].Load(), k)
	}

	m.mu.Lock()
	var total int64
	for id, tm := range m.tasks {
		task := id.String()
		p := tm.processed.Load()
		total += p
		counter(d.taskProcessed, p, task)
		for i, reason := range dropReasons {
			if v := tm.dropped[i].Load(); v > 0 {
				counter(d.dropped, v, task, reason)
			}
		}
	}
	if v := m.globalDropped.Load(); v > 0 {
		counter(d.dropped, v, "global", DropNullKey)
	}
	counter(d.processed, total)
	for _, oc := range m.r.cfg.OperatorCounts.Snapshot() {
		desc := d.opDropped
		if oc.Lost {
			desc = d.opLost
		}
		counter(desc, oc.N, oc.Task.String(), oc.Operator, oc.Reason)
	}
	for tp, pm := range m.parts {
		if lag, ok := pm.lag(); ok {
			gauge(d.lag, float64(lag), pm.task.String(), tp.topic, fmt.Sprint(tp.partition))
		}
	}
	// The restorations in progress (status.go: one record of each, which Status reads
	// too), read under the same lock as the totals of those that ended, so that one ending
	// meanwhile is counted once.
	now := time.Now()
	m.r.ops.restoreMu.Lock()
	running := make(map[storeKey]RestoreStatus, len(m.r.ops.restores))
	for p := range m.r.ops.restores {
		running[storeKey{p.task, p.store}] = p.status(now)
	}
	for k, sm := range m.stores {
		task := k.task.String()
		for op, o := range storeOps {
			counter(d.storeOps, sm.ops[op].Load(), task, k.store, o)
		}
		if n := sm.entries.Load(); n >= 0 {
			gauge(d.storeEntries, float64(n), task, k.store)
		}
		rs, restoring := running[k]
		counter(d.restored, sm.restored+rs.Restored, task, k.store)
		gauge(d.remaining, float64(rs.Remaining), task, k.store)
		switch {
		case !restoring || rs.Remaining == 0:
			gauge(d.eta, 0, task, k.store)
		case rs.ETA >= 0: // unknown before the first batch
			gauge(d.eta, rs.ETA.Seconds(), task, k.store)
		}
	}
	m.r.ops.restoreMu.Unlock()
	m.mu.Unlock()

	sb := m.r.standby
	sb.mu.Lock()
	for id, t := range sb.tasks {
		if !t.following {
			continue
		}
		for _, ss := range t.stores {
			if ss.end >= 0 {
				gauge(d.standbyLag, float64(max(ss.end-ss.pos, 0)), id.String(), ss.spec.Name)
			}
		}
	}
	sb.mu.Unlock()
}

// meteredBackend counts the operations on a task's store and samples their latency. It is
// used by the task's goroutine only, as every Backend.
type meteredBackend struct {
	b store.Backend
	m *storeMetrics
	n uint32 // operations, for sampling
}

// Unwrap implements store.Wrapper: the store finds its buffer through it.
func (mb *meteredBackend) Unwrap() store.Backend { return mb.b }

// timed reports whether this operation's latency is sampled.
func (mb *meteredBackend) timed(op int) bool {
	mb.m.ops[op].Add(1)
	mb.n++
	return mb.n%storeSample == 0
}

func (mb *meteredBackend) observe(op int, began time.Time) {
	mb.m.lat[op].Observe(time.Since(began).Seconds())
}

func (mb *meteredBackend) Get(key []byte) ([]byte, bool, error) {
	if !mb.timed(opGet) {
		return mb.b.Get(key)
	}
	began := time.Now()
	v, ok, err := mb.b.Get(key)
	mb.observe(opGet, began)
	return v, ok, err
}

func (mb *meteredBackend) Set(key, value []byte) error {
	if !mb.timed(opPut) {
		return mb.b.Set(key, value)
	}
	began := time.Now()
	err := mb.b.Set(key, value)
	mb.observe(opPut, began)
	return err
}

func (mb *meteredBackend) Delete(key []byte) error {
	if !mb.timed(opDelete) {
		return mb.b.Delete(key)
	}
	began := time.Now()
	err := mb.b.Delete(key)
	mb.observe(opDelete, began)
	return err
}

func (mb *meteredBackend) DeleteRange(from, to []byte) error {
	mb.m.ops[opDelete].Add(1)
	return mb.b.DeleteRange(from, to)
}

func (mb *meteredBackend) Range(from, to []byte) (store.Iterator, error) {
	if !mb.timed(opRange) {
		return mb.b.Range(from, to)
	}
	began := time.Now()
	it, err := mb.b.Range(from, to)
	mb.observe(opRange, began)
	return it, err
}

func (mb *meteredBackend) ReverseRange(from, to []byte) (store.Iterator, error) {
	mb.m.ops[opRange].Add(1)
	return mb.b.ReverseRange(from, to)
}

func (mb *meteredBackend) PrefixScan(prefix []byte) (store.Iterator, error) {
	mb.m.ops[opRange].Add(1)
	return mb.b.PrefixScan(prefix)
}

func (mb *meteredBackend) NewBatch() store.Batch { return meteredBatch{mb.b.NewBatch(), mb.m} }

func (mb *meteredBackend) ApproximateCount() (int64, error) { return mb.b.ApproximateCount() }
func (mb *meteredBackend) Checkpoint() (int64, error)       { return mb.b.Checkpoint() }

// meteredBatch counts the puts and deletes of a batch as they are added.
type meteredBatch struct {
	store.Batch
	m *storeMetrics
}

func (b meteredBatch) Set(k, v []byte) { b.m.ops[opPut].Add(1); b.Batch.Set(k, v) }
func (b meteredBatch) Delete(k []byte) { b.m.ops[opDelete].Add(1); b.Batch.Delete(k) }

// clientMetrics returns the option that reports a Kafka client's metrics through franz-go's
// kprom plugin, labeled with its role (consumer, producer, restore, global, standby) and,
// for clients of which several may exist at once, client; nil without Config.Metrics.
func (r *Runtime) clientMetrics(role, client string) []kgo.Opt {
	if r.met == nil {
		return nil
	}
	reg := prometheus.WrapRegistererWith(prometheus.Labels{"role": role, "client": client}, r.met.reg)
	return []kgo.Opt{kgo.WithHooks(kprom.NewMetrics("kstream_client", kprom.Registerer(lenientRegisterer{reg, r}),
		kprom.FetchAndProduceDetail(kprom.ByNode, kprom.ByTopic, kprom.UncompressedBytes, kprom.Records, kprom.Batches),
		kprom.Histograms(kprom.RequestDurationE2E)))}
}

// lenientRegisterer registers what kprom registers without panicking: a client whose
// metrics are already registered (a restoration of the same store partition starting again
// before the previous client closed) goes unreported rather than stopping the process.
type lenientRegisterer struct {
	prometheus.Registerer
	r *Runtime
}

func (l lenientRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := l.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				l.r.log.Warn("kstream: registering Kafka client metrics", "err", err)
			}
		}
	}
}
