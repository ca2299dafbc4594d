package runtime

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The lag of an empty partition decides whether a task with several input partitions may
// process the others (PartitionGroup.Ready), as in Kafka Streams, where the consumer knows
// each partition's lag from every fetch response. kgo returns a fetch response for a
// partition only when it has records, so the lag is known here:
//
//   - from the last fetch that returned records for the partition: its end offset (the high
//     watermark, or the last stable offset under exactly-once) minus the offset after the
//     last record returned (transaction markers are returned too, so that this is the
//     consumer's position);
//   - for a partition from which nothing was fetched yet, from the broker: its end offset
//     minus the position the consumer started at (the group's committed offset, or the
//     reset policy's), asked once in the background (a lag probe).
//
// A lag that stays positive without any record arriving (which kgo's position could only
// cause by passing over records it does not return) or a probe that cannot answer stops
// holding the task back after staleLag. Kafka Streams has no such bound (with
// max.task.idle.ms 0 a task waits for a partition known to have data for as long as it
// takes); the bound is a safety valve, long enough that a slow first fetch after a restart
// on a loaded broker (offsets fetched, epochs validated) rarely opens it: at 5 s it did,
// and a stream-stream left join emitted non-matches before their matches.
const staleLag = 10 * time.Second

// noteStale logs, once per partition and stale episode, that task t goes on without the
// records of partition tp: its lag (-1: unknown) was last learnt at since.
func (r *Runtime) noteStale(t *taskRun, tp topicPartition, pos *partPos, lag int64, since, now time.Time) {
	if pos.staleNoted.Equal(since) {
		return
	}
	pos.staleNoted = since
	r.log.Info("kstream: a partition's lag is stale; its task goes on without waiting for it",
		"task", t.id.String(), "topic", tp.topic, "partition", tp.partition, "lag", lag, "age", now.Sub(since).Round(time.Millisecond), "paused", pos.paused.Load())
}

// lagProbe is a question to the broker about the lag of a partition nothing was fetched from.
type lagProbe struct {
	mu      sync.Mutex
	done    bool
	lag     int64
	err     error
	started time.Time
}

// noteFetch records what a fetch of a partition tells of its lag.
func (r *Runtime) noteFetch(pos *partPos, p kgo.FetchPartition, now time.Time) {
	if len(p.Records) == 0 {
		return
	}
	first, last := p.Records[0], p.Records[len(p.Records)-1]
	if pos.first.Offset < 0 {
		pos.first = kgo.EpochOffset{Epoch: first.LeaderEpoch, Offset: first.Offset}
	}
	end := p.HighWatermark
	if r.sess != nil && p.LastStableOffset >= 0 {
		end = p.LastStableOffset
	}
	pos.fetched, pos.fetchedTo, pos.end, pos.fetchedAt = true, last.Offset+1, end, now
	pos.probe, pos.waitSince = nil, time.Time{}
	if pos.met != nil {
		pos.met.noteFetch(pos, p.Records)
	}
}

// lagOf is what is known of the lag of the empty partition tp of task t (see
// PartitionGroup.Ready). It runs on the task's goroutine.
func (r *Runtime) lagOf(t *taskRun, tp topicPartition, now time.Time) (int64, bool) {
	pos := t.parts[tp]
	if pos == nil {
		return 0, true
	}
	if pos.fetched {
		lag := max(pos.end-pos.fetchedTo, 0)
		if lag > 0 && now.Sub(pos.fetchedAt) > staleLag {
			r.noteStale(t, tp, pos, lag, pos.fetchedAt, now)
			return 0, true
		}
		return lag, true
	}
	if pos.waitSince.IsZero() {
		pos.waitSince = now
	}
	if pr := pos.probe; pr != nil {
		pr.mu.Lock()
		done, lag, err, started := pr.done, pr.lag, pr.err, pr.started
		pr.mu.Unlock()
		switch {
		case done && err == nil:
			if lag > 0 && now.Sub(started) > staleLag {
				r.noteStale(t, tp, pos, lag, started, now)
				return 0, true
			}
			return lag, true
		case done && now.Sub(started) > time.Second:
			pos.probe = nil // ask again
		}
	}
	if now.Sub(pos.waitSince) > staleLag {
		r.noteStale(t, tp, pos, -1, pos.waitSince, now)
		return 0, true
	}
	if pos.probe == nil {
		pos.probe = &lagProbe{started: now}
		cl, iso := r.consumer, r.sess != nil
		pr := pos.probe
		r.bg.Go(func() { r.probeLag(cl, iso, tp, pr) })
	}
	return 0, false
}

// probeLag asks the broker for the lag of partition tp, from which the consumer cl has
// fetched nothing: its end offset minus the position the consumer started at.
func (r *Runtime) probeLag(cl *kgo.Client, readCommitted bool, tp topicPartition, pr *lagProbe) {
	lag, err := r.askLag(cl, readCommitted, tp)
	if err != nil {
		r.log.Debug("kstream: asking the lag of an empty partition", "topic", tp.topic, "partition", tp.partition, "err", err)
	}
	pr.mu.Lock()
	pr.done, pr.lag, pr.err = true, lag, err
	pr.mu.Unlock()
}

func (r *Runtime) askLag(cl *kgo.Client, readCommitted bool, tp topicPartition) (int64, error) {
	ctx, cancel := context.WithTimeout(r.restoreCtx, 5*time.Second)
	defer cancel()
	list := r.admin.ListEndOffsets
	if readCommitted {
		list = r.admin.ListCommittedOffsets // the last stable offsets
	}
	offset := func(list func(context.Context, ...string) (kadm.ListedOffsets, error)) (int64, error) {
		l, err := list(ctx, tp.topic)
		if err != nil {
			return 0, err
		}
		o, ok := l.Lookup(tp.topic, tp.partition)
		if !ok {
			return 0, fmt.Errorf("no offset listed for topic %q partition %d", tp.topic, tp.partition)
		}
		return o.Offset, o.Err
	}
	end, err := offset(list)
	if err != nil {
		return 0, err
	}
	var at int64
	if c, ok := cl.CommittedOffsets()[tp.topic][tp.partition]; ok && c.Offset >= 0 {
		at = c.Offset
	} else if r.resetOf(tp.topic) == ResetLatest {
		return 0, nil
	} else if at, err = offset(r.admin.ListStartOffsets); err != nil {
		return 0, err
	}
	return max(end-at, 0), nil
}

// resetOf is the reset policy of a source topic (ResetByDuration counts as the earliest
// in lag estimates: the lag it reports is at most the partition's).
func (r *Runtime) resetOf(topic string) Reset {
	for _, srcs := range r.sources().subs {
		for _, src := range srcs {
			if src.Topic == topic {
				policy, _ := r.sourceReset(src)
				return policy
			}
		}
	}
	if r.cfg.DefaultReset == ResetLatest {
		return ResetLatest
	}
	return ResetEarliest
}

// forgetLagsLocked forgets what is known of every partition's lag and fetch position,
// after the consumer was moved back to the committed offsets.
func (r *Runtime) forgetLagsLocked() {
	for _, t := range r.tasks {
		for _, pos := range t.parts {
			pos.fetched, pos.probe, pos.waitSince = false, nil, time.Time{}
			if pos.met != nil {
				pos.met.end.Store(-1) // known again from the next fetch
				pos.met.pos.Store(-1)
			}
		}
	}
}

// punctuatedLocked reports whether a wall-clock punctuator ran since the last commit.
func (r *Runtime) punctuatedLocked() bool {
	for _, t := range r.tasks {
		if t.punctuated {
			return true
		}
	}
	return false
}

// committedLocked tells the tasks that what they did is committed: their stream times,
// partition times and punctuation schedules are those an aborted transaction goes back to.
func (r *Runtime) committedLocked() {
	r.cutTasksLocked()
	r.promoteTasksLocked()
}
