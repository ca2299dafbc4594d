package kstream_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// injectN makes the in-process broker answer up to n requests of key that match with an
// error response built by errResp, and returns the number injected so far. It skips the test
// on the real-Kafka tier, where requests cannot be intercepted.
func injectN(t *testing.T, key kmsg.Key, n int64, match func(kmsg.Request) bool, errResp func(kmsg.Request) kmsg.Response) *atomic.Int64 {
	t.Helper()
	b := kafkatest.Embedded(t)
	if b == nil {
		t.Skip("request injection needs the in-process broker")
	}
	var injected atomic.Int64
	var done atomic.Bool
	t.Cleanup(func() { done.Store(true) })
	c := b.Cluster()
	c.ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if done.Load() {
			return nil, nil, false // removed at the end of the test: handled normally
		}
		c.KeepControl()
		if injected.Load() >= n || !match(req) {
			return nil, nil, false
		}
		injected.Add(1)
		resp := errResp(req)
		resp.SetVersion(req.GetVersion())
		return resp, nil, true
	})
	return &injected
}

// A group session error (ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID on Heartbeat and
// SyncGroup) is weather: the instance rejoins and goes on. Before, kgo's injected
// group-session error at topic "" ended Run within ~150 ms.
func TestGroupSessionErrorsAreNotFatal(t *testing.T) {
	t.Parallel()
	for _, eos := range []bool{false, true} {
		t.Run(map[bool]string{false: "at-least-once", true: "exactly-once"}[eos], func(t *testing.T) {
			t.Parallel()
			in := kafkatest.CreateTopic(t, "in", 3, nil)
			out := kafkatest.CreateTopic(t, "out", 3, nil)
			cfg := testConfig(t)
			cfg.StateDir = t.TempDir()
			if eos {
				cfg.Guarantee, cfg.CommitInterval = kstream.ExactlyOnce, 0
			}
			group := cfg.ApplicationID
			hb := injectN(t, kmsg.Heartbeat, 3, func(req kmsg.Request) bool {
				return req.(*kmsg.HeartbeatRequest).Group == group
			}, func(req kmsg.Request) kmsg.Response {
				resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
				resp.ErrorCode = kerr.IllegalGeneration.Code
				return resp
			})
			sg := injectN(t, kmsg.SyncGroup, 1, func(req kmsg.Request) bool {
				return req.(*kmsg.SyncGroupRequest).Group == group
			}, func(req kmsg.Request) kmsg.Response {
				resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
				resp.ErrorCode = kerr.UnknownMemberID.Code
				return resp
			})
			app := newApp(t, countTopology(in, out), cfg)
			r := start(t, app)
			outputs := collect(t, out, readCommitted)
			want := map[string]int64{}
			for i := range 5 {
				produceCounts(t, in, 2000, 200, uint64(i+1), want)
				time.Sleep(300 * time.Millisecond) // spread the input over the injected errors
			}
			kafkatest.Eventually(t, 90*time.Second, "every count", func() bool { return outputs.reachedAtLeast(want, !eos) })
			if err, done := r.wait(10 * time.Millisecond); done {
				t.Fatalf("Run returned: %v", err)
			}
			if eos {
				outputs.checkExact(t, want)
			}
			if hb.Load() == 0 || sg.Load() == 0 {
				t.Fatalf("injected %d heartbeat and %d sync errors, want some of each", hb.Load(), sg.Load())
			}
			t.Logf("injected %d heartbeat and %d sync-group errors; state %s", hb.Load(), sg.Load(), app.State())
		})
	}
}

// Transaction coordinator errors under exactly-once (on AddOffsetsToTxn, EndTxn and
// TxnOffsetCommit) are retried or only abort the transaction; they do not reach the
// production handler, whose default would stop the app.
func TestExactlyOnceCoordinatorErrorsAreNotFatal(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 3, nil)
	out := kafkatest.CreateTopic(t, "out", 3, nil)
	cfg := testConfig(t)
	cfg.StateDir = t.TempDir()
	cfg.Guarantee, cfg.CommitInterval = kstream.ExactlyOnce, 0
	app := newApp(t, countTopology(in, out), cfg)
	r := start(t, app)
	outputs := collect(t, out, readCommitted)
	want := map[string]int64{}
	produceCounts(t, in, 1000, 100, 1, want)
	kafkatest.Eventually(t, 60*time.Second, "the first counts", func() bool { return outputs.reached(want) })
	prefix := cfg.ApplicationID
	// With KIP-890 kgo adds partitions implicitly (Produce v12+), so the coordinator
	// requests left are these; each is answered with a coordinator error a few times.
	ours := func(id string) bool { return strings.HasPrefix(id, prefix) }
	add := injectN(t, kmsg.AddOffsetsToTxn, 2, func(req kmsg.Request) bool {
		return ours(req.(*kmsg.AddOffsetsToTxnRequest).TransactionalID)
	}, func(req kmsg.Request) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp
	})
	end := injectN(t, kmsg.EndTxn, 2, func(req kmsg.Request) bool {
		return ours(req.(*kmsg.EndTxnRequest).TransactionalID)
	}, func(req kmsg.Request) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.NotCoordinator.Code
		return resp
	})
	toc := injectN(t, kmsg.TxnOffsetCommit, 2, func(req kmsg.Request) bool {
		return ours(req.(*kmsg.TxnOffsetCommitRequest).TransactionalID)
	}, func(req kmsg.Request) kmsg.Response {
		rq := req.(*kmsg.TxnOffsetCommitRequest)
		resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		for _, tp := range rq.Topics {
			rt := kmsg.NewTxnOffsetCommitResponseTopic()
			rt.Topic = tp.Topic
			for _, p := range tp.Partitions {
				rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				rp.Partition = p.Partition
				rp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	})
	for i := range 4 {
		produceCounts(t, in, 1000, 100, uint64(i+2), want)
		time.Sleep(200 * time.Millisecond)
	}
	kafkatest.Eventually(t, 90*time.Second, "every count", func() bool { return outputs.reached(want) })
	if err, done := r.wait(10 * time.Millisecond); done {
		t.Fatalf("Run returned: %v", err)
	}
	outputs.checkExact(t, want)
	t.Logf("injected coordinator errors: %d AddOffsetsToTxn, %d EndTxn, %d TxnOffsetCommit; stats %+v", add.Load(), end.Load(), toc.Load(), app.Stats())
	if add.Load()+end.Load()+toc.Load() == 0 {
		t.Fatal("no error injected")
	}
}

// bigValues maps values to themselves, except "big", which becomes a value of 5000 bytes:
// more than the output topic accepts.
func bigValues(b *kstream.Builder, in, out string) {
	kstream.MapValues(strs(b, in), func(v string) string {
		if v == "big" {
			return strings.Repeat("x", 5000)
		}
		return v
	}).To(out, serde.String(), serde.String(), kstream.Named("sink"))
}

// A record too large for its topic (max.message.bytes=2000) fails alone, under each
// production handler and both guarantees: the other records of its batch are written
// (before, the broker rejected the whole batch and the handler dropped good records with
// it); continue skips it; dead-letter writes it to the dead-letter topic; under exactly-once
// the transaction aborts and the handler's decision is applied on the replay (before: abort,
// replay, fail, forever).
func TestOversizedRecord(t *testing.T) {
	t.Parallel()
	for _, eos := range []bool{false, true} {
		for _, handler := range []string{"continue", "dead-letter"} {
			name := map[bool]string{false: "at-least-once", true: "exactly-once"}[eos] + "/" + handler
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				limit := "2000"
				in := kafkatest.CreateTopic(t, "in", 1, nil)
				out := kafkatest.CreateTopic(t, "out", 1, map[string]*string{"max.message.bytes": &limit})
				dlq := kafkatest.CreateTopic(t, "dlq", 1, nil)
				b := kstream.NewBuilder()
				bigValues(b, in, out)
				cfg := testConfig(t)
				cfg.StateDir = t.TempDir()
				if eos {
					cfg.Guarantee, cfg.CommitInterval = kstream.ExactlyOnce, 0
				}
				cfg.ProductionErrorHandler = kstream.LogAndContinue()
				if handler == "dead-letter" {
					cfg.ProductionErrorHandler = kstream.DeadLetterQueue(dlq)
				}
				r := start(t, newApp(t, b, cfg))
				const n = 300
				var recs []*kgo.Record
				for i := range n {
					v := fmt.Sprintf("value-%04d-%s", i, strings.Repeat("p", 60))
					if i == n/2 {
						v = "big"
					}
					recs = append(recs, rec(in, fmt.Sprint("k", i), v, i))
				}
				kafkatest.Produce(t, kafkatest.Client(t), recs...)
				got := kafkatest.Consume(t, out, n-1, 60*time.Second, readCommitted)
				seen := map[string]int{}
				for _, g := range got {
					seen[string(g.Key)]++
				}
				for i := range n {
					k := fmt.Sprint("k", i)
					switch {
					case i == n/2 && seen[k] != 0:
						t.Errorf("the oversized record reached the output")
					case i != n/2 && seen[k] != 1:
						t.Errorf("key %s: %d outputs, want 1", k, seen[k])
					}
				}
				if handler == "dead-letter" {
					dl := kafkatest.Consume(t, dlq, 1, 60*time.Second, readCommitted)
					if string(dl[0].Key) != fmt.Sprint("k", n/2) || string(dl[0].Value) != "big" {
						t.Errorf("dead letter %q=%q, want the input record k%d=big", dl[0].Key, dl[0].Value, n/2)
					}
				}
				extra := kafkatest.Drain(t, out, time.Second, 10*time.Second, readCommitted)
				if len(extra) != n-1 {
					t.Errorf("output holds %d records, want %d", len(extra), n-1)
				}
				if err, done := r.wait(10 * time.Millisecond); done {
					t.Fatalf("Run returned: %v", err)
				}
			})
		}
	}
}

// With the default handler (fail), an oversized record stops the app with an error naming
// the topic, the partition, the size and the input offset; under exactly-once Run returns at
// once, without waiting the close timeout to leave the group, and the open transaction is
// aborted.
func TestOversizedRecordFails(t *testing.T) {
	t.Parallel()
	for _, eos := range []bool{false, true} {
		t.Run(map[bool]string{false: "at-least-once", true: "exactly-once"}[eos], func(t *testing.T) {
			t.Parallel()
			limit := "2000"
			in := kafkatest.CreateTopic(t, "in", 1, nil)
			out := kafkatest.CreateTopic(t, "out", 1, map[string]*string{"max.message.bytes": &limit})
			b := kstream.NewBuilder()
			bigValues(b, in, out)
			cfg := testConfig(t)
			cfg.StateDir = t.TempDir()
			cfg.CloseTimeout = 60 * time.Second
			if eos {
				cfg.Guarantee, cfg.CommitInterval = kstream.ExactlyOnce, 0
			}
			r := start(t, newApp(t, b, cfg))
			kafkatest.Produce(t, kafkatest.Client(t), rec(in, "a", "small", 1), rec(in, "b", "big", 2))
			began := time.Now()
			err, done := r.wait(cfg.CloseTimeout / 2)
			if !done {
				t.Fatalf("Run did not return within half the close timeout")
			}
			t.Logf("Run returned after %s: %v", time.Since(began).Round(time.Millisecond), err)
			for _, want := range []string{fmt.Sprintf("topic %q partition 0", out), "operator sink", "record of 5001 bytes", "offset 1", "MESSAGE_TOO_LARGE"} {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("error %v does not say %q", err, want)
				}
			}
		})
	}
}

// A source topic deleted under a running app stops it with an error naming the topic, and
// the repeated fetch errors meanwhile are logged a bounded number of times (before: about a
// million identical lines in 45 s, and no end).
func TestDeletedSourceTopicStops(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", parts, nil)
	out := kafkatest.CreateTopic(t, "out", parts, nil)
	b := kstream.NewBuilder()
	strs(b, in).To(out, nil, nil)
	cfg := testConfig(t)
	var logs lockedBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	r := start(t, newApp(t, b, cfg))
	kafkatest.Produce(t, kafkatest.Client(t), rec(in, "a", "v", 1))
	kafkatest.Consume(t, out, 1, 30*time.Second)
	adm := kadm.NewClient(kafkatest.Client(t))
	if _, err := adm.DeleteTopics(kafkatest.Context(t, 10*time.Second), in); err != nil {
		t.Fatal(err)
	}
	err, done := r.wait(60 * time.Second)
	if !done {
		t.Fatal("Run did not return after the source topic was deleted")
	}
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("source topic %q", in)) || !strings.Contains(err.Error(), "deleted") {
		t.Fatalf("error %v does not say that source topic %s was deleted", err, in)
	}
	if n := strings.Count(logs.String(), "\n"); n > 50 {
		t.Fatalf("%d log lines; want a bounded number:\n%s", n, logs.String()[:4000])
	}
}

// Partitions added to a source: a stateless topology goes on and processes the new
// partitions within seconds (before: ignored for minutes); a topology with keyed state
// stops with an error that says why (before: an error reading "<nil>").
func TestSourcePartitionsAdded(t *testing.T) {
	t.Parallel()
	t.Run("stateless", func(t *testing.T) {
		t.Parallel()
		in := kafkatest.CreateTopic(t, "in", 2, nil)
		out := kafkatest.CreateTopic(t, "out", 2, nil)
		b := kstream.NewBuilder()
		strs(b, in).To(out, nil, nil)
		r := start(t, newApp(t, b, testConfig(t)))
		kafkatest.Produce(t, kafkatest.ManualProducer(t), &kgo.Record{Topic: in, Partition: 0, Key: []byte("a"), Value: []byte("1")})
		kafkatest.Consume(t, out, 1, 30*time.Second)
		adm := kadm.NewClient(kafkatest.Client(t))
		if _, err := adm.CreatePartitions(kafkatest.Context(t, 10*time.Second), 1, in); err != nil {
			t.Fatal(err)
		}
		// A client that looks the topic up again often: on Apache Kafka under load, one with
		// kgo's default metadata ages kept the old partition count for the whole wait (a CI
		// rehearsal).
		cl := kafkatest.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MetadataMinAge(250*time.Millisecond), kgo.MetadataMaxAge(time.Second))
		kafkatest.Eventually(t, 30*time.Second, "the new partition", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return cl.ProduceSync(ctx, &kgo.Record{Topic: in, Partition: 2, Key: []byte("b"), Value: []byte("2")}).FirstErr() == nil
		})
		got := kafkatest.Consume(t, out, 2, 60*time.Second)
		if string(got[len(got)-1].Value) != "2" && string(got[0].Value) != "2" {
			t.Fatalf("the record of the new partition did not reach the output: %v", got)
		}
		if err, done := r.wait(10 * time.Millisecond); done {
			t.Fatalf("Run returned: %v", err)
		}
	})
	t.Run("stateful", func(t *testing.T) {
		t.Parallel()
		in := kafkatest.CreateTopic(t, "in", 2, nil)
		out := kafkatest.CreateTopic(t, "out", 2, nil)
		cfg := testConfig(t)
		cfg.StateDir = t.TempDir()
		r := start(t, newApp(t, countTopology(in, out), cfg))
		kafkatest.Produce(t, kafkatest.Client(t), rec(in, "a", "v", 1))
		kafkatest.Consume(t, out, 1, 30*time.Second)
		adm := kadm.NewClient(kafkatest.Client(t))
		if _, err := adm.CreatePartitions(kafkatest.Context(t, 10*time.Second), 1, in); err != nil {
			t.Fatal(err)
		}
		err, done := r.wait(60 * time.Second)
		if !done {
			t.Fatal("Run did not return after the source's partition count changed")
		}
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("partition count of source topic %q changed from 2 to 3", in)) {
			t.Fatalf("error %v does not say that the partition count of %s changed", err, in)
		}
	})
}

// longestPause samples the collector every 50ms until stop is closed and returns the
// longest time its record count did not grow.
func longestPause(c *outputCollector, stop <-chan struct{}) <-chan time.Duration {
	res := make(chan time.Duration, 1)
	go func() {
		var longest time.Duration
		last, lastN := time.Now(), -1
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				res <- longest
				return
			case <-tick.C:
			}
			c.mu.Lock()
			n := c.n
			c.mu.Unlock()
			if n != lastN {
				last, lastN = time.Now(), n
			}
			longest = max(longest, time.Since(last))
		}
	}()
	return res
}

// Under exactly-once, a member that loses its group session while a transaction ends (the
// heartbeat says UNKNOWN_MEMBER_ID) aborts that transaction and rejoins within seconds.
// Before, the commit held the runtime lock while the session waited for a heartbeat that the
// lost session never answered, and processing stalled for the whole close timeout.
func TestExactlyOnceSessionLostDuringCommit(t *testing.T) {
	t.Parallel()
	if kafkatest.Embedded(t) == nil {
		t.Skip("request injection needs the in-process broker")
	}
	in := kafkatest.CreateTopic(t, "in", 3, nil)
	out := kafkatest.CreateTopic(t, "out", 3, nil)
	cfg := testConfig(t)
	cfg.StateDir = t.TempDir()
	cfg.Guarantee, cfg.CommitInterval = kstream.ExactlyOnce, 0
	cfg.CloseTimeout = 40 * time.Second
	app := newApp(t, countTopology(in, out), cfg)
	r := start(t, app)
	outputs := collect(t, out, readCommitted)
	kafkatest.Eventually(t, 60*time.Second, "RUNNING", func() bool { return app.State() == kstream.StateRunning })
	var mu sync.Mutex
	want := map[string]int64{}
	done := make(chan struct{})
	go func() { defer close(done); feed(t, in, 12000, 300, 300*time.Millisecond, 5, &mu, want) }()
	stop := make(chan struct{})
	pause := longestPause(outputs, stop)
	group := cfg.ApplicationID
	var armed atomic.Bool
	lost := injectN(t, kmsg.Heartbeat, 6, func(req kmsg.Request) bool {
		return armed.Load() && req.(*kmsg.HeartbeatRequest).Group == group
	}, func(req kmsg.Request) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp
	})
	time.Sleep(2 * time.Second)
	armed.Store(true)
	<-done
	kafkatest.Eventually(t, 60*time.Second, "every count", func() bool { return outputs.reached(want) })
	close(stop)
	longest := <-pause
	if err, done := r.wait(10 * time.Millisecond); done {
		t.Fatalf("Run returned: %v", err)
	}
	outputs.checkExact(t, want)
	t.Logf("%d heartbeats answered UNKNOWN_MEMBER_ID; longest pause in the output %s; stats %+v", lost.Load(), longest.Round(time.Millisecond), app.Stats())
	if lost.Load() == 0 {
		t.Fatal("no error injected")
	}
	// Unloaded, the pause is a few seconds (a rejoin); on a loaded 2-core machine under -race
	// it reached 22s. A commit waiting for the lost session pauses the whole close timeout.
	if longest > cfg.CloseTimeout*3/4 {
		t.Fatalf("the output paused %s, about the close timeout (%s): a commit waited for the lost session", longest, cfg.CloseTimeout)
	}
}

// One retriable error on a produce request (NOT_LEADER_FOR_PARTITION) costs a metadata round
// trip, not kgo's default 5 s between metadata refreshes.
func TestRetriableProduceErrorIsCheap(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 1, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	b := kstream.NewBuilder()
	strs(b, in).To(out, nil, nil)
	r := start(t, newApp(t, b, testConfig(t)))
	kafkatest.Produce(t, kafkatest.Client(t), rec(in, "a", "1", 1))
	kafkatest.Consume(t, out, 1, 30*time.Second)
	details, err := kadm.NewClient(kafkatest.Client(t)).ListTopics(kafkatest.Context(t, 10*time.Second), out)
	if err != nil {
		t.Fatal(err)
	}
	outID := details[out].ID
	injected := injectN(t, kmsg.Produce, 1, func(req kmsg.Request) bool {
		for _, tp := range req.(*kmsg.ProduceRequest).Topics {
			if tp.Topic == out || tp.TopicID == outID {
				return true
			}
		}
		return false
	}, func(req kmsg.Request) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, tp := range req.(*kmsg.ProduceRequest).Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic, rt.TopicID = tp.Topic, tp.TopicID
			for _, p := range tp.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition = p.Partition
				rp.ErrorCode = kerr.NotLeaderForPartition.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	})
	began := time.Now()
	kafkatest.Produce(t, kafkatest.Client(t), rec(in, "b", "2", 2))
	kafkatest.Consume(t, out, 2, 30*time.Second)
	took := time.Since(began)
	t.Logf("a record whose produce request failed once reached the output in %s", took.Round(time.Millisecond))
	if injected.Load() != 1 {
		t.Fatalf("injected %d errors, want 1", injected.Load())
	}
	if took > 4*time.Second {
		t.Fatalf("one retriable produce error cost %s; want well under kgo's default 5s metadata refresh", took)
	}
	if err, done := r.wait(10 * time.Millisecond); done {
		t.Fatalf("Run returned: %v", err)
	}
}

// Under exactly-once, a commit whose outcome the client cannot know (its EndTxn is answered
// after the client gave up) is settled, not guessed: the instance aborts whatever may still
// be open, then reads the group's committed offsets once they are stable and carries on as
// committed if they are the transaction's. Either way the read_committed output stays
// exactly 1..n. (On the in-process broker the abort's producer-id bump reaches the
// coordinator before the delayed EndTxn, so here the transaction ends aborted; a broker that
// commits first takes the other branch.)
func TestExactlyOnceUnknownCommitOutcome(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 3, nil)
	out := kafkatest.CreateTopic(t, "out", 3, nil)
	cfg := testConfig(t)
	cfg.StateDir = t.TempDir()
	cfg.Guarantee, cfg.CommitInterval = kstream.ExactlyOnce, 0
	// The client gives up on an answer after 1s (EndTxn has no timeout of its own), and does
	// not retry: otherwise kgo sends EndTxn again and learns the outcome itself.
	cfg.ConsumerOptions = []kgo.Opt{kgo.RequestTimeoutOverhead(time.Second), kgo.RequestRetries(0)}
	b := kafkatest.Embedded(t)
	if b == nil {
		t.Skip("request injection needs the in-process broker")
	}
	app := newApp(t, countTopology(in, out), cfg)
	r := start(t, app)
	outputs := collect(t, out, readCommitted)
	want := map[string]int64{}
	produceCounts(t, in, 1000, 100, 1, want)
	kafkatest.Eventually(t, 60*time.Second, "the first counts", func() bool { return outputs.reached(want) })

	// The next commit's EndTxn is answered only after 2.5s: the broker commits, the client
	// has given up.
	var delayed atomic.Int64
	var done atomic.Bool
	t.Cleanup(func() { done.Store(true) })
	c := b.Cluster()
	prefix := cfg.ApplicationID
	c.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if done.Load() {
			return nil, nil, false
		}
		c.KeepControl()
		r := req.(*kmsg.EndTxnRequest)
		if !r.Commit || !strings.HasPrefix(r.TransactionalID, prefix) || !delayed.CompareAndSwap(0, 1) {
			return nil, nil, false
		}
		c.SleepControl(func() { time.Sleep(2500 * time.Millisecond) })
		return nil, nil, false // handled normally now: the commit takes effect
	})
	produceCounts(t, in, 1000, 100, 2, want)
	kafkatest.Eventually(t, 60*time.Second, "every count", func() bool { return outputs.reached(want) })
	if delayed.Load() == 0 {
		t.Fatal("no EndTxn was delayed")
	}
	produceCounts(t, in, 500, 100, 3, want) // and the instance goes on
	kafkatest.Eventually(t, 60*time.Second, "every count after", func() bool { return outputs.reached(want) })
	if err, done := r.wait(10 * time.Millisecond); done {
		t.Fatalf("Run returned: %v", err)
	}
	outputs.checkExact(t, want)
	t.Logf("stats %+v", app.Stats())
}
