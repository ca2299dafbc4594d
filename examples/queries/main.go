// Command queries serves word counts over HTTP from two instances of one application: each
// instance runs its share of the tasks and a query server, and either one answers for any
// word, reading its own store or asking the instance that owns the word (one hop).
//
//	go run ./examples/queries
//
// It starts an in-process broker (or uses KSTREAM_BROKERS=host:port), two instances
// listening on 127.0.0.1:8081 and 127.0.0.1:8082 (-addrs to change them), writes lines of
// text, checks every word's count at both instances through the Go client, prints curl
// commands, and keeps serving until interrupted (-check exits after the check).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/embedded"
	"github.com/kstream-go/kstream/query"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const numLines = 5000

// linesTopic and the application id are new on every run, so that a run on a real
// cluster (KSTREAM_BROKERS) does not count the lines of the previous ones.
var (
	runID      = fmt.Sprintf("%x", time.Now().UnixNano()&0xffffff)
	linesTopic = "query-lines-" + runID
)

var vocabulary = strings.Fields("kafka streams go state store changelog table join window " +
	"partition offset commit task topic record key value broker group replica query host")

func main() {
	addrs := flag.String("addrs", "127.0.0.1:8081,127.0.0.1:8082", "the two instances' query addresses (host:port; port 0 picks one)")
	check := flag.Bool("check", false, "exit once every count has been checked at both instances")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, strings.Split(*addrs, ","), *check, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "queries:", err)
		os.Exit(1)
	}
}

// run runs the example; with check it returns once the counts are verified.
func run(ctx context.Context, addrs []string, check bool, out io.Writer) error {
	if len(addrs) != 2 {
		return fmt.Errorf("-addrs needs two addresses, got %d", len(addrs))
	}
	brokers, stopBroker, err := embedded.FromEnv()
	if err != nil {
		return err
	}
	defer stopBroker()
	if err := createTopic(ctx, brokers); err != nil {
		return err
	}
	stateDir, err := os.MkdirTemp("", "queries-state-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stateDir)

	appCtx, stopApps := context.WithCancel(ctx)
	defer stopApps()
	runErr := make(chan error, 2)
	var hosts []string
	for i, addr := range addrs {
		// Listen first, so that the address the group learns is the one being served.
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("instance %d: %w", i+1, err)
		}
		host := ln.Addr().String()
		hosts = append(hosts, host)
		app, err := kstream.New(topology(), kstream.Config{
			ApplicationID:     "queries-example-" + runID,
			Brokers:           brokers,
			StateDir:          fmt.Sprintf("%s/instance-%d", stateDir, i+1),
			ApplicationServer: host,
			CommitInterval:    200 * time.Millisecond, // queries read each store as of its last commit
			Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		})
		if err != nil {
			ln.Close()
			return err
		}
		srv := query.NewServer(query.Config{App: app})
		go func() { runErr <- app.Run(appCtx) }()
		go func() { _ = srv.Serve(appCtx, ln, nil) }()
	}
	want, err := generate(ctx, brokers)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "produced %d lines with %d distinct words; instances serve on %s and %s\n", numLines, len(want), hosts[0], hosts[1])

	if err := verify(ctx, hosts, want, runErr); err != nil {
		return err
	}
	words := slices.Sorted(func(yield func(string) bool) {
		for w := range want {
			if !yield(w) {
				return
			}
		}
	})
	fmt.Fprintln(out, "\nword counts, as both instances answer them:")
	for _, w := range words {
		fmt.Fprintf(out, "  %-10s %6d\n", w, want[w])
	}
	fmt.Fprintln(out, "\nok: every word answered with its exact count at both instances")
	if check {
		stopApps()
		for range addrs {
			if err := <-runErr; err != nil {
				return fmt.Errorf("app: %w", err)
			}
		}
		return nil
	}
	fmt.Fprintf(out, `
Ask either instance (Ctrl-C to stop):
  curl 'http://%[1]s/v1/stores/counts/keys?key=kafka'
  curl 'http://%[2]s/v1/stores/counts/keys?key=kafka'       # same answer, X-Kstream-Hops says whether it was forwarded
  curl 'http://%[1]s/v1/stores/counts/all'                   # every word, in key order, from both instances
  curl 'http://%[2]s/v1/stores/counts/range?from=a&to=k'
  curl 'http://%[1]s/v1/metadata'                            # which instance runs which task
`, hosts[0], hosts[1])
	select {
	case <-ctx.Done():
		stopApps()
		return nil
	case err := <-runErr:
		return fmt.Errorf("app stopped: %w", err)
	}
}

// topology counts the words of linesTopic into the store "counts".
func topology() *kstream.Builder {
	b := kstream.NewBuilder()
	lines := kstream.Stream(b, linesTopic, serde.String(), serde.String())
	words := kstream.FlatMapValues(lines, strings.Fields)
	kstream.Count(kstream.GroupBy(words, func(_, w string) string { return w }, serde.String()), "counts")
	return b
}

// verify asks both instances for every word, over HTTP, until each answers every word with
// its exact count, and checks that a full scan at each returns every word once, in order.
func verify(ctx context.Context, hosts []string, want map[string]int64, runErr <-chan error) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, h := range hosts {
		counts := query.StoreOf[string, int64](query.NewClient("http://"+h), "counts")
		for {
			select {
			case err := <-runErr:
				return fmt.Errorf("app stopped early: %v", err)
			default:
			}
			if ok, err := answersAll(ctx, counts, want); ok {
				break
			} else if ctx.Err() != nil {
				return fmt.Errorf("instance %s: counts not exact in time (last error: %v)", h, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		all, err := counts.All(ctx)
		if err != nil {
			return fmt.Errorf("instance %s: all: %w", h, err)
		}
		if len(all) != len(want) || !slices.IsSortedFunc(all, func(a, b query.KeyValue[string, int64]) int { return strings.Compare(a.Key, b.Key) }) {
			return fmt.Errorf("instance %s: all returned %d words (want %d, in order)", h, len(all), len(want))
		}
	}
	return nil
}

// answersAll reports whether counts answers every word with its count.
func answersAll(ctx context.Context, counts *query.Store[string, int64], want map[string]int64) (bool, error) {
	for w, n := range want {
		got, ok, err := counts.Get(ctx, w)
		if err != nil {
			return false, err
		}
		if !ok || got != n {
			return false, fmt.Errorf("%s = %d, want %d", w, got, n)
		}
	}
	return true, nil
}

func createTopic(ctx context.Context, brokers []string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopics(ctx, 6, -1, nil, linesTopic)
	if err != nil {
		return fmt.Errorf("creating topics: %w", err)
	}
	for _, r := range resp.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("creating topic %s: %w", r.Topic, r.Err)
		}
	}
	return nil
}

// generate writes numLines random lines and returns the true count of every word.
func generate(ctx context.Context, brokers []string) (map[string]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	rng := rand.New(rand.NewPCG(3, 5))
	want := map[string]int64{}
	recs := make([]*kgo.Record, 0, numLines)
	for i := range numLines {
		ws := make([]string, 1+rng.IntN(6))
		for j := range ws {
			ws[j] = vocabulary[rng.IntN(len(vocabulary))]
			want[ws[j]]++
		}
		recs = append(recs, &kgo.Record{Topic: linesTopic, Key: fmt.Appendf(nil, "line-%d", i), Value: []byte(strings.Join(ws, " "))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return nil, fmt.Errorf("producing lines: %w", err)
	}
	return want, nil
}
