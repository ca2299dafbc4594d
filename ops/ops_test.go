package ops_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/ops"
	"github.com/kstream-go/kstream/serde"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestMain(m *testing.M) { kafkatest.Main(m) }

// testTopology reads numbers (a string key, an Int64 value), renders them as text and counts
// them per key in the store "counts", whose changes go to out: one sub-topology with a
// source, two processors, a store and a sink.
func testTopology(in, out string) *kstream.Builder {
	b := kstream.NewBuilder()
	nums := kstream.Stream(b, in, serde.String(), serde.Int64(), kstream.Named("numbers"))
	text := kstream.MapValues(nums, func(n int64) string { return fmt.Sprint(n) }, kstream.Named("as-text"))
	kstream.Count(text.GroupByKey(), "counts").ToStream(kstream.Named("changes")).To(out, serde.String(), serde.Int64(), kstream.Named("to-out"))
	return b
}

// instance is an App with the ops handler on a test server whose address is the app's
// ApplicationServer.
type instance struct {
	app  *kstream.App
	srv  *httptest.Server
	addr string // host:port
	done chan error
}

type lazyHandler struct{ h atomic.Pointer[http.Handler] }

func (l *lazyHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := l.h.Load()
	if h == nil {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	(*h).ServeHTTP(w, r)
}

// startInstance starts one instance of application appID on the shared broker, its ops
// handler mounted at /ops/.
func startInstance(t *testing.T, appID string, b *kstream.Builder, tweak func(*kstream.Config)) *instance {
	t.Helper()
	lh := &lazyHandler{}
	srv := httptest.NewServer(lh)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	cfg := kstream.Config{
		ApplicationID:     appID,
		Brokers:           kafkatest.Brokers(t),
		StateDir:          t.TempDir(),
		ApplicationServer: u.Host,
		CommitInterval:    200 * time.Millisecond,
		SessionTimeout:    6 * time.Second,
		HeartbeatInterval: 200 * time.Millisecond,
		Logger:            slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if tweak != nil {
		tweak(&cfg)
	}
	app, err := kstream.New(b, cfg)
	if err != nil {
		t.Fatalf("kstream.New: %v", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ops/", http.StripPrefix("/ops", ops.Handler(app)))
	var h http.Handler = mux
	lh.h.Store(&h)
	in := &instance{app: app, srv: srv, addr: u.Host, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { in.done <- app.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-in.done:
			if err != nil {
				t.Errorf("instance %s: Run: %v", in.addr, err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("instance %s did not stop within 30s", in.addr)
		}
	})
	return in
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// getJSON gets url and decodes its JSON body into v; it returns the status code.
func getJSON(t *testing.T, u string, v any) int {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", u, err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("GET %s: Content-Type %q, want application/json; body %s", u, ct, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: decoding %s: %v", u, body, err)
	}
	return resp.StatusCode
}

// nodeNames lists the node names of a topology's description: sources, processors, sinks.
func nodeNames(topo *kstream.Topology) []string {
	var out []string
	for _, sub := range topo.Description().Subtopologies {
		for _, n := range sub.Nodes {
			out = append(out, n.Name)
		}
	}
	slices.Sort(out)
	return out
}

// One instance over 4 partitions, 10 good records (partition p gets p+1) and one that
// cannot be decoded, sent to the dead-letter topic: /api/describe returns the topology,
// the one instance with its four tasks, and the status with exact positions, end offsets,
// lags, processed count and the dead letter; the probes answer 200 while it runs, and the
// readiness probe 503 (liveness still 200) once it stopped.
func TestDescribeStatusAndHealth(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "numbers", 4, nil)
	out := kafkatest.CreateTopic(t, "counts", 4, nil)
	dlq := kafkatest.CreateTopic(t, "dlq", 1, nil)
	appID := kafkatest.Name(t, "app")
	b := testTopology(in, out)
	var recs []*kgo.Record
	for p := range int32(4) {
		for i := range p + 1 {
			recs = append(recs, &kgo.Record{Topic: in, Partition: p, Key: fmt.Appendf(nil, "k%d", p), Value: binary.BigEndian.AppendUint64(nil, uint64(i))})
		}
	}
	recs = append(recs, &kgo.Record{Topic: in, Partition: 2, Key: []byte("bad"), Value: []byte("xyz")})
	kafkatest.Produce(t, kafkatest.ManualProducer(t), recs...)

	inst := startInstance(t, appID, b, func(c *kstream.Config) { c.DeserializationErrorHandler = kstream.DeadLetterQueue(dlq) })
	base := inst.srv.URL + "/ops"
	kafkatest.Eventually(t, 60*time.Second, "all 11 records processed and committed", func() bool {
		s := inst.app.Status()
		if s.ProcessedRecords != 11 || s.DeadLettersTotal != 1 {
			return false
		}
		for _, task := range s.Active {
			for _, p := range task.Partitions {
				if p.Committed != p.EndOffset {
					return false
				}
			}
		}
		return inst.app.Health().Ready
	})

	var d ops.Describe
	if code := getJSON(t, base+"/api/describe", &d); code != http.StatusOK {
		t.Fatalf("describe: HTTP %d", code)
	}
	if d.ApplicationID != appID || d.State != "RUNNING" {
		t.Errorf("application_id %q state %q, want %q RUNNING", d.ApplicationID, d.State, appID)
	}
	if d.Local.StateSince.IsZero() || d.Local.StateSince.After(d.Local.Time) || d.Local.StateReason != "" {
		t.Errorf("local state since %s, reason %q: want when RUNNING began, and no reason", d.Local.StateSince, d.Local.StateReason)
	}
	if d.Topology.Text != inst.app.Topology().Describe() {
		t.Errorf("topology text:\n%s\nwant:\n%s", d.Topology.Text, inst.app.Topology().Describe())
	}
	if len(d.Topology.Subtopologies) != 1 {
		t.Fatalf("subtopologies: %+v", d.Topology.Subtopologies)
	}
	sub := d.Topology.Subtopologies[0]
	var names []string
	kinds := map[string]string{}
	for _, n := range sub.Nodes {
		if n.Kind != "store" {
			names = append(names, n.Name)
		}
		kinds[n.Name+"/"+n.Kind] = strings.Join(append(append(n.Topics, n.Topic), n.Stores...), ",")
	}
	slices.Sort(names)
	if want := nodeNames(inst.app.Topology()); !slices.Equal(names, want) {
		t.Errorf("node names %v, want %v", names, want)
	}
	for k, v := range map[string]string{"numbers/source": in + ",", "as-text/processor": "", "to-out/sink": out, "counts/store": ""} {
		if got, ok := kinds[k]; !ok || got != v {
			t.Errorf("node %s: %q (present %v), want %q; all %v", k, got, ok, v, kinds)
		}
	}
	var edges []string
	for _, e := range sub.Edges {
		edges = append(edges, e.Kind+":"+e.From+"->"+e.To)
	}
	for _, want := range []string{"flow:numbers->as-text", "flow:changes->to-out"} {
		if !slices.Contains(edges, want) {
			t.Errorf("edge %s missing from %v", want, edges)
		}
	}
	storeEdges := 0
	for _, e := range sub.Edges {
		if e.Kind == "store" && e.To == "counts" {
			storeEdges++
		}
	}
	if storeEdges != 1 {
		t.Errorf("%d store edges to counts, want 1: %v", storeEdges, edges)
	}

	if len(d.Instances) != 1 {
		t.Fatalf("instances: %+v", d.Instances)
	}
	m := d.Instances[0]
	if !m.Self || m.Endpoint != inst.addr || !slices.Equal(m.Active, []string{"0_0", "0_1", "0_2", "0_3"}) || len(m.Standby) != 0 || !slices.Equal(m.Stores, []string{"counts"}) {
		t.Errorf("instance: %+v", m)
	}

	st := d.Local
	if st.Endpoint != inst.addr || st.MemberID != m.MemberID || st.ProcessedRecords != 11 || !st.Health.Live || !st.Health.Ready {
		t.Errorf("status: endpoint %q member %q processed %d health %+v", st.Endpoint, st.MemberID, st.ProcessedRecords, st.Health)
	}
	if len(st.Active) != 4 {
		t.Fatalf("active tasks: %+v", st.Active)
	}
	for i, task := range st.Active {
		end := int64(i + 1)
		if i == 2 {
			end++ // the bad record
		}
		want := ops.Partition{Topic: in, Partition: int32(i), Position: end, Committed: end, EndOffset: end, Lag: 0}
		if task.ID != fmt.Sprintf("0_%d", i) || task.Restoring || task.ProcessedRecords != end || len(task.Partitions) != 1 || task.Partitions[0] != want {
			t.Errorf("task %d: %+v, want partition %+v", i, task, want)
		}
	}
	if st.DeadLettersTotal != 1 || len(st.DeadLetters) != 1 {
		t.Fatalf("dead letters: %d, %+v", st.DeadLettersTotal, st.DeadLetters)
	}
	dl := st.DeadLetters[0]
	if dl.Kind != "deserialization" || dl.Operator != "numbers" || dl.Topic != in || dl.Partition != 2 || dl.Offset != 3 ||
		dl.DeadLetterTopic != dlq || dl.DeadLetterPartition != 0 || dl.DeadLetterOffset != 0 || !strings.Contains(dl.Error, "want 8") {
		t.Errorf("dead letter: %+v", dl)
	}
	if len(st.Standby) != 0 || len(st.Restores) != 0 {
		t.Errorf("standby %+v restores %+v, want none", st.Standby, st.Restores)
	}
	if st.Stats.Commits == 0 {
		t.Errorf("stats: %+v", st.Stats)
	}

	var ss ops.Status
	if code := getJSON(t, base+"/api/status", &ss); code != http.StatusOK || ss.ProcessedRecords != 11 || len(ss.Active) != 4 {
		t.Errorf("status: HTTP %d, %+v", code, ss)
	}
	for _, probe := range []string{"/healthz/live", "/healthz/ready"} {
		var h ops.Health
		if code := getJSON(t, base+probe, &h); code != http.StatusOK || h != (ops.Health{Live: true, Ready: true, State: "RUNNING"}) {
			t.Errorf("%s: HTTP %d %+v", probe, code, h)
		}
	}
	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(string(page), `fetch(path`) {
		t.Errorf("page: HTTP %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if strings.Contains(string(page), "http://") && !strings.Contains(string(page), `"http://www.w3.org/2000/svg"`) || strings.Contains(string(page), "https://") {
		t.Errorf("the page refers to an external URL")
	}
	// The prefix without its slash redirects to it, so that the page's relative URLs work
	// (a ServeMux does that by itself; a handler mounted with StripPrefix alone must).
	rec := httptest.NewRecorder()
	http.StripPrefix("/ops", ops.Handler(inst.app)).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/ops", nil))
	if loc := rec.Header().Get("Location"); rec.Code != http.StatusMovedPermanently || loc != "/ops/" {
		t.Errorf("GET /ops: HTTP %d Location %q, want 301 /ops/", rec.Code, loc)
	}
	rec = httptest.NewRecorder()
	ops.Handler(inst.app).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/status", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: HTTP %d, want 405", rec.Code)
	}
}

// An instance with a windowed count that emits on window close (size 10 s, grace 5 s) gets
// a record too late for its window and a jump of stream time that expires a window before
// it closes: Status, /api/status and the Prometheus metrics show the dropped record and
// the lost final result under the aggregation's operator, and the page has their section.
func TestLossesShown(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "events", 1, nil)
	out := kafkatest.CreateTopic(t, "finals", 1, nil)
	appID := kafkatest.Name(t, "app")
	b := kstream.NewBuilder()
	w := kstream.Stream(b, in, serde.String(), serde.String()).GroupByKey().
		WindowedBy(kstream.TimeWindowsOf(10 * time.Second).WithGrace(5 * time.Second)).EmitOnWindowClose()
	kstream.WindowedCount(w, "counts").ToStream().To(out, serde.TimeWindowed(serde.String(), 10*time.Second), serde.Int64())
	var recs []*kgo.Record
	for _, ms := range []int64{1000, 12000, 26000, 2000} { // 26000 expires [0, 10000) as it closes it; 2000 is late
		recs = append(recs, &kgo.Record{Topic: in, Key: []byte("a"), Value: []byte("v"), Timestamp: time.UnixMilli(ms)})
	}
	kafkatest.Produce(t, kafkatest.ManualProducer(t), recs...)
	reg := prometheus.NewRegistry()
	var logs syncBuffer
	inst := startInstance(t, appID, b, func(c *kstream.Config) {
		c.Metrics = reg
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	const op = "KSTREAM-AGGREGATE-0000000001"
	want := []kstream.OperatorLoss{
		{Operator: op, Reason: "expired_window", Count: 1},
		{Operator: op, Reason: "window_expired", LostResults: true, Count: 1},
	}
	kafkatest.Eventually(t, 60*time.Second, "4 records processed", func() bool { return inst.app.Status().ProcessedRecords == 4 })
	st := inst.app.Status()
	if !slices.Equal(st.Stats.Losses, want) || st.Stats.LostResults != 1 || st.Stats.DroppedRecords != 1 {
		t.Errorf("Status: losses %+v lost %d dropped %d, want %+v, 1, 1", st.Stats.Losses, st.Stats.LostResults, st.Stats.DroppedRecords, want)
	}
	if got := inst.app.Stats().Losses; !slices.Equal(got, want) {
		t.Errorf("Stats: losses %+v, want %+v", got, want)
	}
	var ss ops.Status
	if code := getJSON(t, inst.srv.URL+"/ops/api/status", &ss); code != http.StatusOK {
		t.Fatalf("status: HTTP %d", code)
	}
	wantJSON := []ops.Loss{{Operator: op, Kind: "dropped_records", Reason: "expired_window", Count: 1}, {Operator: op, Kind: "lost_results", Reason: "window_expired", Count: 1}}
	if !slices.Equal(ss.Losses, wantJSON) || ss.Stats.LostResults != 1 || ss.Stats.DroppedRecords != 1 {
		t.Errorf("/api/status: losses %+v stats %+v, want %+v", ss.Losses, ss.Stats, wantJSON)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			if !strings.HasPrefix(f.GetName(), "kstream_operator_") {
				continue
			}
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			got[f.GetName()+"/"+labels["task"]+"/"+labels["operator"]+"/"+labels["reason"]] += m.GetCounter().GetValue()
		}
	}
	wantMetrics := map[string]float64{
		"kstream_operator_dropped_records_total/0_0/" + op + "/expired_window": 1,
		"kstream_operator_lost_results_total/0_0/" + op + "/window_expired":    1,
	}
	if !maps.Equal(got, wantMetrics) {
		t.Errorf("metrics %v, want %v", got, wantMetrics)
	}
	// Warnings with a reason: a real broker may add a start-up warning (waiting for the
	// changelog's leader), which is weather.
	n := 0
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "level=WARN") && strings.Contains(l, " reason=") {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d warn lines with a reason, want 2 (the late record, the lost result):\n%s", n, logs.String())
	}
	resp, err := http.Get(inst.srv.URL + "/ops/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), `id="losses"`) {
		t.Errorf("the page has no losses section")
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// An instance with an async operator whose calls fail once (retriable) then succeed:
// /api/status, the page and the Prometheus metrics show its calls, retries and latency.
func TestAsyncShown(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "orders", 2, nil)
	out := kafkatest.CreateTopic(t, "enriched", 2, nil)
	appID := kafkatest.Name(t, "app")
	var calls sync.Map
	b := kstream.NewBuilder()
	kstream.MapValuesAsync(kstream.Stream(b, in, serde.String(), serde.String()), func(ctx context.Context, k, v string) (string, error) {
		if _, again := calls.LoadOrStore(k, true); !again {
			return "", kstream.Retriable(errors.New("busy"))
		}
		return v + "!", nil
	}, kstream.Named("enrich"), kstream.WithAsyncRetry(kstream.AsyncRetry{InitialBackoff: time.Millisecond})).To(out, nil, nil)
	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs, &kgo.Record{Topic: in, Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v")})
	}
	kafkatest.Produce(t, kafkatest.ManualProducer(t), recs...)
	reg := prometheus.NewRegistry()
	inst := startInstance(t, appID, b, func(c *kstream.Config) { c.Metrics = reg })
	kafkatest.Consume(t, out, 10, 60*time.Second)
	var ss ops.Status
	if code := getJSON(t, inst.srv.URL+"/ops/api/status", &ss); code != http.StatusOK {
		t.Fatalf("status: HTTP %d", code)
	}
	if len(ss.Async) != 1 || ss.Async[0].Operator != "enrich" || ss.Async[0].Calls != 20 || ss.Async[0].Retries != 10 || ss.Async[0].Failures != 0 || ss.Async[0].Held != 0 {
		t.Errorf("/api/status: async %+v", ss.Async)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		if !strings.HasPrefix(f.GetName(), "kstream_async_") {
			continue
		}
		for _, m := range f.GetMetric() {
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
			got[f.GetName()] += v
		}
	}
	want := map[string]float64{"kstream_async_calls_total": 20, "kstream_async_retries_total": 10, "kstream_async_failures_total": 0,
		"kstream_async_in_flight_calls": 0, "kstream_async_held_records": 0, "kstream_async_call_latency_seconds": 20, "kstream_async_queue_wait_seconds": 10}
	if !maps.Equal(got, want) {
		t.Errorf("metrics %v, want %v", got, want)
	}
	resp, err := http.Get(inst.srv.URL + "/ops/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), `id="async-section"`) {
		t.Errorf("the page has no async section")
	}
}
