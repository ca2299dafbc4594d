package kstream_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
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

// Coordinator errors on AddPartitionsToTxn and FindCoordinator under exactly-once only abort
// the transaction (kgo recovers when it ends); they do not reach the production handler,
// whose default would stop the app.
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
	add := injectN(t, kmsg.AddPartitionsToTxn, 4, func(req kmsg.Request) bool {
		r := req.(*kmsg.AddPartitionsToTxnRequest)
		if strings.HasPrefix(r.TransactionalID, prefix) {
			return true
		}
		for _, tx := range r.Transactions {
			if strings.HasPrefix(tx.TransactionalID, prefix) {
				return true
			}
		}
		return false
	}, func(req kmsg.Request) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
		rq := req.(*kmsg.AddPartitionsToTxnRequest)
		if req.GetVersion() >= 4 {
			resp.ErrorCode = kerr.NotCoordinator.Code
			return resp
		}
		for _, tp := range rq.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTopic()
			rt.Topic = tp.Topic
			for _, p := range tp.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition = p
				rp.ErrorCode = kerr.CoordinatorNotAvailable.Code
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
	t.Logf("injected %d AddPartitionsToTxn errors; stats %+v", add.Load(), app.Stats())
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
		cl := kafkatest.ManualProducer(t)
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
