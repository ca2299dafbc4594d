// Command windowed counts page views per user per minute and prints the final count of
// each minute, once, when the minute is over: it generates page views spread over ten
// minutes of event time (some arriving late, out of order), counts them in one-minute
// tumbling windows with a 10-second grace period, emits one final result per window when
// it closes, reads the results back and checks each one against its own count.
//
//	go run ./examples/windowed
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
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/embedded"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	viewsTopic  = "page-views"
	countsTopic = "views-per-minute"
	numViews    = 6000
	minutes     = 10
)

var users = []string{"ada", "alan", "grace", "edsger", "barbara", "donald"}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "windowed:", err)
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
	start := time.Now().Truncate(time.Minute).Add(-time.Hour)
	want, late, err := generate(ctx, brokers, start)
	if err != nil {
		return err
	}
	fmt.Printf("produced %d page views of %d users over %d minutes (%d of them too late to count)\n",
		numViews, len(users), minutes, late)

	// The topology: views keyed by user, counted per one-minute window; EmitOnWindowClose
	// emits each window's count once, when stream time passes its end plus the grace.
	b := kstream.NewBuilder()
	views := kstream.Stream(b, viewsTopic, serde.String(), serde.String())
	perMinute := views.GroupByKey().
		WindowedBy(kstream.TimeWindowsOf(time.Minute).WithGrace(10 * time.Second)).
		EmitOnWindowClose()
	kstream.WindowedCount(perMinute, "views-per-minute").ToStream().
		To(countsTopic, serde.TimeWindowed(serde.String(), time.Minute), serde.Int64())

	stateDir, err := os.MkdirTemp("", "windowed-state-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stateDir)
	app, err := kstream.New(b, kstream.Config{
		ApplicationID:  "windowed-example",
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

	got, err := readFinals(ctx, brokers, start, len(want), runErr)
	if err != nil {
		return err
	}
	stopApp()
	if err := <-runErr; err != nil {
		return fmt.Errorf("app: %w", err)
	}

	fmt.Printf("\nfinal views per user per minute, read back from %s:\n", countsTopic)
	fmt.Printf("  %-8s", "minute")
	for _, u := range users {
		fmt.Printf(" %8s", u)
	}
	fmt.Println()
	for m := range minutes {
		fmt.Printf("  %-8s", start.Add(time.Duration(m)*time.Minute).Format("15:04"))
		for _, u := range users {
			fmt.Printf(" %8d", got[window{u, m}])
		}
		fmt.Println()
	}
	for w, n := range want {
		if got[w] != n {
			return fmt.Errorf("user %s, minute %d: final count %d, want %d", w.user, w.minute, got[w], n)
		}
	}
	fmt.Println("\nok: one final result per user and minute, each exact; late views were dropped")
	return nil
}

// window is a user's minute.
type window struct {
	user   string
	minute int
}

func createTopics(ctx context.Context, brokers []string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopics(ctx, 3, -1, nil, viewsTopic, countsTopic)
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

// generate writes numViews page views spread evenly over the minutes after start, each a
// few seconds out of order, and every 50th one (after the third minute) two minutes late,
// beyond the grace period: the count drops it. A last view per user, a minute after the end, closes the last
// windows. It returns the true count of every user's minute that closes, and the number of
// late views.
func generate(ctx context.Context, brokers []string, start time.Time) (map[window]int64, int, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		return nil, 0, err
	}
	defer cl.Close()
	rng := rand.New(rand.NewPCG(7, 11))
	want := map[window]int64{}
	step := time.Duration(minutes) * time.Minute / numViews
	recs := make([]*kgo.Record, 0, numViews+len(users))
	late := 0
	// Stream time is per partition: each user's views are in one partition, and so is
	// the view that moves its time on; the counts of views two minutes late are known not
	// to be counted because every user views a page every few seconds.
	for i := range numViews {
		u := users[rng.IntN(len(users))]
		ts := start.Add(time.Duration(i)*step - time.Duration(rng.IntN(5000))*time.Millisecond)
		if i%50 == 49 && ts.Sub(start) > 3*time.Minute {
			ts = ts.Add(-2 * time.Minute)
			late++
		} else if ts.After(start) {
			want[window{u, int(ts.Sub(start) / time.Minute)}]++
		} else {
			continue
		}
		recs = append(recs, &kgo.Record{Topic: viewsTopic, Key: []byte(u), Value: []byte(fmt.Sprintf("/page/%d", rng.IntN(20))), Timestamp: ts})
	}
	// A last view per user, just past the last minute's grace, closes the last windows.
	// (Not much later: a window store keeps a window only its size plus the grace after its
	// start, in stream time, so a jump of time beyond that would drop the last windows
	// before they close, as in Kafka Streams.)
	for _, u := range users {
		recs = append(recs, &kgo.Record{Topic: viewsTopic, Key: []byte(u), Value: []byte("/"), Timestamp: start.Add(minutes*time.Minute + 15*time.Second)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return nil, 0, fmt.Errorf("producing page views: %w", err)
	}
	return want, late, nil
}

// readFinals reads the final results until it has n of them, and fails if a window gets
// two.
func readFinals(ctx context.Context, brokers []string, start time.Time, n int, runErr <-chan error) (map[window]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(countsTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	keys := serde.TimeWindowed(serde.String(), time.Minute)
	got := map[window]int64{}
	for len(got) < n {
		select {
		case err := <-runErr:
			return nil, fmt.Errorf("app stopped: %v", err)
		default:
		}
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("got %d of %d final results: %w", len(got), n, err)
		}
		var ferr error
		fs.EachRecord(func(r *kgo.Record) {
			k, err := keys.Deserialize(r.Key)
			if err != nil {
				ferr = err
				return
			}
			c, err := serde.Int64().Deserialize(r.Value)
			if err != nil {
				ferr = err
				return
			}
			w := window{k.Key, int(k.Start.Sub(start) / time.Minute)}
			if _, dup := got[w]; dup {
				ferr = fmt.Errorf("two final results for %s at %s", k.Key, k.Start.Format("15:04"))
				return
			}
			got[w] = c
		})
		if ferr != nil {
			return nil, ferr
		}
	}
	return got, nil
}
