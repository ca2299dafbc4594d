package query

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestMain(m *testing.M) { kafkatest.Main(m) }

// t0 is the time of the first test record: a whole hour, a few hours ago (the in-process
// broker deletes records older than its retention).
var t0 = time.Now().Truncate(time.Hour).Add(-4 * time.Hour)

// words is the test input: word i occurs occurrences(i) times, occurrence j at t0 + j*20min.
var words = func() []string {
	var ws []string
	for i := range 60 {
		ws = append(ws, fmt.Sprintf("w%02d", i))
	}
	return ws
}()

func occurrences(i int) int { return i%7 + 1 }

// wordNumber is the number of a word: 7 for w07.
func wordNumber(w string) int64 {
	n, _ := strconv.ParseInt(strings.TrimPrefix(w, "w"), 10, 64)
	return n
}

const occurrenceStep = 20 * time.Minute

// wantCounts is the count of every word.
func wantCounts() map[string]int64 {
	m := map[string]int64{}
	for i, w := range words {
		m[w] = int64(occurrences(i))
	}
	return m
}

// topology counts the words of in (keyed by word) into "counts", per hour into
// "wcounts", and per session (5 minutes of inactivity) into "scounts"; the windowed stores
// keep closed windows for 2 days, to be queried. "numbers" counts them by their number
// (w07 is 7), an int64 key, through a repartition topic.
func topology(in string) *kstream.Builder {
	b := kstream.NewBuilder()
	s := kstream.Stream(b, in, serde.String(), serde.String())
	kstream.Count(s.GroupByKey(), "counts")
	kstream.WindowedCount(s.GroupByKey().WindowedBy(kstream.TimeWindowsOf(time.Hour)), "wcounts", kstream.WithRetention(48*time.Hour))
	kstream.SessionCount(s.GroupByKey().WindowedBySession(kstream.SessionWindowsOf(5*time.Minute)), "scounts", kstream.WithRetention(48*time.Hour))
	kstream.Count(kstream.GroupBy(s, func(w, _ string) int64 { return wordNumber(w) }, serde.Int64()), "numbers")
	return b
}

// produceWords writes the input, in timestamp order.
func produceWords(t testing.TB, topic string) {
	var recs []*kgo.Record
	for j := range 7 {
		for i, w := range words {
			if j < occurrences(i) {
				recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(w), Value: []byte("x"), Timestamp: t0.Add(time.Duration(j) * occurrenceStep)})
			}
		}
	}
	kafkatest.Produce(t, kafkatest.Client(t), recs...)
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// instance is one application instance with its query server.
type instance struct {
	app        *kstream.App
	addr       string
	base       string
	stopServer func() // stops the query server only
	stop       func() // stops the server and the app
}

// clusterOptions configure the instances of a test.
type clusterOptions struct {
	auth      func(*http.Request) error
	serverTLS *tls.Config
	peerTLS   *tls.Config
	standbys  int
	maxBytes  int
}

// startCluster starts n instances of the topology over in, each with its own state
// directory and a query server on its ApplicationServer.
func startCluster(t testing.TB, in string, n int, o clusterOptions) []*instance {
	t.Helper()
	appID := kafkatest.Name(t, "app")
	var out []*instance
	for range n {
		out = append(out, startInstance(t, appID, in, o))
	}
	return out
}

// startInstance starts an instance of application appID, stopped at the end of the test
// (or by its stop).
func startInstance(t testing.TB, appID, in string, o clusterOptions) *instance {
	t.Helper()
	lvl := slog.LevelWarn
	if os.Getenv("KSTREAM_TEST_DEBUG") != "" {
		lvl = slog.LevelDebug
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: lvl})).With("instance", addr)
	app, err := kstream.New(topology(in), kstream.Config{
		ApplicationID:     appID,
		Brokers:           kafkatest.Brokers(t),
		CommitInterval:    100 * time.Millisecond,
		SessionTimeout:    6 * time.Second,
		HeartbeatInterval: 200 * time.Millisecond,
		StateDir:          t.TempDir(),
		ApplicationServer: addr,
		NumStandbys:       o.standbys,
		Logger:            logger,
	})
	if err != nil {
		t.Fatalf("kstream.New: %v", err)
	}
	cfg := Config{App: app, Auth: o.auth, Logger: logger, MaxResponseBytes: o.maxBytes}
	scheme := "http"
	if o.serverTLS != nil {
		scheme = "https"
		cfg.Scheme = "https"
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = o.peerTLS
		cfg.Client = &http.Client{Transport: tr}
	}
	srv := NewServer(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	sctx, scancel := context.WithCancel(ctx)
	appDone, srvDone := make(chan error, 1), make(chan error, 1)
	go func() { appDone <- app.Run(ctx) }()
	go func() { srvDone <- srv.Serve(sctx, ln, o.serverTLS) }()
	wait := func(what string, c chan error) {
		select {
		case err := <-c:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("%s %s stopped with: %v", what, addr, err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("%s %s did not stop within 30s", what, addr)
		}
	}
	var serverOnce, appOnce sync.Once
	stopServer := func() { serverOnce.Do(func() { scancel(); wait("query server", srvDone) }) }
	stop := func() {
		stopServer()
		appOnce.Do(func() { cancel(); wait("instance", appDone) })
	}
	t.Cleanup(stop)
	return &instance{app: app, addr: addr, base: scheme + "://" + addr, stopServer: stopServer, stop: stop}
}

// newClient returns a client of inst, closed at the end of the test.
func newClient(t testing.TB, inst *instance, opts ...ClientOption) *Client {
	c := NewClient(inst.base, opts...)
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// waitReady waits until every instance is in the group and every word has its count at
// every instance.
func waitReady(t testing.TB, insts []*instance, clients []*Client) {
	t.Helper()
	want := wantCounts()
	kafkatest.Eventually(t, 90*time.Second, "every instance answering every count", func() bool {
		for i, inst := range insts {
			if len(inst.app.Metadata()) != len(insts) {
				return false
			}
			got, err := StoreOf[string, int64](clients[i], "counts").All(context.Background())
			if err != nil || len(got) != len(want) {
				return false
			}
			for _, kv := range got {
				if want[kv.Key] != kv.Value {
					return false
				}
			}
			nums, err := StoreOf[int64, int64](clients[i], "numbers").All(context.Background())
			if err != nil || len(nums) != len(want) {
				return false
			}
			for _, kv := range nums {
				if want[fmt.Sprintf("w%02d", kv.Key)] != kv.Value {
					return false
				}
			}
		}
		return true
	})
}

// checkGets queries every word at every instance and checks its count and hops.
func checkGets(t *testing.T, insts []*instance, clients []*Client) {
	t.Helper()
	ctx := kafkatest.Context(t, 60*time.Second)
	want := wantCounts()
	var total [2]int
	for i, inst := range insts {
		hops := map[int]int{}
		for _, w := range words {
			r, ok, err := StoreOf[string, int64](clients[i], "counts").Lookup(ctx, w)
			if err != nil || !ok {
				t.Fatalf("instance %d: get %q: %v, found %v", i, w, err, ok)
			}
			if r.Value != want[w] {
				t.Fatalf("instance %d: get %q = %d, want %d", i, w, r.Value, want[w])
			}
			km, err := inst.app.KeyMetadata("counts", w)
			if err != nil {
				t.Fatal(err)
			}
			wantHops := 1
			if km.Active == inst.addr {
				wantHops = 0
			}
			if r.Served.Hops != wantHops || r.Served.By != km.Active || r.Partition != km.Partition {
				t.Fatalf("instance %d (%s): get %q served by %q with %d hops from partition %d; its owner is %s (partition %d)",
					i, inst.addr, w, r.Served.By, r.Served.Hops, r.Partition, km.Active, km.Partition)
			}
			hops[r.Served.Hops]++
			if o, err := StoreOf[string, int64](clients[i], "counts").Owner(ctx, w); err != nil || o.Active != km.Active || o.Partition != km.Partition {
				t.Fatalf("instance %d: owner of %q: %+v, %v; want %+v", i, w, o, err, km)
			}
		}
		total[0], total[1] = total[0]+hops[0], total[1]+hops[1]
		t.Logf("instance %d: %d local, %d forwarded", i, hops[0], hops[1])
	}
	if total[0] == 0 || total[1] == 0 {
		t.Fatalf("hops %v: want both local and forwarded answers", total)
	}
}

// sortedWords returns words in the order of their serialized bytes.
func sortedWords() []string {
	ws := slices.Clone(words)
	slices.Sort(ws)
	return ws
}

func keysOf[V any](kvs []KeyValue[string, V]) []string {
	var out []string
	for _, kv := range kvs {
		out = append(out, kv.Key)
	}
	return out
}

func TestQueriesAcrossInstances(t *testing.T) {
	in := kafkatest.CreateTopic(t, "words", 12, nil)
	produceWords(t, in)
	insts := startCluster(t, in, 3, clusterOptions{})
	var clients []*Client
	for _, inst := range insts {
		clients = append(clients, newClient(t, inst))
	}
	waitReady(t, insts, clients)
	checkGets(t, insts, clients)

	ctx := kafkatest.Context(t, 60*time.Second)
	want := wantCounts()
	md, err := clients[1].Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var owned []int32
	selves := 0
	for _, in := range md.Instances {
		owned = append(owned, in.Stores["counts"]...)
		if in.Self {
			selves++
			if in.Host != insts[1].addr {
				t.Fatalf("metadata: self is %s, asked %s", in.Host, insts[1].addr)
			}
		}
	}
	slices.Sort(owned)
	if len(md.Instances) != 3 || selves != 1 || fmt.Sprint(owned) != "[0 1 2 3 4 5 6 7 8 9 10 11]" {
		t.Fatalf("metadata: %+v", md)
	}
	stores, err := clients[2].Stores(ctx)
	if err != nil || fmt.Sprint(stores) != "[{counts key-value 12} {numbers key-value 12} {scounts session 12} {wcounts window 12}]" {
		t.Fatalf("stores: %v %v", stores, err)
	}
	for i, c := range clients {
		counts := StoreOf[string, int64](c, "counts")
		for _, opts := range [][]ScanOption{nil, {PageSize(7)}, {PageSize(1)}} {
			all, err := counts.All(ctx, opts...)
			if err != nil {
				t.Fatalf("instance %d: all: %v", i, err)
			}
			if got := keysOf(all); !slices.Equal(got, sortedWords()) {
				t.Fatalf("instance %d: all %v: keys %v, want %v", i, opts, got, sortedWords())
			}
			for _, kv := range all {
				if kv.Value != want[kv.Key] {
					t.Fatalf("instance %d: all: %q = %d, want %d", i, kv.Key, kv.Value, want[kv.Key])
				}
			}
		}
		rev, err := counts.All(ctx, Reverse(), PageSize(5))
		if err != nil {
			t.Fatal(err)
		}
		wantRev := sortedWords()
		slices.Reverse(wantRev)
		if got := keysOf(rev); !slices.Equal(got, wantRev) {
			t.Fatalf("instance %d: reverse all: %v", i, got)
		}
		rng, err := counts.Range(ctx, "w10", "w20", PageSize(4))
		if err != nil {
			t.Fatal(err)
		}
		if got := keysOf(rng); !slices.Equal(got, sortedWords()[10:21]) {
			t.Fatalf("instance %d: range w10..w20: %v", i, got)
		}
		rrng, err := counts.Range(ctx, "w10", "w20", Reverse(), PageSize(3))
		if err != nil {
			t.Fatal(err)
		}
		if got, w := keysOf(rrng), slices.Clone(sortedWords()[10:21]); !slices.Equal(got, func() []string { slices.Reverse(w); return w }()) {
			t.Fatalf("instance %d: reverse range w10..w20: %v", i, got)
		}
		pre, err := counts.Prefix(ctx, []byte("w1"), PageSize(3))
		if err != nil {
			t.Fatal(err)
		}
		if got := keysOf(pre); !slices.Equal(got, sortedWords()[10:20]) {
			t.Fatalf("instance %d: prefix w1: %v", i, got)
		}
		mg, err := counts.MultiGet(ctx, append([]string{"nope"}, words...)...)
		if err != nil {
			t.Fatal(err)
		}
		if got := keysOf(mg); !slices.Equal(got, words) {
			t.Fatalf("instance %d: multi-get: %v", i, got)
		}
		for _, kv := range mg {
			if kv.Value != want[kv.Key] {
				t.Fatalf("instance %d: multi-get %q = %d, want %d", i, kv.Key, kv.Value, want[kv.Key])
			}
		}
		r, ok, err := counts.Lookup(ctx, "nope")
		km, kerr := insts[i].app.KeyMetadata("counts", "nope")
		if ok || err != nil || kerr != nil || r.Served.By != km.Active || (r.Served.Hops == 0) != (km.Active == insts[i].addr) {
			t.Fatalf("instance %d: get of an absent key: found %v, %v, served %+v; owner %+v", i, ok, err, r.Served, km)
		}
		n, err := counts.Count(ctx)
		if err != nil || n != int64(len(words)) {
			t.Fatalf("instance %d: count = %d, %v; want %d", i, n, err, len(words))
		}

		// Windows: occurrence j of a word is at t0 + j*20min, in the hour window t0 + (j/3)h.
		wc := StoreOf[string, int64](c, "wcounts")
		for wi, w := range words {
			got, err := wc.Windows(ctx, w, t0.Add(-time.Hour), t0.Add(10*time.Hour))
			if err != nil {
				t.Fatalf("instance %d: windows of %q: %v", i, w, err)
			}
			if want := expectedWindows(occurrences(wi)); !equalWindows(got, want) {
				t.Fatalf("instance %d: windows of %q: %v, want %v", i, w, got, want)
			}
		}
		allw, err := wc.WindowsAll(ctx, t0, t0.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		var wantAll []Window[string, int64]
		for _, w := range sortedWords() {
			wi := slices.Index(words, w)
			for _, win := range expectedWindows(occurrences(wi)) {
				if !win.Start.After(t0.Add(time.Hour)) {
					win.Key = w
					wantAll = append(wantAll, win)
				}
			}
		}
		if !equalWindows(allw, wantAll) {
			t.Fatalf("instance %d: all windows from t0 to t0+1h: %d windows %v, want %d", i, len(allw), allw, len(wantAll))
		}
		// Sessions: occurrences 20 minutes apart with a gap of 5 are sessions of one.
		sc := StoreOf[string, int64](c, "scounts")
		for _, wi := range []int{0, 6, 13} {
			got, err := sc.Sessions(ctx, words[wi])
			if err != nil {
				t.Fatal(err)
			}
			var want []Window[string, int64]
			for j := range occurrences(wi) {
				ts := t0.Add(time.Duration(j) * occurrenceStep)
				want = append(want, Window[string, int64]{Key: words[wi], Start: ts, End: ts, Value: 1})
			}
			if !equalWindows(got, want) {
				t.Fatalf("instance %d: sessions of %q: %v, want %v", i, words[wi], got, want)
			}
		}

		// An int64 key, through a repartition topic: JSON numbers, in numeric order.
		nums := StoreOf[int64, int64](c, "numbers")
		hops := 0
		for _, w := range words {
			r, ok, err := nums.Lookup(ctx, wordNumber(w))
			km, kerr := insts[i].app.KeyMetadata("numbers", wordNumber(w))
			if err != nil || !ok || kerr != nil || r.Value != want[w] || r.Partition != km.Partition || r.Served.By != km.Active {
				t.Fatalf("instance %d: numbers %d: %+v %v %v; owner %+v %v", i, wordNumber(w), r, ok, err, km, kerr)
			}
			hops += r.Served.Hops
		}
		t.Logf("instance %d: numbers: %d of %d forwarded", i, hops, len(words))
		all, err := nums.All(ctx, PageSize(8))
		if err != nil || len(all) != len(words) {
			t.Fatalf("instance %d: all numbers: %v %v", i, all, err)
		}
		for j, kv := range all {
			if kv.Key != int64(j) || kv.Value != int64(occurrences(j)) {
				t.Fatalf("instance %d: all numbers: entry %d is %+v", i, j, kv)
			}
		}
		nrng, err := nums.Range(ctx, 10, 20, Reverse())
		if err != nil || len(nrng) != 11 || nrng[0].Key != 20 || nrng[10].Key != 10 {
			t.Fatalf("instance %d: numbers 20 down to 10: %v %v", i, nrng, err)
		}
	}
	checkRawAndErrors(t, insts[0])
	checkPeerDown(t, insts, clients)
}

// checkPeerDown stops the query server of an instance that owns partitions of "counts"
// (its app runs on), then puts one that never answers in its place: a query that needs it
// fails, retryably, rather than returning partial results; one that does not still
// succeeds at another owner.
func checkPeerDown(t *testing.T, insts []*instance, clients []*Client) {
	ctx := kafkatest.Context(t, 60*time.Second)
	byAddr := map[string]int{}
	for i, inst := range insts {
		byAddr[inst.addr] = i
	}
	keyOf := map[string]string{} // owner -> a key it owns
	var owners []string
	for _, w := range words {
		km, err := insts[0].app.KeyMetadata("counts", w)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := keyOf[km.Active]; !ok {
			owners = append(owners, km.Active)
			keyOf[km.Active] = w
		}
	}
	if len(owners) < 2 {
		t.Fatalf("the partitions of counts are all at %v", owners)
	}
	asker, down := byAddr[owners[0]], insts[byAddr[owners[1]]]
	local, remote := keyOf[owners[0]], keyOf[owners[1]]
	insts, clients = []*instance{insts[asker]}, []*Client{clients[asker]}
	down.stopServer()
	counts := StoreOf[string, int64](clients[0], "counts")
	if v, ok, err := counts.Get(ctx, local); err != nil || !ok || v != wantCounts()[local] {
		t.Fatalf("get %q at its owner with a peer down: %d %v %v", local, v, ok, err)
	}
	wantErr := func(what string, err error, status int, reason string) {
		t.Helper()
		var e *Error
		if !errors.As(err, &e) || e.Status != status || e.Reason != reason || !e.Retryable {
			t.Fatalf("%s with a peer down: %v, want a retryable %d %s", what, err, status, reason)
		}
	}
	_, _, err := counts.Get(ctx, remote)
	wantErr("get "+remote, err, http.StatusServiceUnavailable, ReasonPeerUnavailable)
	_, err = counts.All(ctx)
	wantErr("all", err, http.StatusServiceUnavailable, ReasonPeerUnavailable)
	_, err = counts.Count(ctx)
	wantErr("count", err, http.StatusServiceUnavailable, ReasonPeerUnavailable)
	_, err = counts.MultiGet(ctx, local, remote)
	wantErr("multi-get", err, http.StatusServiceUnavailable, ReasonPeerUnavailable)

	// A peer that accepts requests and never answers: the request's timeout ends it.
	ln, err := net.Listen("tcp", down.addr)
	if err != nil {
		t.Fatalf("listening again on %s: %v", down.addr, err)
	}
	release := make(chan struct{})
	hang := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})}
	go func() { _ = hang.Serve(ln) }()
	defer func() {
		close(release)
		_ = hang.Close()
	}()
	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	defer hc.CloseIdleConnections()
	start := time.Now()
	status, h, m := get(t, hc, insts[0].base+"/v1/stores/counts/keys?timeout=300ms&key="+remote, nil)
	if status != http.StatusGatewayTimeout || m["reason"] != ReasonTimeout || m["retryable"] != true || h.Get("Retry-After") == "" {
		t.Fatalf("get %q from a peer that never answers: %d %v", remote, status, m)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the 300ms timeout took %s", d)
	}
	status, _, m = get(t, hc, insts[0].base+"/v1/stores/counts/all?timeout=200ms", nil)
	if status != http.StatusGatewayTimeout || m["reason"] != ReasonTimeout {
		t.Fatalf("all with a peer that never answers: %d %v", status, m)
	}
}

// expectedWindows is the hourly windows of a word with n occurrences, with a key left
// empty.
func expectedWindows(n int) []Window[string, int64] {
	var out []Window[string, int64]
	for j := 0; j < n; j += 3 {
		start := t0.Add(time.Duration(j/3) * time.Hour)
		out = append(out, Window[string, int64]{Start: start, End: start.Add(time.Hour), Value: int64(min(3, n-j))})
	}
	return out
}

// equalWindows compares keys (where want has one), bounds and values.
func equalWindows(got, want []Window[string, int64]) bool {
	return slices.EqualFunc(got, want, func(g, w Window[string, int64]) bool {
		return (w.Key == "" || g.Key == w.Key) && g.Start.Equal(w.Start) && g.End.Equal(w.End) && g.Value == w.Value
	})
}

// get sends a GET and decodes a JSON answer.
func get(t *testing.T, hc *http.Client, u string, header http.Header) (int, http.Header, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("GET %s: %d %q is not a JSON object: %v", u, resp.StatusCode, b, err)
	}
	return resp.StatusCode, resp.Header, m
}

// checkRawAndErrors checks format=raw and the error answers.
func checkRawAndErrors(t *testing.T, inst *instance) {
	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	defer hc.CloseIdleConnections()
	// w03 occurs 4 times; format=raw gives the serialized key and value (8 bytes, big endian).
	for _, k := range []string{"w03", `"w03"`} {
		status, _, m := get(t, hc, inst.base+"/v1/stores/counts/keys?format=raw&key="+k, nil)
		wantValue := base64.StdEncoding.EncodeToString([]byte{0, 0, 0, 0, 0, 0, 0, 4})
		if status != http.StatusOK || m["key"] != base64.StdEncoding.EncodeToString([]byte("w03")) || m["value"] != wantValue {
			t.Fatalf("raw get %s: %d %v", k, status, m)
		}
	}
	// Pages of one window and of two sessions: w06 occurs 7 times, in 3 hourly windows.
	for _, c := range []struct {
		path        string
		limit, want int
	}{{"/v1/stores/wcounts/windows?key=w06", 1, 3}, {"/v1/stores/scounts/sessions?key=w06", 2, 7}, {"/v1/stores/wcounts/windows/all?to=" + t0.Format(time.RFC3339), 7, 60}} {
		var starts []int64
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > c.want {
				t.Fatalf("%s: more than %d pages", c.path, pages)
			}
			u := fmt.Sprintf("%s%s&limit=%d", inst.base, c.path, c.limit)
			if cursor != "" {
				u += "&cursor=" + cursor
			}
			status, _, m := get(t, hc, u, nil)
			entries, _ := m["entries"].([]any)
			if status != http.StatusOK || len(entries) > c.limit {
				t.Fatalf("GET %s: %d %v", u, status, m)
			}
			for _, e := range entries {
				starts = append(starts, int64(e.(map[string]any)["start"].(float64)))
			}
			cursor, _ = m["cursor"].(string)
			if cursor == "" {
				break
			}
		}
		if len(starts) != c.want || (!strings.Contains(c.path, "/all") && !slices.IsSorted(starts)) {
			t.Fatalf("%s in pages of %d: starts %v, want %d", c.path, c.limit, starts, c.want)
		}
	}
	if status, _, m := get(t, hc, inst.base+"/v1/stores/numbers/keys?key=3", nil); status != http.StatusOK || m["key"] != float64(3) || m["value"] != float64(4) {
		t.Fatalf("get number 3: %d %v", status, m)
	}
	status, _, m := get(t, hc, inst.base+"/v1/stores/counts/keys?key=w03", nil)
	if status != http.StatusOK || m["key"] != "w03" || m["value"] != float64(4) {
		t.Fatalf("get w03: %d %v", status, m)
	}
	for _, c := range []struct {
		path   string
		status int
		reason string
	}{
		{"/v1/stores/nope/keys?key=a", 404, ReasonUnknownStore},
		{"/v1/stores/nope/all", 404, ReasonUnknownStore},
		{"/v1/stores/counts/keys?key=absent", 404, ReasonNotFound},
		{"/v1/stores/counts/keys", 400, ReasonBadRequest},
		{"/v1/stores/counts/keys?key_b64=%25%25", 400, ReasonBadRequest},
		{"/v1/stores/numbers/keys?key=abc", 400, ReasonBadRequest},
		{"/v1/stores/numbers/keys?key=%225%22", 400, ReasonBadRequest},
		{"/v1/stores/numbers/keys?key=1.5", 400, ReasonBadRequest},
		{"/v1/stores/numbers/range?from=x", 400, ReasonBadRequest},
		{"/v1/stores/numbers/keys:batch", 405, ReasonBadRequest},
		{"/v1/stores/counts/all?limit=-1", 400, ReasonBadRequest},
		{"/v1/stores/counts/all?cursor=%25", 400, ReasonBadRequest},
		{"/v1/stores/counts/windows?key=w01", 400, ReasonBadRequest},
		{"/v1/stores/wcounts/windows?key=w01&from=yesterday", 400, ReasonBadRequest},
		{"/v1/stores/counts/keys?key=w01&timeout=soon", 400, ReasonBadRequest},
		{"/v1/nothing", 404, ReasonNotFound},
	} {
		status, h, m := get(t, hc, inst.base+c.path, nil)
		if status != c.status || m["reason"] != c.reason || m["retryable"] != false || m["error"] == "" {
			t.Fatalf("GET %s: %d %v (Retry-After %q), want %d %s", c.path, status, m, h.Get("Retry-After"), c.status, c.reason)
		}
	}
}

// selfSigned returns a certificate for 127.0.0.1 and a pool that trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kstream test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}, pool
}

// bearer is an Auth hook that wants "Authorization: Bearer <token>".
func bearer(token string) func(*http.Request) error {
	return func(r *http.Request) error {
		if r.Header.Get("Authorization") != "Bearer "+token {
			return errors.New("a valid bearer token is required")
		}
		return nil
	}
}

func TestAuthAndTLS(t *testing.T) {
	in := kafkatest.CreateTopic(t, "words", 12, nil)
	produceWords(t, in)
	cert, pool := selfSigned(t)
	insts := startCluster(t, in, 3, clusterOptions{
		auth:      bearer("s3cret"),
		serverTLS: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		peerTLS:   &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		maxBytes:  1500,
	})
	newHC := func() *http.Client {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		hc := &http.Client{Transport: tr}
		t.Cleanup(hc.CloseIdleConnections)
		return hc
	}
	var clients []*Client
	for _, inst := range insts {
		if !strings.HasPrefix(inst.base, "https://") {
			t.Fatalf("base %s", inst.base)
		}
		clients = append(clients, newClient(t, inst, WithHTTPClient(newHC()), WithBearerToken("s3cret")))
	}
	waitReady(t, insts, clients)
	// Every key at every instance, forwarded over TLS with the token.
	checkGets(t, insts, clients)

	ctx := kafkatest.Context(t, 30*time.Second)
	for i, inst := range insts {
		for _, opts := range [][]ClientOption{
			{WithHTTPClient(newHC())},
			{WithHTTPClient(newHC()), WithBearerToken("wrong")},
		} {
			_, _, err := StoreOf[string, int64](newClient(t, inst, opts...), "counts").Get(ctx, "w01")
			var e *Error
			if !errors.As(err, &e) || e.Status != http.StatusUnauthorized || e.Reason != ReasonUnauthenticated || e.Retryable {
				t.Fatalf("instance %d: unauthenticated get: %v", i, err)
			}
		}
		// Plain HTTP to a TLS server fails.
		if _, _, err := StoreOf[string, int64](newClient(t, &instance{base: "http://" + inst.addr}, WithBearerToken("s3cret")), "counts").Get(ctx, "w01"); err == nil {
			t.Fatalf("instance %d: plain HTTP to a TLS server succeeded", i)
		}
		// Without the server's CA, the certificate is refused.
		if _, _, err := StoreOf[string, int64](newClient(t, inst, WithBearerToken("s3cret")), "counts").Get(ctx, "w01"); err == nil {
			t.Fatalf("instance %d: TLS without the CA succeeded", i)
		}
		all, err := StoreOf[string, int64](clients[i], "counts").All(ctx, PageSize(9))
		if err != nil || !slices.Equal(keysOf(all), sortedWords()) {
			t.Fatalf("instance %d: all over TLS: %v, %v", i, keysOf(all), err)
		}
	}

	// MaxResponseBytes is 1500 here: a page without a limit stops early, with a cursor,
	// and the client follows the cursors to every key.
	hc := newHC()
	auth := http.Header{"Authorization": {"Bearer s3cret"}}
	for _, path := range []string{"/v1/stores/counts/all", "/v1/stores/wcounts/windows/all"} {
		req, _ := http.NewRequest(http.MethodGet, insts[0].base+path, nil)
		req.Header = auth
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var p Page
		if err := json.Unmarshal(b, &p); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %q: %v", path, resp.StatusCode, b, err)
		}
		if len(b) > 1500 || p.Cursor == "" || len(p.Entries) < 2 {
			t.Fatalf("GET %s with a 1500-byte limit: %d bytes, %d entries, cursor %q", path, len(b), len(p.Entries), p.Cursor)
		}
		t.Logf("%s: a page of %d entries in %d bytes", path, len(p.Entries), len(b))
	}
	all, err := StoreOf[string, int64](clients[1], "counts").All(ctx)
	if err != nil || !slices.Equal(keysOf(all), sortedWords()) {
		t.Fatalf("all in pages of at most 1500 bytes: %v, %v", keysOf(all), err)
	}
	allw, err := StoreOf[string, int64](clients[2], "wcounts").WindowsAll(ctx, t0, t0.Add(24*time.Hour))
	wantN := 0
	for i := range words {
		wantN += len(expectedWindows(occurrences(i)))
	}
	if n := len(allw); err != nil || n != wantN {
		t.Fatalf("all windows in pages of at most 1500 bytes: %d windows, %v; want %d", n, err, wantN)
	}
}

// TestStaleReads runs two instances with a standby of every task: with stale reads
// allowed, each instance answers every key itself, from its active or its standby
// partitions.
func TestStaleReads(t *testing.T) {
	in := kafkatest.CreateTopic(t, "words", 12, nil)
	produceWords(t, in)
	insts := startCluster(t, in, 2, clusterOptions{standbys: 1})
	var clients []*Client
	for _, inst := range insts {
		clients = append(clients, newClient(t, inst))
	}
	waitReady(t, insts, clients)
	want := wantCounts()
	total := 0
	for i, c := range clients {
		counts := StoreOf[string, int64](c, "counts", StaleReads(0))
		standby := 0
		kafkatest.Eventually(t, 60*time.Second, "every key answered locally", func() bool {
			standby = 0
			for _, w := range words {
				r, ok, err := counts.Lookup(context.Background(), w)
				if err != nil || !ok || r.Value != want[w] || r.Served.Hops != 0 || r.Served.By != insts[i].addr {
					return false
				}
				// A standby read exactly when the key's active partition is elsewhere.
				if km, err := insts[i].app.KeyMetadata("counts", w); err != nil || r.Standby != (km.Active != insts[i].addr) {
					return false
				}
				if r.Standby {
					standby++
				}
			}
			return true
		})
		total += standby
		t.Logf("instance %d: %d of %d keys read from standbys", i, standby, len(words))
	}
	if total != len(words) {
		t.Fatalf("%d keys read from standbys over both instances, want %d (each key is active at one, standby at the other)", total, len(words))
	}
}

// TestOpenAPI checks that the embedded description parses and lists every route the
// server registers, and that the server serves it.
func TestOpenAPI(t *testing.T) {
	var doc struct {
		OpenAPI string                    `json:"openapi"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi version %q", doc.OpenAPI)
	}
	s := NewServer(Config{})
	listed := 0
	for _, r := range s.routes {
		method, path, _ := strings.Cut(r, " ")
		if _, ok := doc.Paths[path][strings.ToLower(method)]; !ok {
			t.Errorf("route %s is not in openapi.json", r)
		}
	}
	for path, ops := range doc.Paths {
		for method := range ops {
			if method == "parameters" {
				continue
			}
			listed++
			if !slices.Contains(s.routes, strings.ToUpper(method)+" "+path) {
				t.Errorf("openapi.json lists %s %s, which the server does not serve", method, path)
			}
		}
	}
	if listed != len(s.routes) {
		t.Errorf("openapi.json lists %d operations, the server %d", listed, len(s.routes))
	}
	rec := &recorder{header: http.Header{}}
	s.ServeHTTP(rec, mustRequest(t, "GET", "/v1/openapi.json"))
	if rec.status != 0 && rec.status != http.StatusOK || !bytes.Equal(rec.body.Bytes(), openAPI) {
		t.Fatalf("GET /v1/openapi.json: %d, %d bytes", rec.status, rec.body.Len())
	}
}

// TestMerge checks the merge of pages, some of which have more.
func TestMerge(t *testing.T) {
	s := NewServer(Config{})
	e := func(k string) Entry {
		return Entry{Key: json.RawMessage(`"` + k + `"`), Value: json.RawMessage("1"), RawKey: []byte(k)}
	}
	pages := []Page{
		{Entries: []Entry{e("a"), e("d")}, Cursor: "x"}, // more after d
		{Entries: []Entry{e("b"), e("c"), e("e"), e("f")}},
		{Entries: []Entry{}},
	}
	got := s.merge(pages, 0, false, comparePos)
	var keys []string
	for _, en := range got.Entries {
		keys = append(keys, string(en.Key))
		if en.RawKey != nil {
			t.Fatal("raw key left in a merged page")
		}
	}
	if strings.Join(keys, "") != `"a""b""c""d"` || got.Cursor != base64.RawURLEncoding.EncodeToString([]byte("d")) {
		t.Fatalf("merge: %v cursor %q", keys, got.Cursor)
	}
	// With a limit: 3 entries and a cursor; without more anywhere, no cursor.
	got = s.merge(pages[1:], 3, false, comparePos)
	if len(got.Entries) != 3 || got.Cursor != base64.RawURLEncoding.EncodeToString([]byte("e")) {
		t.Fatalf("merge with a limit: %d entries, cursor %q", len(got.Entries), got.Cursor)
	}
	got = s.merge(pages[1:], 4, false, comparePos)
	if len(got.Entries) != 4 || got.Cursor != "" {
		t.Fatalf("merge of everything: %d entries, cursor %q", len(got.Entries), got.Cursor)
	}
}

// The cursor after the empty key is not the empty string (which is no cursor: a page of a
// scan that ended at key "" seemed the last, and a merge took the instance that sent it for
// done); it decodes to the empty key, and a merge keeps it.
func TestCursorAfterTheEmptyKey(t *testing.T) {
	for _, k := range [][]byte{{}, nil, []byte("a"), {0}} {
		c := encodeCursor(entryPos{key: k}, false)
		if c == "" {
			t.Fatalf("cursor after key %q is empty", k)
		}
		p, err := decodeCursor(c, false)
		if err != nil || p == nil || p.key == nil || !bytes.Equal(p.key, k) {
			t.Fatalf("cursor %q after key %q decodes to %+v, %v", c, k, p, err)
		}
	}
	s := NewServer(Config{})
	e := func(k string) Entry {
		return Entry{Key: json.RawMessage(strconv.Quote(k)), Value: json.RawMessage("1"), RawKey: []byte(k)}
	}
	// An instance that has more after "" bounds the merge there.
	got := s.merge([]Page{{Entries: []Entry{e("")}, Cursor: emptyKeyCursor}, {Entries: []Entry{e("b")}}}, 0, false, comparePos)
	if len(got.Entries) != 1 || string(got.Entries[0].Key) != `""` || got.Cursor != emptyKeyCursor {
		t.Fatalf("merge: %d entries, cursor %q; want the empty key and its cursor", len(got.Entries), got.Cursor)
	}
}

func mustRequest(t *testing.T, method, path string) *http.Request {
	r, err := http.NewRequest(method, "http://x"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// recorder is a minimal http.ResponseWriter.
type recorder struct {
	mu     sync.Mutex
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(s int)   { r.status = s }
func (r *recorder) Write(b []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.body.Write(b)
}

// TestNotRunning checks the answers of an instance that has not started: retryable 503s
// for reads, the store list, and 404 for an unknown store.
func TestNotRunning(t *testing.T) {
	app, err := kstream.New(topology("in"), kstream.Config{ApplicationID: "not-running", Brokers: kafkatest.Brokers(t), StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(Config{App: app})
	do := func(path string) (int, http.Header, map[string]any) {
		rec := &recorder{header: http.Header{}}
		s.ServeHTTP(rec, mustRequest(t, http.MethodGet, path))
		var m map[string]any
		if err := json.Unmarshal(rec.body.Bytes(), &m); err != nil {
			t.Fatalf("GET %s: %q: %v", path, rec.body.Bytes(), err)
		}
		return rec.status, rec.header, m
	}
	for _, path := range []string{"/v1/stores/counts/keys?key=a", "/v1/stores/counts/all", "/v1/stores/counts/count", "/v1/stores/wcounts/windows?key=a", "/v1/stores/scounts/sessions?key=a"} {
		status, h, m := do(path)
		if status != http.StatusServiceUnavailable || m["reason"] != ReasonNotRunning || m["retryable"] != true || h.Get("Retry-After") != "1" {
			t.Fatalf("GET %s: %d %v %v", path, status, m, h)
		}
	}
	status, _, m := do("/v1/stores")
	want := []any{
		map[string]any{"name": "counts", "kind": "key-value", "partitions": float64(0)},
		map[string]any{"name": "numbers", "kind": "key-value", "partitions": float64(0)},
		map[string]any{"name": "scounts", "kind": "session", "partitions": float64(0)},
		map[string]any{"name": "wcounts", "kind": "window", "partitions": float64(0)},
	}
	if status != http.StatusOK || fmt.Sprint(m["stores"]) != fmt.Sprint(want) {
		t.Fatalf("GET /v1/stores: %d %v", status, m)
	}
	if status, _, m := do("/v1/stores/nope/count"); status != http.StatusNotFound || m["reason"] != ReasonUnknownStore {
		t.Fatalf("unknown store: %d %v", status, m)
	}
	if status, _, m := do("/v1/metadata"); status != http.StatusOK || fmt.Sprint(m["instances"]) != "[]" {
		t.Fatalf("metadata: %d %v", status, m)
	}
}

// TestRebalanceUnderLoad queries every key continuously at two instances while a third
// leaves the group and a fourth joins (restoring its partitions from the changelogs): every
// answer is the right count or a retryable error, never a wrong value.
func TestRebalanceUnderLoad(t *testing.T) {
	in := kafkatest.CreateTopic(t, "words", 12, nil)
	produceWords(t, in)
	appID := kafkatest.Name(t, "app")
	insts := []*instance{startInstance(t, appID, in, clusterOptions{}), startInstance(t, appID, in, clusterOptions{}), startInstance(t, appID, in, clusterOptions{})}
	var clients []*Client
	for _, inst := range insts {
		clients = append(clients, newClient(t, inst))
	}
	waitReady(t, insts, clients)

	want := wantCounts()
	ctx, cancel := context.WithCancel(context.Background())
	type stats struct {
		ok, retryable int
		reasons       map[string]int
		longest       time.Duration // the longest time a key was unavailable
	}
	results := make([]stats, 2)
	var wg sync.WaitGroup
	for g := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := &results[g]
			st.reasons = map[string]int{}
			counts := StoreOf[string, int64](clients[g], "counts")
			failingSince := map[string]time.Time{}
			for i := 0; ctx.Err() == nil; i++ {
				w := words[(i*7+g)%len(words)]
				v, ok, err := counts.Get(ctx, w)
				if ctx.Err() != nil {
					return
				}
				var e *Error
				switch {
				case err == nil && ok && v == want[w]:
					st.ok++
					if since, ok := failingSince[w]; ok {
						st.longest = max(st.longest, time.Since(since))
						delete(failingSince, w)
					}
				case errors.As(err, &e) && e.Retryable:
					st.retryable++
					st.reasons[e.Reason]++
					if _, ok := failingSince[w]; !ok {
						failingSince[w] = time.Now()
					}
				default:
					t.Errorf("instance %d: get %q during the rebalance: %d, found %v, %v; want %d", g, w, v, ok, err, want[w])
					return
				}
			}
		}()
	}
	insts[2].stop()
	insts[2] = startInstance(t, appID, in, clusterOptions{})
	clients[2] = newClient(t, insts[2])
	waitReady(t, insts, clients)
	cancel()
	wg.Wait()
	for g, st := range results {
		if st.ok == 0 {
			t.Fatalf("instance %d: no right answer during the rebalance", g)
		}
		t.Logf("instance %d: %d right answers, %d retryable errors %v, longest unavailability of a key %s", g, st.ok, st.retryable, st.reasons, st.longest)
	}
	checkGets(t, insts, clients)
}
