package kstream_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kgo"
)

// scrape is one scrape of a /metrics endpoint over HTTP.
type scrape map[string]*dto.MetricFamily

func scrapeMetrics(t *testing.T, url string) scrape {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scraping %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("scraping %s: %s: %s", url, resp.Status, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing the scrape of %s: %v", url, err)
	}
	return fams
}

// value returns the value of the series of name whose labels include labels ("k=v" pairs),
// summed over the series that match; ok is false if none does.
func (s scrape) value(name string, labels ...string) (float64, bool) {
	fam := s[name]
	if fam == nil {
		return 0, false
	}
	var sum float64
	found := false
	for _, m := range fam.Metric {
		have := map[string]string{}
		for _, lp := range m.Label {
			have[lp.GetName()] = lp.GetValue()
		}
		match := true
		for _, l := range labels {
			k, v, _ := strings.Cut(l, "=")
			if have[k] != v {
				match = false
				break
			}
		}
		if !match {
			continue
		}
		found = true
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Summary != nil:
			sum += float64(m.Summary.GetSampleCount())
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum, found
}

// must returns value's value, failing the test if no series matches.
func (s scrape) must(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	v, ok := s.value(name, labels...)
	if !ok {
		t.Fatalf("no series %s%v in the scrape", name, labels)
	}
	return v
}

// TestMetricsScrape runs a count under a registry served over HTTP and checks the scraped
// values against what the test did: the records processed, the lag of the input partition
// while processing is held at a known record, the commits, and the restoration of the
// store after a restart on an empty state directory.
func TestMetricsScrape(t *testing.T) {
	t.Parallel()
	const n, stopAt, more = 100, 60, 20
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	cfg := testConfig(t)
	reg := prometheus.NewRegistry()
	cfg.Metrics = reg
	cfg.StateDir = t.TempDir()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	url := srv.URL + "/metrics"

	// The record at offset stopAt holds processing until the test releases it.
	blocked, release := make(chan struct{}), make(chan struct{})
	build := func() *kstream.Builder {
		b := kstream.NewBuilder()
		src := kstream.Stream(b, in, serde.String(), serde.String()).Peek(func(_, v string) {
			if v == "stop" {
				close(blocked)
				<-release
			}
		})
		kstream.Count(src.GroupByKey(), "counts").ToStream().To(out, nil, nil)
		return b
	}
	// Every input record is produced before the app starts: the partition's end is n.
	var recs []*kgo.Record
	for i := range n {
		v := "v"
		if i == stopAt {
			v = "stop"
		}
		recs = append(recs, &kgo.Record{Topic: in, Key: fmt.Appendf(nil, "k%d", i%7), Value: []byte(v)})
	}
	cl := kafkatest.Client(t)
	kafkatest.Produce(t, cl, recs...)

	app := newApp(t, build(), cfg)
	r := start(t, app)
	select {
	case <-blocked:
	case <-time.After(60 * time.Second):
		t.Fatal("the record at offset 60 was not processed within 60s")
	}
	// Processing is held inside the record at offset stopAt: stopAt records are processed
	// and the partition's end is n.
	s := scrapeMetrics(t, url)
	lagLabels := []string{"task=0_0", "topic=" + in, "partition=0"}
	if got := s.must(t, "kstream_task_consumer_lag_records", lagLabels...); got != n-stopAt {
		t.Errorf("lag while held at offset %d: %v, want %d", stopAt, got, n-stopAt)
	}
	if got := s.must(t, "kstream_records_processed_total"); got != stopAt {
		t.Errorf("processed while held at offset %d: %v, want %d", stopAt, got, stopAt)
	}
	if got := s.must(t, "kstream_task_records_processed_total", "task=0_0"); got != stopAt {
		t.Errorf("task 0_0 processed while held: %v, want %d", got, stopAt)
	}
	if got := s.must(t, "kstream_state", "state=RUNNING"); got != 1 {
		t.Errorf("state RUNNING: %v, want 1", got)
	}
	if got := s.must(t, "kstream_state", "state=REBALANCING"); got != 0 {
		t.Errorf("state REBALANCING: %v, want 0", got)
	}
	close(release)

	// Everything processed: processed n, lag 0, and at least one commit.
	var commits float64
	kafkatest.Eventually(t, 30*time.Second, "n records processed, lag 0, a commit", func() bool {
		s = scrapeMetrics(t, url)
		p, _ := s.value("kstream_records_processed_total")
		lag, _ := s.value("kstream_task_consumer_lag_records", lagLabels...)
		commits, _ = s.value("kstream_commits_total")
		return p == n && lag == 0 && commits >= 1
	})
	if got := s.must(t, "kstream_polls_total"); got < 1 {
		t.Errorf("polls: %v, want >= 1", got)
	}
	if got := s.must(t, "kstream_poll_records_total"); got != n {
		t.Errorf("records polled: %v, want %d", got, n)
	}
	if got := s.must(t, "kstream_commit_latency_seconds"); got != commits {
		t.Errorf("commit latency count %v, want the commits, %v", got, commits)
	}
	if got := s.must(t, "kstream_store_operations_total", "task=0_0", "store=counts", "op=put"); got != n {
		t.Errorf("puts into the count's store: %v, want %d", got, n)
	}
	if got := s.must(t, "kstream_store_operations_total", "task=0_0", "store=counts", "op=get"); got != n {
		t.Errorf("gets from the count's store: %v, want %d", got, n)
	}
	if got := s.must(t, "kstream_store_entries", "task=0_0", "store=counts"); got != 7 {
		t.Errorf("entries of the count's store: %v, want 7", got)
	}
	if got := s.must(t, "kstream_record_e2e_latency_seconds", "subtopology=0"); got != (n+15)/16 {
		t.Errorf("end-to-end latency samples: %v, want %d (one in 16)", got, (n+15)/16)
	}
	if got := s.must(t, "kstream_transactions_committed_total"); got != 0 {
		t.Errorf("transactions committed under at-least-once: %v, want 0", got)
	}
	// The Kafka clients' metrics, from kprom, one set per role.
	for _, role := range []string{"consumer", "producer"} {
		if got := s.must(t, "kstream_client_read_bytes_total", "role="+role, "application_id="+cfg.ApplicationID); got <= 0 {
			t.Errorf("bytes read by the %s: %v, want > 0", role, got)
		}
	}

	// More records: processed grows by them, and so do the commits.
	recs = recs[:0]
	for i := range more {
		recs = append(recs, &kgo.Record{Topic: in, Key: fmt.Appendf(nil, "k%d", i%7), Value: []byte("v")})
	}
	kafkatest.Produce(t, cl, recs...)
	kafkatest.Eventually(t, 30*time.Second, "more records processed and committed", func() bool {
		s = scrapeMetrics(t, url)
		p, _ := s.value("kstream_records_processed_total")
		lag, _ := s.value("kstream_task_consumer_lag_records", lagLabels...)
		c, _ := s.value("kstream_commits_total")
		return p == n+more && lag == 0 && c > commits
	})
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if _, ok := scrapeMetrics(t, url).value("kstream_records_processed_total"); ok {
		t.Error("the metrics are still registered after Run returned")
	}

	// The changelog's records: what a restoration on an empty state directory applies.
	changelog := kafkatest.Drain(t, cfg.ApplicationID+"-counts-changelog", time.Second, 30*time.Second)
	if len(changelog) == 0 {
		t.Fatal("the changelog is empty")
	}
	cfg.StateDir = t.TempDir()
	app = newApp(t, build(), cfg)
	r = start(t, app)
	kafkatest.Eventually(t, 60*time.Second, "running after the restoration", func() bool { return app.State() == kstream.StateRunning })
	s = scrapeMetrics(t, url)
	storeLabels := []string{"task=0_0", "store=counts"}
	if got := s.must(t, "kstream_store_restore_records_total", storeLabels...); got != float64(len(changelog)) {
		t.Errorf("records restored: %v, want the changelog's %d", got, len(changelog))
	}
	if got := s.must(t, "kstream_store_restore_remaining_records", storeLabels...); got != 0 {
		t.Errorf("records left to restore after the restoration: %v, want 0", got)
	}
	if got := s.must(t, "kstream_store_restore_eta_seconds", storeLabels...); got != 0 {
		t.Errorf("restoration ETA after the restoration: %v, want 0", got)
	}
	if got := s.must(t, "kstream_records_processed_total"); got != 0 {
		t.Errorf("records processed after the restart (all committed before): %v, want 0", got)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}

// TestMetricsDropped checks the dropped-records counter by reason and the dead-letter
// counter: records with a null key dropped by an aggregation, and records that fail to
// deserialize sent to a dead-letter topic (counted by reason at the source operator too).
func TestMetricsDropped(t *testing.T) {
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	dlq := kafkatest.CreateTopic(t, "dlq", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	cfg := testConfig(t)
	reg := prometheus.NewRegistry()
	cfg.Metrics = reg
	cfg.StateDir = t.TempDir()
	cfg.DeserializationErrorHandler = kstream.DeadLetterQueue(dlq)
	b := kstream.NewBuilder()
	kstream.Count(kstream.Stream(b, in, serde.String(), serde.Int64()).GroupByKey(), "counts").ToStream().To(out, nil, nil)
	eight := make([]byte, 8)
	cl := kafkatest.Client(t)
	kafkatest.Produce(t, cl,
		&kgo.Record{Topic: in, Key: []byte("a"), Value: eight},
		&kgo.Record{Topic: in, Value: eight},                                 // null key: dropped by the count
		&kgo.Record{Topic: in, Key: []byte("b"), Value: []byte("not eight")}, // not an int64: dead letter
		&kgo.Record{Topic: in, Value: eight},                                 // null key
		&kgo.Record{Topic: in, Key: []byte("c"), Value: eight},
	)
	app := newApp(t, b, cfg)
	start(t, app)
	kafkatest.Eventually(t, 60*time.Second, "5 records processed", func() bool {
		v, _ := testutilValue(reg, "kstream_records_processed_total")
		return v == 5
	})
	want := map[string]float64{
		`kstream_task_dropped_records_total{reason="null_key_or_value"}`:                  2,
		`kstream_task_dropped_records_total{reason="skipped_deserialization_error"}`:      1,
		`kstream_dead_letter_records_total{kind="deserialization"}`:                       1,
		`kstream_dead_letter_records_total{kind="processing"}`:                            0,
		`kstream_operator_dropped_records_total{operator="KSTREAM-AGGREGATE-0000000001"}`: 2,
		`kstream_operator_dropped_records_total{reason="null_key_or_value"}`:              2,
		// The dead letter, at the source that could not decode it.
		`kstream_operator_dropped_records_total{reason="skipped_deserialization_error"}`: 1,
		`kstream_operator_dropped_records_total{operator="KSTREAM-SOURCE-0000000000"}`:   1,
	}
	for series, w := range want {
		name, rest, _ := strings.Cut(series, "{")
		label := strings.Trim(rest, "}")
		k, v, _ := strings.Cut(label, "=")
		got, ok := testutilValue(reg, name, k+"="+strings.Trim(v, `"`))
		if !ok || got != w {
			t.Errorf("%s = %v (found %v), want %v", series, got, ok, w)
		}
	}
	if recs := kafkatest.Consume(t, dlq, 1, 30*time.Second); string(recs[0].Key) != "b" {
		t.Errorf("dead letter key %q, want b", recs[0].Key)
	}
}

// testutilValue gathers reg and returns the summed value of the series of name whose labels
// include labels.
func testutilValue(reg *prometheus.Registry, name string, labels ...string) (float64, bool) {
	fams, err := reg.Gather()
	if err != nil {
		return 0, false
	}
	s := scrape{}
	for _, f := range fams {
		s[f.GetName()] = f
	}
	return s.value(name, labels...)
}

// TestMetricsOff checks that an app without Config.Metrics registers nothing anywhere: the
// default registry has no kstream series after a run.
func TestMetricsOff(t *testing.T) {
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	cfg := testConfig(t)
	b := kstream.NewBuilder()
	kstream.Stream(b, in, serde.String(), serde.String()).To(out, nil, nil)
	kafkatest.Produce(t, kafkatest.Client(t), &kgo.Record{Topic: in, Key: []byte("a"), Value: []byte("x")})
	r := start(t, newApp(t, b, cfg))
	kafkatest.Consume(t, out, 1, 30*time.Second)
	fams, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), "kstream") {
			t.Errorf("metric %s registered globally", f.GetName())
		}
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}

// TestMetricsExactlyOnce checks the metrics of an exactly-once app: transactions committed,
// and the lag of an input partition that ends in transaction markers (written by a
// transactional producer), which must go to 0 once every record is processed.
func TestMetricsExactlyOnce(t *testing.T) {
	const n = 30
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	cfg := testConfig(t)
	cfg.Guarantee = kstream.ExactlyOnce
	cfg.StateDir = t.TempDir()
	reg := prometheus.NewRegistry()
	cfg.Metrics = reg
	b := kstream.NewBuilder()
	kstream.Count(kstream.Stream(b, in, serde.String(), serde.String()).GroupByKey(), "counts").ToStream().To(out, nil, nil)
	// The input is written in 3 transactions: the partition ends in a commit marker.
	txn := kafkatest.Client(t, kgo.TransactionalID(kafkatest.Name(t, "txn")))
	for batch := range 3 {
		ctx := kafkatest.Context(t, 30*time.Second)
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range n / 3 {
			if err := txn.ProduceSync(ctx, &kgo.Record{Topic: in, Key: fmt.Appendf(nil, "k%d", i%4), Value: fmt.Appendf(nil, "%d", batch)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
	}
	r := start(t, newApp(t, b, cfg))
	lagLabels := []string{"task=0_0", "topic=" + in, "partition=0"}
	var s scrape
	kafkatest.Eventually(t, 60*time.Second, "30 records processed in committed transactions, lag 0", func() bool {
		fams, err := reg.Gather()
		if err != nil {
			return false
		}
		s = scrape{}
		for _, f := range fams {
			s[f.GetName()] = f
		}
		p, _ := s.value("kstream_records_processed_total")
		lag, _ := s.value("kstream_task_consumer_lag_records", lagLabels...)
		txns, _ := s.value("kstream_transactions_committed_total")
		return p == n && lag == 0 && txns >= 1
	})
	if c, txns := s.must(t, "kstream_commits_total"), s.must(t, "kstream_transactions_committed_total"); c != txns {
		t.Errorf("commits %v, transactions committed %v: want equal under exactly-once", c, txns)
	}
	if got := s.must(t, "kstream_client_read_bytes_total", "role=consumer"); got <= 0 {
		t.Errorf("bytes read by the transactional consumer: %v, want > 0", got)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}

// TestMetricsStandby runs two instances with a standby each (their own registries): the
// instance with the standby reports its lag, which reaches 0 once it applied the
// changelog, and the active one reports the store's entries.
func TestMetricsStandby(t *testing.T) {
	const n = 40
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	base := testConfig(t)
	base.NumStandbys = 1
	type inst struct {
		app *kstream.App
		reg *prometheus.Registry
	}
	var insts []inst
	for range 2 {
		cfg := base
		cfg.StateDir = t.TempDir()
		reg := prometheus.NewRegistry()
		cfg.Metrics = reg
		app := newApp(t, countTopology(in, out), cfg)
		start(t, app)
		insts = append(insts, inst{app, reg})
	}
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: in, Key: fmt.Appendf(nil, "k%d", i%5), Value: []byte("v")})
	}
	kafkatest.Produce(t, kafkatest.Client(t), recs...)
	storeLabels := []string{"task=0_0", "store=counts"}
	kafkatest.Eventually(t, 60*time.Second, "the active processed every record and the standby caught up", func() bool {
		var processed float64
		standbyCaughtUp := false
		for _, in := range insts {
			p, _ := testutilValue(in.reg, "kstream_task_records_processed_total", "task=0_0")
			processed += p
			if slices.Equal(in.app.StandbyTasks(), []kstream.TaskID{{SubTopology: 0, Partition: 0}}) {
				lag, ok := testutilValue(in.reg, "kstream_standby_lag_records", storeLabels...)
				standbyCaughtUp = ok && lag == 0
			}
		}
		return processed == n && standbyCaughtUp
	})
	for _, in := range insts {
		if len(in.app.Tasks()) == 1 {
			if got, ok := testutilValue(in.reg, "kstream_store_operations_total", append(storeLabels, "op=put")...); !ok || got != n {
				t.Errorf("puts on the active: %v (found %v), want %d", got, ok, n)
			}
		}
	}
}

// TestMetricsRegistryShared checks that a second instance of an application cannot start on
// the registry the first one reports to (its series would collide), and says why.
func TestMetricsRegistryShared(t *testing.T) {
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	cfg := testConfig(t)
	cfg.Metrics = prometheus.NewRegistry()
	cfg.StateDir = t.TempDir()
	b := kstream.NewBuilder()
	kstream.Stream(b, in, serde.String(), serde.String()).To(out, nil, nil)
	first := newApp(t, b, cfg)
	start(t, first)
	kafkatest.Eventually(t, 60*time.Second, "the first instance running", func() bool { return first.State() == kstream.StateRunning })
	cfg.StateDir = t.TempDir()
	err := newApp(t, b, cfg).Run(kafkatest.Context(t, 30*time.Second))
	var are prometheus.AlreadyRegisteredError
	if !errors.As(err, &are) || !strings.Contains(err.Error(), "Config.Metrics") {
		t.Fatalf("second instance on the same registry: %v, want an already-registered error naming Config.Metrics", err)
	}
	if first.State() != kstream.StateRunning {
		t.Errorf("first instance %s after the second failed, want RUNNING", first.State())
	}
}
