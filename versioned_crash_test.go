package kstream_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() { kafkatest.RegisterChild("versioned-join-app", runVersionedJoinChild) }

// versionedJoinTopology joins the orders of topic ORDERS with the versioned table of topic
// PRICES as of each order's time, with a grace period, writing "<order>=<price>" to OUT.
func versionedJoinTopology(prices, orders, out string) *kstream.Builder {
	b := kstream.NewBuilder()
	p := kstream.Table(b, prices, serde.String(), serde.String(), "vc-prices", kstream.Versioned(time.Hour))
	o := kstream.Stream(b, orders, serde.String(), serde.String())
	kstream.Join(o, p, func(_, order, price string) string { return order + "=" + price },
		kstream.JoinGrace(2*time.Second)).To(out, serde.String(), serde.String())
	return b
}

// runVersionedJoinChild runs versionedJoinTopology under exactly-once in a child process
// until it is killed, configured by APP_ID, STATE_DIR, PRICES, ORDERS and OUT.
func runVersionedJoinChild() error {
	cfg := childConfig()
	cfg.Guarantee = kstream.ExactlyOnce
	app, err := kstream.New(versionedJoinTopology(os.Getenv("PRICES"), os.Getenv("ORDERS"), os.Getenv("OUT")), cfg)
	if err != nil {
		return err
	}
	return app.Run(context.Background())
}

// An as-of join with a grace period survives SIGKILL under exactly-once: the versioned
// table (restored from its source topic) and the join's buffer (restored from its
// changelog, once into an empty state directory) give every order exactly one result, with
// the price valid at the order's time, although the table runs ahead of the orders.
func TestVersionedJoinSurvivesKillsExactlyOnce(t *testing.T) {
	t.Parallel()
	versionedJoinSurvivesKills(t, kstream.GroupProtocolClassic)
}

// The same as a streams group (KIP-1071) on Apache Kafka.
func TestVersionedJoinSurvivesKillsExactlyOnceStreams(t *testing.T) {
	needStreamsBroker(t)
	t.Parallel()
	versionedJoinSurvivesKills(t, kstream.GroupProtocolStreams)
}

func versionedJoinSurvivesKills(t *testing.T, p kstream.GroupProtocol) {
	const parts, keys, versions, orders, stepMs, kills = 3, 20, 60, 3000, 20, 2
	prices := kafkatest.CreateTopic(t, "vc-prices", parts, nil)
	ordersTopic := kafkatest.CreateTopic(t, "vc-orders", parts, nil)
	out := kafkatest.CreateTopic(t, "vc-out", parts, nil)
	app := kafkatest.Name(t, "app")
	protoEnv := useProtocol(t, p, app, nil)
	env := func(dir string) []string {
		return append([]string{"APP_ID=" + app, "STATE_DIR=" + dir, "PRICES=" + prices, "ORDERS=" + ordersTopic, "OUT=" + out}, protoEnv...)
	}
	key := func(i int) string { return fmt.Sprintf("k%02d", i%keys) }
	base := time.Now().Add(-time.Hour).UnixMilli() / 1000 * 1000
	// Every price version first: version v of each key from base + v seconds on.
	pcl := kafkatest.Client(t)
	var recs []*kgo.Record
	for v := range versions {
		for k := range keys {
			recs = append(recs, &kgo.Record{Topic: prices, Key: []byte(key(k)), Value: []byte(fmt.Sprint(key(k), "-p", v)),
				Timestamp: time.UnixMilli(base + int64(v)*1000)})
		}
	}
	kafkatest.Produce(t, pcl, recs...)

	var mu sync.Mutex
	got := map[string][]string{}
	cl := kafkatest.Client(t, kgo.ConsumeTopics(out), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), readCommitted)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				order, price, _ := strings.Cut(string(r.Value), "=")
				got[order] = append(got[order], price)
			})
			mu.Unlock()
		}
	}()

	want := map[string]string{}
	feedDone := make(chan struct{})
	go func() {
		defer close(feedDone)
		const batch = 250
		for i := 0; i < orders; i += batch {
			recs := make([]*kgo.Record, 0, batch)
			for j := i; j < i+batch; j++ {
				ts := base + 500 + int64(j*stepMs)
				order := fmt.Sprint("o", j)
				want[order] = fmt.Sprint(key(j), "-p", min((ts-base)/1000, versions-1))
				recs = append(recs, &kgo.Record{Topic: ordersTopic, Key: []byte(key(j)), Value: []byte(order), Timestamp: time.UnixMilli(ts)})
			}
			if err := pcl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				t.Errorf("producing orders: %v", err)
				return
			}
			time.Sleep(time.Duration(kills) * 5 * time.Second / time.Duration(orders/batch))
		}
		// Orders far later, on every key (so on every partition), pass the grace of the
		// last real ones; their own results are not checked.
		var flush []*kgo.Record
		for k := range keys {
			flush = append(flush, &kgo.Record{Topic: ordersTopic, Key: []byte(key(k)), Value: []byte("flush"),
				Timestamp: time.UnixMilli(base + 500 + int64(orders*stepMs) + 10_000)})
		}
		if err := pcl.ProduceSync(context.Background(), flush...).FirstErr(); err != nil {
			t.Errorf("producing orders: %v", err)
		}
	}()

	done := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for o := range want {
			if len(got[o]) == 0 {
				return false
			}
		}
		return true
	}
	dir := t.TempDir()
	for i := 0; i <= kills; i++ {
		if i == kills/2+1 {
			dir = t.TempDir() // once with an empty state directory
		}
		ch := kafkatest.StartChild(t, "versioned-join-app", env(dir)...)
		kafkatest.Eventually(t, 90*time.Second, fmt.Sprintf("child %d running", i), func() bool {
			return childRunning(ch.Output(), p)
		})
		if i == kills {
			<-feedDone
			for deadline := time.Now().Add(120 * time.Second); !done() && time.Now().Before(deadline); {
				time.Sleep(100 * time.Millisecond)
			}
			time.Sleep(time.Second) // a duplicate would arrive now
			ch.Kill(t)
			break
		}
		time.Sleep(time.Duration(1500+700*i) * time.Millisecond)
		ch.Kill(t)
	}
	<-feedDone
	cancel()
	mu.Lock()
	defer mu.Unlock()
	bad := 0
	for o, w := range want {
		if g := got[o]; len(g) != 1 || g[0] != w {
			bad++
			if bad <= 5 {
				t.Errorf("order %s: results %v, want exactly [%s]", o, g, w)
			}
		}
	}
	t.Logf("%d orders, %d wrong", len(want), bad)
}
