// Command txnprobe measures what a broker charges for transactions, without kstream: one
// franz-go producer writes -rate records/s over the partitions of a new topic and, with
// transactions, ends one every -interval (the exactly-once commit interval); without, it
// flushes as often. It prints the round trips of its Produce requests and the time of each
// flush (and EndTxn) for both, alternating -rounds times.
//
//	go run ./bench/txnprobe -brokers 127.0.0.1:19092 [-partitions 8] [-rate 10000] [-interval 20ms] [-for 8s] [-rounds 2]
//
// It shows where kstream's exactly-once latency goes on a given broker (bench/README.md,
// "Exactly-once latency: the broker's transactional produce"): with transactions, the
// Produce round trips of Apache Kafka 4.4 on the 2-core development machine were tens of
// times those without.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	brokers := flag.String("brokers", "127.0.0.1:19092", "comma-separated bootstrap brokers")
	partitions := flag.Int("partitions", 8, "partitions of the topic written")
	rate := flag.Int("rate", 10000, "records per second")
	interval := flag.Duration("interval", 20*time.Millisecond, "how often a transaction ends (or the producer flushes)")
	dur := flag.Duration("for", 8*time.Second, "how long each measurement runs")
	rounds := flag.Int("rounds", 2, "measurements of each kind, alternating")
	flag.Parse()
	if err := run(strings.Split(*brokers, ","), *partitions, *rate, *interval, *dur, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "txnprobe:", err)
		os.Exit(1)
	}
}

func run(brokers []string, partitions, rate int, interval, dur time.Duration, rounds int) error {
	if rate <= 0 || interval <= 0 || partitions <= 0 {
		return errors.New("-rate, -interval and -partitions must be positive")
	}
	ctx := context.Background()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	topic := fmt.Sprintf("txnprobe-%d", time.Now().UnixNano())
	if _, err := adm.CreateTopic(ctx, int32(partitions), 1, nil, topic); err != nil {
		return fmt.Errorf("creating topic %s: %w", topic, err)
	}
	defer func() { _, _ = adm.DeleteTopics(context.Background(), topic) }()
	fmt.Printf("%d records/s over %d partitions of %s, a %s every %s, %s per measurement\n", rate, partitions, topic, "transaction (or flush)", interval, dur)
	for range rounds {
		for _, txn := range []bool{false, true} {
			if err := measure(ctx, brokers, topic, txn, rate, interval, dur); err != nil {
				return err
			}
		}
	}
	return nil
}

// produceRTTs collects the round trips of Produce requests (read wait plus time to read).
type produceRTTs struct {
	mu sync.Mutex
	d  []time.Duration
}

// OnBrokerE2E implements kgo.HookBrokerE2E.
func (h *produceRTTs) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e kgo.BrokerE2E) {
	if key != 0 { // Produce
		return
	}
	h.mu.Lock()
	h.d = append(h.d, e.ReadWait+e.TimeToRead)
	h.mu.Unlock()
}

func measure(ctx context.Context, brokers []string, topic string, txn bool, rate int, interval, dur time.Duration) error {
	rtts := &produceRTTs{}
	opts := []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ProducerLinger(0), kgo.WithHooks(rtts), kgo.DefaultProduceTopic(topic)}
	if txn {
		opts = append(opts, kgo.TransactionalID(fmt.Sprintf("txnprobe-%d", time.Now().UnixNano())))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	var (
		ends    []time.Duration
		mu      sync.Mutex
		failure error
	)
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			mu.Lock()
			failure = errors.Join(failure, err)
			mu.Unlock()
		}
	}
	perMs := max(rate/1000, 1)
	n := 0
	for deadline := time.Now().Add(dur); time.Now().Before(deadline); {
		if txn {
			if err := cl.BeginTransaction(); err != nil {
				return fmt.Errorf("beginning a transaction: %w", err)
			}
		}
		for start := time.Now(); time.Since(start) < interval; time.Sleep(time.Millisecond) {
			for range perMs {
				n++
				cl.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", n), Value: []byte("v")}, promise)
			}
		}
		began := time.Now()
		if err := cl.Flush(ctx); err != nil {
			return fmt.Errorf("flushing: %w", err)
		}
		if txn {
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				return fmt.Errorf("ending a transaction: %w", err)
			}
		}
		ends = append(ends, time.Since(began))
	}
	mu.Lock()
	defer mu.Unlock()
	if failure != nil {
		return fmt.Errorf("producing to %s: %w", topic, failure)
	}
	rtts.mu.Lock()
	defer rtts.mu.Unlock()
	kind, end := "idempotent   ", "flush"
	if txn {
		kind, end = "transactional", "flush+EndTxn"
	}
	fmt.Printf("%s  Produce round trip %s  |  %s %s\n", kind, quantiles(rtts.d), end, quantiles(ends))
	return nil
}

// quantiles formats the count, p50, p90 and p99 of d.
func quantiles(d []time.Duration) string {
	if len(d) == 0 {
		return "none"
	}
	s := slices.Clone(d)
	slices.Sort(s)
	at := func(p int) time.Duration { return s[min(len(s)*p/100, len(s)-1)].Round(10 * time.Microsecond) }
	return fmt.Sprintf("n %d p50 %v p90 %v p99 %v", len(s), at(50), at(90), at(99))
}
