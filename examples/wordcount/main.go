// Command wordcount counts words with a stateful kstream topology: it generates lines of
// text, splits them into words, groups by word (through a repartition topic), counts into a
// state store backed by a changelog topic, writes the counts to an output topic, reads them
// back and checks every count against its own.
//
//	go run ./examples/wordcount
//
// With no set-up it starts an in-process broker; set KSTREAM_BROKERS=host:port to use a real
// cluster instead.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/embedded"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	linesTopic  = "text-lines"
	countsTopic = "word-counts"
	numLines    = 10000
)

var vocabulary = strings.Fields("kafka streams go state store changelog table join window " +
	"partition offset commit task topic record key value broker group replica")

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "wordcount:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()

	brokers, stopBroker, err := embedded.FromEnv()
	if err != nil {
		return err
	}
	defer stopBroker()
	if err := createTopics(ctx, brokers); err != nil {
		return err
	}
	want, err := generate(ctx, brokers)
	if err != nil {
		return err
	}
	fmt.Printf("produced %d lines with %d distinct words\n", numLines, len(want))

	b := kstream.NewBuilder()
	lines := kstream.Stream(b, linesTopic, serde.String(), serde.String())
	words := kstream.FlatMapValues(lines, strings.Fields)
	counts := kstream.Count(kstream.GroupBy(words, func(_, w string) string { return w }, serde.String()), "counts")
	counts.ToStream().To(countsTopic, serde.String(), serde.Int64())

	stateDir, err := os.MkdirTemp("", "wordcount-state-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stateDir)
	app, err := kstream.New(b, kstream.Config{
		ApplicationID:  "wordcount-example",
		Brokers:        brokers,
		StateDir:       stateDir,
		CommitInterval: time.Second,
		Logger:         slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	fmt.Print(app.Topology().Describe())
	appCtx, stopApp := context.WithCancel(ctx)
	defer stopApp()
	runErr := make(chan error, 1)
	go func() { runErr <- app.Run(appCtx) }()

	got, err := readCounts(ctx, brokers, want, runErr)
	if err != nil {
		return err
	}
	stopApp()
	if err := <-runErr; err != nil {
		return fmt.Errorf("app: %w", err)
	}
	words2 := make([]string, 0, len(want))
	for w := range want {
		words2 = append(words2, w)
	}
	slices.SortFunc(words2, func(a, b string) int { return int(want[b] - want[a]) })
	fmt.Println("\nword counts read back from", countsTopic+":")
	for _, w := range words2 {
		fmt.Printf("  %-10s %6d\n", w, got[w])
	}
	for w, n := range want {
		if got[w] != n {
			return fmt.Errorf("word %q: counted %d, want %d", w, got[w], n)
		}
	}
	fmt.Println("\nok: every count is exact")
	return nil
}

func createTopics(ctx context.Context, brokers []string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopics(ctx, 3, -1, nil, linesTopic, countsTopic)
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
	rng := rand.New(rand.NewPCG(7, 11))
	want := map[string]int64{}
	recs := make([]*kgo.Record, 0, numLines)
	for i := range numLines {
		n := 1 + rng.IntN(8)
		ws := make([]string, n)
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

// readCounts reads the counts topic until every word has reached its true count.
func readCounts(ctx context.Context, brokers []string, want map[string]int64, runErr <-chan error) (map[string]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(countsTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	got := map[string]int64{}
	i64 := serde.Int64()
	done := func() bool {
		for w, n := range want {
			if got[w] < n {
				return false
			}
		}
		return true
	}
	for !done() {
		select {
		case err := <-runErr:
			return nil, fmt.Errorf("app stopped early: %v", err)
		default:
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fetches := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return nil, errors.New("timed out waiting for the counts")
		}
		var derr error
		fetches.EachRecord(func(r *kgo.Record) {
			n, err := i64.Deserialize(r.Value)
			if err != nil {
				derr = err
			}
			got[string(r.Key)] = max(got[string(r.Key)], n)
		})
		if derr != nil {
			return nil, derr
		}
	}
	return got, nil
}
