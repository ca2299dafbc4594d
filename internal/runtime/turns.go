package runtime

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Tasks run their turns on their own goroutines without holding up the poll loop, so that a
// slow task (an operator that sleeps, calls a slow service, a loaded store) does not hold
// the other tasks of the instance to its pace.
//
// The loop launches a turn for every task that is idle (no turn running) and may process a
// record or has a punctuator due, and goes back to polling at once. The turns launched
// together run one after the other on one goroutine, and each that has not begun a
// millisecond later on a goroutine of its own (launchLocked): short turns cost one goroutine
// wake-up and send their outputs together, and a slow turn holds the others that long at
// most. While a turn runs
// (taskRun.busy), its goroutine alone touches the task: its partition group, stores,
// processors and positions. Records fetched for a busy task wait in its inbox (touched
// under Runtime.mu only) and join its partition group when the turn has ended. A task that
// falls behind (its turns leave records behind) has its partitions paused once its backlog
// and inbox exceed Config.BufferedRecordsPerPartition (flowControlLocked): it stops
// fetching instead of holding anyone up. For a task that keeps up, the loop stops polling
// while it has a buffer's worth waiting in its inbox (holdLocked), as it did when it waited
// for every turn. A turn that ends kicks the loop out of its poll when the task has more to
// do, so that its next turn starts at once.
//
// Everything that needs every task at rest (a commit, whose offsets must cover only
// processed records and, under exactly-once, whose transaction must hold every output of
// what it commits; the group's callbacks; an abort; a fence; shutdown) first quiesces the
// turns (quiesceLocked): it asks them to stop at the next record boundary and waits for
// them. A slow task so delays a commit by one record's processing at most. Kafka Streams'
// StreamThread runs its tasks one after the other in one thread; a slow task there holds
// up its whole thread in the same way this loop did before: here the tasks of an instance
// are independent, as if each had a thread of its own.
//
// Under exactly-once a turn is launched only in an open transaction (processLocked begins
// it before launching) or while one ends, its outputs then held for the next one
// (eos_async.go); a transaction is cut only after quiescing: every record a transaction
// commits the offsets of was produced in it, and no output is produced outside one.

// inboxed is a fetch of one of a busy task's partitions, kept until its turn ends.
type inboxed struct {
	p  kgo.FetchTopicPartition
	at time.Time // when it was polled
}

// launchLocked starts a turn of every task of batch (each idle, none twice). The turns run
// one after the other on one goroutine, and those not begun turnShareAfter after the
// launch each on a goroutine of its own: a slow turn holds the turns queued behind it that
// long at most. r.mu must be held.
//
// One goroutine rather than one per turn, because the turns of a task that keeps up are
// short (the records of one fetch): one after the other they cost one goroutine wake-up
// instead of one each, and their outputs reach the producer together, in one produce request
// instead of one per task when the producer does not linger (Config.Linger = NoLinger). With
// a goroutine each, a paced one-hop pipeline at 10k records/s over 6 partitions sent 4.5 times
// as many produce requests as a plain consume-produce loop, and the records' produce-to-ack
// time and end-to-end latency grew with them (issue 15).
func (r *Runtime) launchLocked(batch []*taskRun, now time.Time, budget time.Duration) {
	if len(batch) == 0 {
		return
	}
	for _, t := range batch {
		r.prepareTurnLocked(t)
	}
	if len(batch) == 1 {
		go r.turn(batch[0], now, budget)
		return
	}
	// claimed[i] is set by whoever runs the turn of batch[i]: the goroutine of the batch, or
	// the timer that gives each turn not begun yet a goroutine of its own.
	claimed := make([]atomic.Bool, len(batch))
	share := time.AfterFunc(turnShareAfter, func() {
		for i, t := range batch {
			if claimed[i].CompareAndSwap(false, true) {
				go r.turn(t, now, budget)
			}
		}
	})
	go func() {
		for i, t := range batch {
			if claimed[i].CompareAndSwap(false, true) {
				r.turn(t, now, budget)
			}
		}
		share.Stop()
	}()
}

// turnShareAfter is how long the turns launched together wait for the goroutine running them
// one after the other before each gets one of its own (see launchLocked). Turns of tasks that
// keep up take far less; a task that falls behind has a turn as long as the turn budget.
const turnShareAfter = time.Millisecond

// prepareTurnLocked marks t busy for a turn about to be launched. r.mu must be held; t must
// be idle.
func (r *Runtime) prepareTurnLocked(t *taskRun) {
	if t.launchSize == nil {
		t.launchSize = map[topicPartition]int{}
		t.leftover = map[topicPartition]int{}
	}
	clear(t.launchSize)
	for tp := range t.parts {
		// What its last turn left behind: a task that keeps up left nothing, and the
		// records buffered since are its next turn's (see flowControlLocked).
		t.launchSize[tp] = t.leftover[tp]
	}
	t.applyResumedLocked()
	t.launchedAt = time.Now()
	t.busy.Store(true)
	r.turns.Add(1)
}

// turn runs a turn of t, which prepareTurnLocked marked busy, and marks it idle again.
func (r *Runtime) turn(t *taskRun, now time.Time, budget time.Duration) {
	defer r.turns.Done()
	if err := t.run(now, budget, &r.preempt); err != nil {
		r.fail(err)
	}
	// What the turn left behind (its budget ran out, or its group was not ready); but a
	// turn stopped early for a commit says nothing of whether the task keeps up.
	note := !r.preempt.Load() || time.Since(now) >= budget/2
	paused := false
	for tp, pos := range t.parts {
		if note {
			t.leftover[tp] = t.group.Size(tp.topic, tp.partition)
		}
		paused = paused || pos.paused.Load()
	}
	t.turnProcessed.Store(t.processed)
	// Records left (the turn's budget ran out) or waiting in its inbox, a partition
	// paused (it may be resumed now), or a time the loop must wake at for the task (a
	// punctuation, an idle or lag wait, which the loop's wait left out while the turn
	// ran): the loop looks at the task again at once. Otherwise the next fetch wakes
	// the loop.
	more := t.ready || t.inboxed.Load() || paused || t.lagWait || !t.idleWake.IsZero() || !t.task.NextPunctuation().IsZero() || t.asyncCompleted()
	t.busy.Store(false)
	if more {
		r.kick.kick()
	}
}

// quiesceLocked stops every running turn at its next record boundary and waits for it, then
// moves the records waiting in the tasks' inboxes to their partition groups: every task is
// then at rest, and what it holds is in its group. r.mu must be held.
func (r *Runtime) quiesceLocked() {
	r.preempt.Store(true)
	r.turns.Wait()
	r.preempt.Store(false)
	for _, t := range r.tasks {
		t.applyResumedLocked()
		r.drainInboxLocked(t)
	}
}

// applyResumedLocked notes, for the partitions of t, idle, resumed during its last turn,
// that the lag known from their last fetch is as fresh as their resumption (see
// flowControlLocked).
func (t *taskRun) applyResumedLocked() {
	for _, rs := range t.resumed {
		if pos := t.parts[rs.tp]; pos != nil && pos.fetched && rs.at.After(pos.fetchedAt) {
			pos.fetchedAt = rs.at
		}
	}
	t.resumed = t.resumed[:0]
}

// resumedAt is a partition resumed at at while its task's turn ran.
type resumedAt struct {
	tp topicPartition
	at time.Time
}

// addFetchedLocked hands the records of a fetch of partition p to its task t: to its
// partition group when t is idle, to its inbox while a turn of t runs. r.mu must be held.
func (r *Runtime) addFetchedLocked(t *taskRun, p kgo.FetchTopicPartition, now time.Time) {
	if t.busy.Load() {
		t.inbox = append(t.inbox, inboxed{p: p, at: now})
		t.inboxed.Store(true)
		if t.inboxN == nil {
			t.inboxN = map[topicPartition]int{}
		}
		t.inboxN[topicPartition{p.Topic, p.Partition}] += len(p.Records)
		return
	}
	r.drainInboxLocked(t) // older records first
	r.groupAddLocked(t, p, now)
}

// drainInboxLocked moves the records waiting in the inbox of t, idle, to its partition
// group. r.mu must be held.
func (r *Runtime) drainInboxLocked(t *taskRun) {
	if len(t.inbox) == 0 || t.busy.Load() {
		return
	}
	inbox := t.inbox
	t.inbox = nil
	t.inboxed.Store(false)
	clear(t.inboxN)
	for _, e := range inbox {
		if r.fatal() != nil {
			return
		}
		r.groupAddLocked(t, e.p, e.at)
	}
}

// dropInboxLocked forgets what the inbox of t holds of the partitions parts (nil: all).
func (t *taskRun) dropInboxLocked(parts map[topicPartition]bool) {
	if parts == nil {
		t.inbox = nil
		t.inboxed.Store(false)
		clear(t.inboxN)
		return
	}
	t.inbox = slices.DeleteFunc(t.inbox, func(e inboxed) bool { return parts[topicPartition{e.p.Topic, e.p.Partition}] })
	t.inboxed.Store(len(t.inbox) > 0)
	for tp := range parts {
		delete(t.inboxN, tp)
	}
}

// groupAddLocked notes what the fetch p tells of its partition's lag and buffers its
// records (transaction markers left out) in the partition group of t, idle.
func (r *Runtime) groupAddLocked(t *taskRun, p kgo.FetchTopicPartition, now time.Time) {
	tp := topicPartition{p.Topic, p.Partition}
	pos := t.parts[tp]
	if pos == nil {
		return // revoked since it was fetched
	}
	r.noteFetch(pos, p.FetchPartition, now)
	recs := p.Records
	if slices.ContainsFunc(recs, isControl) {
		// Transaction markers are not records of the topic.
		recs = slices.DeleteFunc(slices.Clone(recs), isControl)
	}
	if len(recs) == 0 {
		return
	}
	if _, err := t.group.Add(p.Topic, p.Partition, recs); err != nil {
		r.fail(err)
	}
}

// buffered is the number of records of partition tp that t holds as flow control counts
// them (flowControlLocked). A task that waits (its group is not ready) holds what its group
// and its inbox hold. A task whose turn runs, or that runs next, and that fell behind (its
// last turn left records behind, see launchLocked) holds those and its inbox. One that keeps
// up (its last turn left nothing: it processes in each turn what arrived during the one
// before) counts as holding nothing until its inbox grows beyond inboxSlack buffers' worth:
// the loop stops polling instead while it has a buffer's worth waiting (holdLocked), as
// pausing its partitions would stop and restart their fetching at every turn (it halved the
// passthrough's throughput: a partition resumed joins only the next fetch request, which may
// wait for the one in flight up to the fetch wait). r.mu must be held.
func (t *taskRun) buffered(tp topicPartition, busy bool, limit int) int {
	inbox := t.inboxN[tp]
	var left int
	switch {
	case busy:
		left = t.launchSize[tp]
	case t.ready:
		left = t.leftover[tp]
	default:
		return t.held(tp)
	}
	if left == 0 && inbox <= inboxSlack*limit {
		return 0
	}
	return left + inbox
}

// held is the number of records of partition tp that t, idle, holds in its group and inbox.
// r.mu must be held.
func (t *taskRun) held(tp topicPartition) int {
	return t.inboxN[tp] + t.group.Size(tp.topic, tp.partition)
}

// inboxSlack bounds the inbox of a partition whose task's turn runs (see taskRun.buffered),
// in buffers' worth (Config.BufferedRecordsPerPartition).
const inboxSlack = 10

// holdLocked reports whether the loop should not poll until a turn ends: a task that keeps
// up (its last turn left nothing behind) and whose turn runs has more than a buffer's worth
// (Config.BufferedRecordsPerPartition) of a partition that is not paused waiting in its
// inbox. It then gets its next records from the next poll, as when the loop waited for
// every turn. A task that falls behind never holds the loop: its partitions are paused
// instead (flowControlLocked); nor does a turn for longer than a quarter of the turn
// budget (a long turn of a task that keeps up only just). It returns until when to hold.
// r.mu must be held.
func (r *Runtime) holdLocked() (bool, time.Time) {
	limit := r.cfg.BufferedRecordsPerPartition
	now := time.Now()
	var until time.Time
	for _, t := range r.tasks {
		if !t.busy.Load() {
			continue
		}
		end := t.launchedAt.Add(r.turnBudget() / 4)
		if !end.After(now) || (!until.IsZero() && !end.Before(until)) {
			continue
		}
		for tp, n := range t.inboxN {
			if pos := t.parts[tp]; n > limit && t.launchSize[tp] == 0 && pos != nil && !pos.paused.Load() {
				until = end
				break
			}
		}
	}
	return !until.IsZero(), until
}

// kicker cuts the loop's poll short when a turn ends, so that the task's next turn (and the
// records waiting in its inbox) need not wait for the poll's timeout.
type kicker struct {
	mu     sync.Mutex
	cancel context.CancelFunc // the poll in flight, nil if none
	kicked bool               // a turn ended while no poll was in flight
}

// kick ends the poll in flight, or makes the next one return at once.
func (k *kicker) kick() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cancel != nil {
		k.cancel()
		k.cancel = nil
		return
	}
	k.kicked = true
}

// pollContext is the context of the next poll, which waits at most wait (1 ms if a turn
// ended since the last poll: the poll returns what is buffered and does not wait), and the
// function to call when the poll returned.
func (k *kicker) pollContext(ctx context.Context, wait time.Duration) (context.Context, func()) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.kicked {
		k.kicked = false
		wait = min(wait, time.Millisecond)
	}
	pctx, cancel := context.WithTimeout(ctx, wait)
	k.cancel = cancel
	return pctx, func() {
		k.mu.Lock()
		k.cancel = nil
		k.mu.Unlock()
		cancel()
	}
}
