package kstream_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
)

// oneByOne writes records synchronously one at a time, so that each is a batch of its own
// and a fetch limited to one batch per partition returns one record.
func oneByOne(t *testing.T, recs ...*kgo.Record) {
	t.Helper()
	cl := kafkatest.Client(t)
	for _, r := range recs {
		kafkatest.Produce(t, cl, r)
	}
}

// outRecord is an output record reduced to what the tests compare: key, value and the
// timestamp in ms after baseTime.
type outRecord struct {
	K, V string
	Ms   int64
}

func outRecords(recs []*kgo.Record) []outRecord {
	out := make([]outRecord, len(recs))
	for i, r := range recs {
		out[i] = outRecord{string(r.Key), string(r.Value), r.Timestamp.Sub(baseTime).Milliseconds()}
	}
	return out
}

func expectRecords(t *testing.T, got []outRecord, want ...outRecord) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("\n got %v\nwant %v", got, want)
	}
}

// A task reading two topics processes their records in the order of their timestamps
// across polls: every record of one topic is written before the other's, the consumer
// returns one record per poll and one batch per partition per fetch, and the partitions'
// buffers are bounded to two records (so fetching pauses and resumes).
func TestEventTimeOrderAcrossPolls(t *testing.T) {
	t.Parallel()
	a := kafkatest.CreateTopic(t, "a", 1, nil)
	bt := kafkatest.CreateTopic(t, "b", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	const n = 20
	var recs []*kgo.Record
	for i := 1; i <= 2*n; i += 2 {
		recs = append(recs, rec(a, "k", fmt.Sprintf("%02d", i), i))
	}
	for i := 2; i <= 2*n; i += 2 {
		recs = append(recs, rec(bt, "k", fmt.Sprintf("%02d", i), i))
	}
	oneByOne(t, recs...)

	b := kstream.NewBuilder()
	kstream.StreamTopics(b, []string{a, bt}, serde.String(), serde.String()).To(out, nil, nil)
	cfg := testConfig(t)
	cfg.MaxPollRecords = 1
	cfg.BufferedRecordsPerPartition = 2
	cfg.ConsumerOptions = []kgo.Opt{kgo.FetchMaxPartitionBytes(1)}
	start(t, newApp(t, b, cfg))
	got := outRecords(kafkatest.Consume(t, out, 2*n, 60*time.Second))
	var want []outRecord
	for i := 1; i <= 2*n; i++ {
		want = append(want, outRecord{"k", fmt.Sprintf("%02d", i), int64(i)})
	}
	expectRecords(t, got, want...)
}

// A partition that nothing was ever written to holds its task back only while its lag is
// unknown: the runtime asks the broker, learns that it is caught up, and (MaxTaskIdle 0)
// processes the other partition at once, well before the 5s after which an unknown lag
// stops counting. Every record is then an enforced processing.
func TestEventTimeEmptyPartitionLagFromBroker(t *testing.T) {
	t.Parallel()
	a := kafkatest.CreateTopic(t, "a", 1, nil)
	empty := kafkatest.CreateTopic(t, "empty", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	b := kstream.NewBuilder()
	kstream.StreamTopics(b, []string{a, empty}, serde.String(), serde.String()).To(out, nil, nil)
	app := newApp(t, b, testConfig(t))
	start(t, app)
	kafkatest.Eventually(t, 60*time.Second, "RUNNING", func() bool { return app.State() == kstream.StateRunning })
	began := time.Now()
	oneByOne(t, rec(a, "k", "a1", 1), rec(a, "k", "a2", 2))
	expectRecords(t, outRecords(kafkatest.Consume(t, out, 2, 60*time.Second)), outRecord{"k", "a1", 1}, outRecord{"k", "a2", 2})
	if took := time.Since(began); took > 3*time.Second {
		t.Fatalf("the records took %s: the empty partition's lag was not learned from the broker", took)
	}
	if n := app.Stats().EnforcedProcessing; n != 2 {
		t.Fatalf("EnforcedProcessing = %d, want 2", n)
	}
}

// committed0 returns the group's committed offset of partition 0 of each topic, -1 for
// none.
func committed0(t *testing.T, group string, topics ...string) []int64 {
	t.Helper()
	res := make([]int64, len(topics))
	for i, topic := range topics {
		res[i] = -1
		if o, ok := committedOffsets(t, group, topic)[0]; ok {
			res[i] = o
		}
	}
	return res
}

// The offsets committed are those after the records processed, not after those fetched: a
// task that holds records back (Config.MaxTaskIdle, waiting for a caught-up partition)
// commits the other partition's progress only, under at-least-once and under exactly-once
// (where kgo's session would commit the fetched positions). An instance started later
// processes the held records once.
func TestEventTimeCommitsProcessedPositions(t *testing.T) {
	t.Parallel()
	for _, eos := range []bool{false, true} {
		t.Run(map[bool]string{false: "at-least-once", true: "exactly-once"}[eos], func(t *testing.T) {
			t.Parallel()
			a := kafkatest.CreateTopic(t, "a", 1, nil)
			bt := kafkatest.CreateTopic(t, "b", 1, nil)
			out := kafkatest.CreateTopic(t, "out", 1, nil)
			oneByOne(t, rec(bt, "k", "b5", 5), rec(a, "k", "a10", 10), rec(a, "k", "a11", 11), rec(a, "k", "a12", 12))
			cfg := testConfig(t)
			cfg.StateDir = t.TempDir()
			var opts []kgo.Opt
			if eos {
				cfg.Guarantee, cfg.CommitInterval = kstream.ExactlyOnce, 0
				opts = append(opts, readCommitted)
			}
			topology := func() *kstream.Builder {
				b := kstream.NewBuilder()
				kstream.StreamTopics(b, []string{a, bt}, serde.String(), serde.String()).To(out, nil, nil)
				return b
			}

			// b5 goes first; then b is caught up and empty, and a's records wait an hour.
			cfg.MaxTaskIdle = time.Hour
			first := start(t, newApp(t, topology(), cfg))
			expectRecords(t, outRecords(kafkatest.Consume(t, out, 1, 60*time.Second, opts...)), outRecord{"k", "b5", 5})
			kafkatest.Eventually(t, 30*time.Second, "b's offset committed", func() bool {
				return committed0(t, cfg.ApplicationID, bt)[0] == 1
			})
			time.Sleep(time.Second) // commits go on meanwhile
			if got := committed0(t, cfg.ApplicationID, a, bt); got[0] != -1 || got[1] != 1 {
				t.Fatalf("committed offsets of a and b: %v, want [-1 1] (a's records were fetched, not processed)", got)
			}
			if err := first.stop(); err != nil {
				t.Fatal(err)
			}

			cfg.MaxTaskIdle = -1 // never wait
			start(t, newApp(t, topology(), cfg))
			got := outRecords(kafkatest.Consume(t, out, 4, 60*time.Second, opts...))
			expectRecords(t, got, outRecord{"k", "b5", 5}, outRecord{"k", "a10", 10}, outRecord{"k", "a11", 11}, outRecord{"k", "a12", 12})
			kafkatest.Eventually(t, 30*time.Second, "every offset committed", func() bool {
				got := committed0(t, cfg.ApplicationID, a, bt)
				return got[0] == 3 && got[1] == 1
			})
			if extra := kafkatest.Drain(t, out, time.Second, 10*time.Second, opts...); len(extra) != 4 {
				t.Fatalf("output %v, want the 4 records once", outRecords(extra))
			}
		})
	}
}

// tickCounter is a processor whose wall-clock punctuator, every 20ms, counts its calls in
// the store "ticks" and forwards ("n", count). Once, on count bigAt (if > 0), it forwards
// instead a record too large for the output topic, which fails the transaction; on count
// failAt (if > 0) it forwards ("doomed", count) and fails.
type tickCounter struct {
	bigAt, failAt int64
	bigDone       bool
}

func (p *tickCounter) Init(ctx kstream.ProcessorContext[string, int64]) error {
	st, err := kstream.GetKeyValueStore[string, int64](ctx, "ticks")
	if err != nil {
		return err
	}
	_, err = ctx.Schedule(20*time.Millisecond, kstream.WallClockTime, func(time.Time) error {
		n, _, err := st.Get("n")
		if err != nil {
			return err
		}
		n++
		if err := st.Put("n", n); err != nil {
			return err
		}
		switch {
		case n == p.bigAt && !p.bigDone:
			p.bigDone = true
			ctx.Forward(kstream.Record[string, int64]{Key: strings.Repeat("big", 1000), Value: n})
		case n == p.failAt:
			ctx.Forward(kstream.Record[string, int64]{Key: "doomed", Value: n})
			return errors.New("the punctuator fails")
		default:
			ctx.Forward(kstream.Record[string, int64]{Key: "n", Value: n})
		}
		return nil
	})
	return err
}

func (p *tickCounter) Process(kstream.ProcessorContext[string, int64], kstream.Record[string, string]) error {
	return nil
}

// Under exactly-once, a wall-clock punctuator of an idle task (its input is empty) writes
// its store and its outputs in the open transaction, which commits or aborts them together:
//
//   - an output too large for its topic aborts the transaction (the production error
//     handler says Continue, so the instance goes on): the punctuator's store writes since
//     the last commit are rolled back with its outputs, and it counts again from the last
//     committed count;
//   - a punctuator's error stops the instance (LogAndFail); its open transaction aborts, and
//     a new instance on the same state goes on from the last committed count.
//
// So a read_committed reader sees 1, 2, 3, ... without a gap, a repeat, the large record
// or the doomed one.
func TestPunctuatorUnderExactlyOnce(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	limit := "2000"
	out := kafkatest.CreateTopic(t, "out", 1, map[string]*string{"max.message.bytes": &limit})
	topology := func(p *tickCounter) *kstream.Builder {
		b := kstream.NewBuilder()
		ticks := kstream.KeyValueStore("ticks", serde.String(), serde.Int64())
		kstream.Process(kstream.Stream(b, in, serde.String(), serde.String()), func() kstream.Processor[string, string, string, int64] {
			return p
		}, kstream.Named("ticker"), kstream.WithStores(ticks)).To(out, serde.String(), serde.Int64())
		return b
	}
	cfg := testConfig(t)
	cfg.StateDir = t.TempDir()
	cfg.Guarantee, cfg.CommitInterval = kstream.ExactlyOnce, 0
	cfg.ProductionErrorHandler = kstream.LogAndContinue()

	// The punctuator runs while a transaction ends too (for the next one), and an end may
	// take 500 ms here (25 ticks): failAt leaves room for the large record's transaction
	// to abort first.
	app := newApp(t, topology(&tickCounter{bigAt: 10, failAt: 80}), cfg)
	first := start(t, app)
	err, done := first.wait(60 * time.Second)
	var re *kstream.RecordError
	if !done || !errors.As(err, &re) || re.Operator != "ticker" || !strings.Contains(err.Error(), "the punctuator fails") {
		t.Fatalf("the first instance: done %v, err %v; want the punctuator's processing error", done, err)
	}
	if st := app.Stats(); st.TransactionsAborted == 0 {
		t.Fatalf("stats %+v: the large record aborted no transaction", st)
	}
	before := kafkatest.Drain(t, out, time.Second, 20*time.Second, readCommitted)
	if len(before) < 10 || len(before) >= 80 {
		t.Fatalf("the first instance committed %d counts, want from 10 to 79", len(before))
	}

	start(t, newApp(t, topology(&tickCounter{}), cfg))
	want := len(before) + 30
	got := kafkatest.Consume(t, out, want, 60*time.Second, readCommitted)
	for i, r := range got[:want] {
		v, err := serde.Int64().Deserialize(r.Value)
		if string(r.Key) != "n" || err != nil || v != int64(i+1) {
			t.Fatalf("output %d is %.10s=%d (%v); want n=%d (committed by the first instance: %d)", i, r.Key, v, err, i+1, len(before))
		}
	}
}

// A record whose timestamp is negative stops the application with the default extractor,
// naming its topic, partition and offset; with LogAndSkipOnInvalidTimestamp it is dropped,
// counted, and its offset committed.
func TestInvalidTimestamps(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	oneByOne(t, rec(in, "k", "ok", 1), &kgo.Record{Topic: in, Key: []byte("k"), Value: []byte("bad"), Timestamp: time.UnixMilli(-1)}, rec(in, "k", "ok2", 2))
	topology := func(out string, opts ...kstream.Option) *kstream.Builder {
		b := kstream.NewBuilder()
		kstream.Stream(b, in, serde.String(), serde.String(), opts...).To(out, nil, nil)
		return b
	}

	out := kafkatest.CreateTopic(t, "out", 1, nil)
	r := start(t, newApp(t, topology(out), testConfig(t)))
	err, done := r.wait(60 * time.Second)
	if !done || !errors.Is(err, kstream.ErrInvalidTimestamp) || !strings.Contains(err.Error(), fmt.Sprintf("topic %q partition 0 offset 1", in)) {
		t.Fatalf("FailOnInvalidTimestamp: done %v, err %v", done, err)
	}

	out2 := kafkatest.CreateTopic(t, "out", 1, nil)
	cfg := testConfig(t)
	app := newApp(t, topology(out2, kstream.WithTimestampExtractor(kstream.LogAndSkipOnInvalidTimestamp{})), cfg)
	start(t, app)
	expectRecords(t, outRecords(kafkatest.Consume(t, out2, 2, 60*time.Second)), outRecord{"k", "ok", 1}, outRecord{"k", "ok2", 2})
	kafkatest.Eventually(t, 30*time.Second, "every offset committed", func() bool {
		return committed0(t, cfg.ApplicationID, in)[0] == 3
	})
	if st := app.Stats(); st.DroppedRecords != 1 {
		t.Fatalf("DroppedRecords = %d, want 1", st.DroppedRecords)
	}
}
