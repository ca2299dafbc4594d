package query_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/query"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() { kafkatest.RegisterChild("query-node", runQueryNode) }

// runQueryNode is one instance of a word count in its own process, with its query server
// on ADDR: configured by APP_ID, STATE_DIR, ADDR and IN. It runs until killed.
func runQueryNode() error {
	ln, err := net.Listen("tcp", os.Getenv("ADDR"))
	if err != nil {
		return err
	}
	b := kstream.NewBuilder()
	kstream.Count(kstream.Stream(b, os.Getenv("IN"), serde.String(), serde.String()).GroupByKey(), "counts")
	app, err := kstream.New(b, kstream.Config{
		ApplicationID:     os.Getenv("APP_ID"),
		Brokers:           strings.Split(os.Getenv(kafkatest.EnvBrokers), ","),
		StateDir:          os.Getenv("STATE_DIR"),
		ApplicationServer: ln.Addr().String(),
		NumStandbys:       1,
		CommitInterval:    100 * time.Millisecond,
		SessionTimeout:    6 * time.Second,
		HeartbeatInterval: 200 * time.Millisecond,
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	if err != nil {
		return err
	}
	ctx := context.Background()
	go func() { _ = query.NewServer(query.Config{App: app, Timeout: 5 * time.Second}).Serve(ctx, ln, nil) }()
	return app.Run(ctx)
}

// freeAddr returns a local address with a port free now.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Three instances in separate processes (state directories and ports of their own) over
// 12 partitions: every key asked at every instance through the HTTP client returns its
// count, and a full scan returns every key once, in order. Then, under a concurrent query
// load, one instance is SIGKILLed and a new one started: the load sees only right values
// or retryable errors (standby reads allowed within a bound), and afterwards every key
// answers again at every instance. The test reports the longest time a key went
// unanswered.
func TestThreeProcessesAndAKill(t *testing.T) {
	t.Parallel()
	const parts, keys = 12, 1200
	in := kafkatest.CreateTopic(t, "words", parts, nil)
	appID := kafkatest.Name(t, "app")
	want := map[string]int64{}
	var recs []*kgo.Record
	for i := range 6 * keys {
		k := fmt.Sprintf("k%04d", i%keys)
		if i%keys < (i/keys+1)*keys/6 { // key j gets j*6/keys+1 records, 1 to 6
			want[k]++
			recs = append(recs, &kgo.Record{Topic: in, Key: []byte(k), Value: []byte("x")})
		}
	}
	kafkatest.Produce(t, kafkatest.Client(t), recs...)
	sorted := slices.Sorted(func(yield func(string) bool) {
		for k := range want {
			if !yield(k) {
				return
			}
		}
	})

	type node struct {
		child *kafkatest.Child
		addr  string
	}
	startNode := func() node {
		addr := freeAddr(t)
		ch := kafkatest.StartChild(t, "query-node", "APP_ID="+appID, "STATE_DIR="+t.TempDir(), "ADDR="+addr, "IN="+in)
		return node{ch, addr}
	}
	nodes := []node{startNode(), startNode(), startNode()}
	client := func(addr string) *query.Store[string, int64] {
		return query.StoreOf[string, int64](query.NewClient("http://"+addr), "counts")
	}
	ctx := kafkatest.Context(t, 5*time.Minute)
	// everyKeyAt reports whether the instance at addr answers every key right.
	everyKeyAt := func(addr string) error {
		got, err := client(addr).MultiGet(ctx, sorted...)
		if err != nil {
			return err
		}
		if len(got) != len(want) {
			return fmt.Errorf("%d of %d keys", len(got), len(want))
		}
		for _, kv := range got {
			if kv.Value != want[kv.Key] {
				return fmt.Errorf("%s = %d, want %d", kv.Key, kv.Value, want[kv.Key])
			}
		}
		return nil
	}
	var last error
	kafkatest.Eventually(t, 120*time.Second, "every key right at every instance", func() bool {
		for _, n := range nodes {
			if last = everyKeyAt(n.addr); last != nil {
				return false
			}
		}
		return true
	})
	// Standby reads too: a standby that started before its changelog was written learns
	// of the records it has not fetched within its end-offset refresh (half a second).
	everyKeyStaleAt := func(addr string) error {
		st := query.StoreOf[string, int64](query.NewClient("http://"+addr), "counts", query.StaleReads(0))
		for _, k := range sorted {
			if v, ok, err := st.Get(ctx, k); err != nil || !ok || v != want[k] {
				return fmt.Errorf("%s = %d, %v, %v", k, v, ok, err)
			}
		}
		return nil
	}
	kafkatest.Eventually(t, 60*time.Second, "every key right at every instance with standby reads", func() bool {
		for _, n := range nodes {
			if last = everyKeyStaleAt(n.addr); last != nil {
				return false
			}
		}
		return true
	})
	for _, n := range nodes {
		st := client(n.addr)
		for _, k := range []string{sorted[0], sorted[keys/2], sorted[keys-1]} {
			v, ok, err := st.Get(ctx, k)
			if err != nil || !ok || v != want[k] {
				t.Errorf("%s: Get(%s) = %d, %v, %v", n.addr, k, v, ok, err)
			}
		}
		all, err := st.All(ctx, query.PageSize(250))
		if err != nil {
			t.Fatalf("%s: all: %v", n.addr, err)
		}
		ks := make([]string, len(all))
		for i, kv := range all {
			ks[i] = kv.Key
		}
		if !slices.Equal(ks, sorted) {
			t.Errorf("%s: all returned %d keys, want %d in order, once each", n.addr, len(ks), len(sorted))
		}
		rng, err := st.Range(ctx, "k0100", "k0199")
		if err != nil || len(rng) != 100 || rng[0].Key != "k0100" || rng[99].Key != "k0199" {
			t.Errorf("%s: range k0100..k0199: %d keys, %v", n.addr, len(rng), err)
		}
	}

	// The query load: random keys at random live instances, standby reads allowed with a
	// bound of 0 records behind (the input is complete, so a value must be the final one).
	var live atomic.Pointer[[]string]
	setLive := func(ns []node) {
		addrs := make([]string, len(ns))
		for i, n := range ns {
			addrs[i] = n.addr
		}
		live.Store(&addrs)
	}
	setLive(nodes)
	var (
		right, unavailable, wrong atomic.Int64
		wrongMsg                  atomic.Value
		mu                        sync.Mutex
		failingSince              = [2]map[string]time.Time{{}, {}} // per mode: active reads, standby reads allowed
		longest                   [2]time.Duration
		longestKey                [2]string
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(g), 1))
			stores := map[string]*query.Store[string, int64]{}
			mode := g % 2 // 0: active copies only; 1: standby reads allowed, 0 records behind
			for {
				select {
				case <-stop:
					return
				default:
				}
				addrs := *live.Load()
				addr := addrs[rnd.IntN(len(addrs))]
				if stores[addr] == nil {
					var opts []query.StoreOption
					if mode == 1 {
						opts = append(opts, query.StaleReads(0))
					}
					stores[addr] = query.StoreOf[string, int64](query.NewClient("http://"+addr), "counts", opts...)
				}
				k := sorted[rnd.IntN(len(sorted))]
				rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				res, ok, err := stores[addr].Lookup(rctx, k)
				v := res.Value
				cancel()
				now := time.Now()
				var qe *query.Error
				switch {
				case err == nil && ok && v == want[k]:
					right.Add(1)
					mu.Lock()
					if since, failing := failingSince[mode][k]; failing {
						if d := now.Sub(since); d > longest[mode] {
							longest[mode], longestKey[mode] = d, k
						}
						delete(failingSince[mode], k)
					}
					mu.Unlock()
				case err != nil && !slices.Contains(*live.Load(), addr):
					// The request went to the instance being killed (it was live when picked).
				case errors.As(err, &qe) && qe.Retryable:
					unavailable.Add(1)
					mu.Lock()
					if _, failing := failingSince[mode][k]; !failing {
						failingSince[mode][k] = now
					}
					mu.Unlock()
				default:
					wrong.Add(1)
					wrongMsg.Store(fmt.Sprintf("%s at %s: %d, %v, %v (served by %s, %d hops, standby %v, position %d, partition %d)", k, addr, v, ok, err, res.Served.By, res.Served.Hops, res.Standby, res.Position, res.Partition))
				}
			}
		})
	}
	// And full scans with standby reads allowed, which fall back to standbys for the
	// partitions of an instance that cannot answer: every successful scan must be exact.
	var scansOK, scansFailed, scansWrong atomic.Int64
	var scanWrongMsg atomic.Value
	var scanGap time.Duration // the longest time between two successful scans
	wg.Go(func() {
		st := query.StoreOf[string, int64](query.NewClient("http://"+nodes[0].addr), "counts", query.StaleReads(0))
		lastOK := time.Now()
		for {
			select {
			case <-stop:
				return
			default:
			}
			all, err := st.All(ctx, query.PageSize(500))
			var qe *query.Error
			switch {
			case err == nil:
				bad := len(all) != len(want)
				for _, kv := range all {
					bad = bad || kv.Value != want[kv.Key]
				}
				if bad {
					scansWrong.Add(1)
					scanWrongMsg.Store(fmt.Sprintf("%d entries", len(all)))
					continue
				}
				scansOK.Add(1)
				scanGap = max(scanGap, time.Since(lastOK))
				lastOK = time.Now()
			case errors.As(err, &qe) && qe.Retryable:
				scansFailed.Add(1)
			default:
				scansWrong.Add(1)
				scanWrongMsg.Store(err.Error())
			}
		}
	})
	kafkatest.Eventually(t, 30*time.Second, "load running", func() bool { return right.Load() >= 500 && scansOK.Load() >= 2 })
	setLive(nodes[:2])
	killedAt := time.Now()
	nodes[2].child.Kill(t)
	nodes = append(nodes[:2], startNode())
	kafkatest.Eventually(t, 120*time.Second, "every key right at every instance after the kill", func() bool {
		for _, n := range nodes {
			if last = everyKeyAt(n.addr); last != nil {
				return false
			}
		}
		return true
	})
	recoveredAt := time.Now()
	recovered := recoveredAt.Sub(killedAt)
	setLive(nodes)
	before := right.Load()
	kafkatest.Eventually(t, 30*time.Second, "load on the new instance too", func() bool { return right.Load() >= before+500 })
	close(stop)
	wg.Wait()
	mu.Lock()
	// A key the load did not ask again after its failures answered by recoveredAt, when
	// every key was checked at every instance.
	for mode := range failingSince {
		for k, since := range failingSince[mode] {
			if d := recoveredAt.Sub(since); d > longest[mode] {
				longest[mode], longestKey[mode] = d, k
			}
		}
	}
	mu.Unlock()
	if wrong.Load() > 0 {
		t.Errorf("%d wrong answers, e.g. %v", wrong.Load(), wrongMsg.Load())
	}
	if right.Load() == 0 {
		t.Errorf("no right answer under the load")
	}
	if scansWrong.Load() > 0 {
		t.Errorf("%d wrong full scans, e.g. %v", scansWrong.Load(), scanWrongMsg.Load())
	}
	t.Logf("full scans with standby reads (pages of 500, at the first instance): %d exact, %d retryable failures, %d wrong; longest time between two exact scans %s",
		scansOK.Load(), scansFailed.Load(), scansWrong.Load(), scanGap.Round(time.Millisecond))
	t.Logf("query load: %d right, %d retryable not-available, %d wrong; every key answered at every instance %s after the kill; longest unavailability of a key: %s (%s) reading active copies, %s (%s) with standby reads allowed",
		right.Load(), unavailable.Load(), wrong.Load(), recovered.Round(time.Millisecond),
		longest[0].Round(time.Millisecond), longestKey[0], longest[1].Round(time.Millisecond), longestKey[1])
}
