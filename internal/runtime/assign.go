package runtime

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/kstream-go/kstream/store"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The tasks a membership hands over (member.go): assigned partitions make tasks, restored
// in the background; revoked and lost ones close them.

func (r *Runtime) onAssigned(_ context.Context, cl *kgo.Client, assigned map[string][]int32) {
	if r.sessionLost.Swap(0) != 0 {
		r.log.Info("kstream: member of the group again", "app", r.cfg.ApplicationID)
	}
	if id, _ := cl.GroupMetadata(); id != "" {
		r.wantMu.Lock()
		r.liveID = id
		r.wantMu.Unlock()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.life.member.Store(true)
	r.quiesceLocked()
	if r.txnEndingLocked() {
		// An exactly-once transaction ends while the tasks go on (eos_async.go), and
		// the group let this assignment through during its end (endGrace). The
		// partitions revoked or lost meanwhile were set aside, to be dropped once it has
		// ended; they may be among those assigned now (a member that lost its session
		// gets its partitions back). Ending it first drops them before their new tasks
		// are made, as when the loop held mu for the whole end; otherwise the drop
		// closes the new tasks, whose partitions stay paused for a restore that never
		// ends, and the instance processes nothing more.
		r.awaitCommitNowLocked()
	}
	var created []string
	var restoring []*taskRun
	refused := map[string][]int32{}
	for topic, parts := range assigned {
		sub, ok := r.subOf(topic)
		if !ok {
			continue
		}
		for _, p := range parts {
			if n, ok := r.fixedCount(topic); ok && p >= n {
				// A new partition of a source of keyed state (a balancer of another version
				// assigned it): no task, no record of it processed; the topic watcher
				// stops the application (watch.go).
				refused[topic] = append(refused[topic], p)
				continue
			}
			id := TaskID{sub, p}
			t := r.tasks[id]
			if t == nil {
				st := r.topo.SubTopologies[sub]
				t = &taskRun{id: id, parts: map[topicPartition]*partPos{}, met: r.TaskMetrics(id), tracer: r.cfg.Tracer,
					labels: TaskLabels(r.labels, id), base: r.labels}
				t.group = NewPartitionGroup(r.groupConfig(t))
				r.tasks[id] = t
				created = append(created, id.String())
				if len(st.Stores) == 0 {
					task, err := st.NewTask(r, id, nil)
					if err != nil {
						r.fail(fmt.Errorf("kstream: creating task %s: %w", id, err))
						return
					}
					t.task = task
				} else {
					if r.standby.has(id) {
						// Stop following before restoring: the active task restores only
						// the tail written since the standby's last batch.
						r.standby.remove(id, SuspendPromoted)
					}
					restoring = append(restoring, t)
				}
			}
			tp := topicPartition{topic, p}
			t.parts[tp] = newPartPos()
			if r.met != nil {
				t.parts[tp].met = r.met.partition(id, tp)
			}
			t.group.AddPartition(topic, p)
			r.parts[tp] = t
		}
	}
	if len(refused) > 0 {
		cl.PauseFetchPartitions(refused)
		r.log.Warn("kstream: assigned new partitions of a source topic of keyed state; not processing them", "partitions", refused)
		r.checkTopicsSoon()
	}
	// Tasks with stores restore in the background, their input paused meanwhile, so that
	// the other tasks go on processing.
	for _, t := range restoring {
		cl.PauseFetchPartitions(t.partitionMap())
		prev := r.restorers[t.id]
		done := make(chan struct{})
		r.restorers[t.id] = done
		r.bg.Go(func() {
			if prev != nil {
				<-prev // a previous owner of the same stores is still restoring
			}
			r.startTask(t, cl)
			close(done)
			r.reconcileStandbys() // the task may have been revoked and be a standby now
		})
	}
	r.publishQueryLocked()
	r.publishTasksLocked()
	slices.Sort(created)
	r.log.Info("kstream: partitions assigned", "app", r.cfg.ApplicationID, "new_tasks", created, "restoring", len(restoring), "tasks", len(r.tasks))
	if len(restoring) > 0 {
		// As Kafka Streams: REBALANCING until the new active tasks are restored (StateInfo
		// names them).
		r.rebalancing("restoring active tasks")
	}
	r.maybeRunningLocked()
}

// startTask restores the stores of t and creates its task, then resumes its input on cl, the
// consumer that was assigned it (r.consumer may not be set yet when the first assignment
// comes, and is replaced after a fence). It runs on its own goroutine; if t was revoked
// meanwhile, it gives up quietly.
func (r *Runtime) startTask(t *taskRun, cl *kgo.Client) {
	st := r.topo.SubTopologies[t.id.SubTopology]
	ls, err := r.openStores(r.restoreCtx, t.id, st.Stores)
	if err != nil {
		if r.restoreCtx.Err() == nil && r.current(t) {
			r.fail(fmt.Errorf("kstream: task %s: %w", t.id, err))
			return
		}
		r.log.Info("kstream: restoration stopped (task revoked or shutting down)", "task", t.id.String(), "err", err)
		return
	}
	backends := make(map[string]store.Backend, len(ls))
	for name, s := range ls {
		backends[name] = s.Backend()
		if r.met != nil {
			backends[name] = &meteredBackend{b: backends[name], m: r.met.store(t.id, name)}
		}
	}
	task, err := st.NewTask(r, t.id, backends)
	if err != nil {
		r.fail(fmt.Errorf("kstream: creating task %s: %w", t.id, err))
		return
	}
	r.mu.Lock()
	if r.tasks[t.id] != t {
		r.mu.Unlock()
		if err := task.Close(); err != nil {
			r.log.Warn("kstream: closing a task revoked while restoring", "task", t.id.String(), "err", err)
		}
		return
	}
	t.task, t.stores = task, ls
	r.resizeStoreCachesLocked()
	parts := t.partitionMap()
	r.publishQueryLocked()
	r.publishTasksLocked()
	r.maybeRunningLocked()
	r.mu.Unlock()
	cl.ResumeFetchPartitions(parts)
	r.log.Info("kstream: task restored and running", "task", t.id.String())
}

// current reports whether t is still one of this instance's tasks.
func (r *Runtime) current(t *taskRun) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tasks[t.id] == t
}

func (t *taskRun) partitionMap() map[string][]int32 {
	m := map[string][]int32{}
	for tp := range t.parts {
		m[tp.topic] = append(m[tp.topic], tp.partition)
	}
	return m
}

func (r *Runtime) onRevoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	if len(revoked) == 0 {
		return
	}
	r.leftGroup("partitions revoked: waiting for the group's new assignment")
	if !r.lockOrDefer(revoked) {
		return
	}
	defer r.mu.Unlock()
	r.quiesceLocked()
	if r.fatal() == nil && r.fencedCause() == nil && !r.migrating.Load() {
		cctx, cancel := context.WithTimeout(r.prodCtx, r.cfg.CloseTimeout)
		if err := r.commitLocked(cctx); err != nil {
			r.log.Warn("kstream: commit before revocation failed; the new owner will reprocess", "app", r.cfg.ApplicationID, "err", err)
		}
		cancel()
	}
	r.dropLocked(revoked)
	r.revoked = true
	r.reconcileStandbysLocked()
}

func (r *Runtime) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	if len(lost) == 0 {
		return
	}
	r.log.Warn("kstream: partitions lost without a chance to commit; they are processed again from the last commit", "app", r.cfg.ApplicationID, "partitions", lost)
	r.leftGroup("partitions lost: rejoining the group")
	if !r.lockOrDefer(lost) {
		return
	}
	defer r.mu.Unlock()
	r.quiesceLocked()
	if r.sess != nil && r.inTxn {
		// The open transaction cannot commit any more; End aborts it.
		r.txnFailed.Store(true)
	}
	r.dropLocked(lost)
	r.revoked = true
	r.reconcileStandbysLocked()
}

// lockOrDefer takes mu for a revocation or loss of parts, unless an exactly-once commit
// ends its transaction meanwhile: then it sets parts aside (deferDrop) and reports false.
// Waiting for mu alone could deadlock: kgo's GroupTransactSession calls the revocation
// callbacks holding a lock that its End takes too, and the loop calls End holding mu; so
// the callback must not wait for mu once End may be running. It polls for mu instead, and
// gives up on it as soon as a transaction is ending.
func (r *Runtime) lockOrDefer(parts map[string][]int32) bool {
	for {
		if r.deferDrop(parts) {
			return false
		}
		if r.mu.TryLock() {
			return true
		}
		time.Sleep(time.Millisecond)
	}
}

// deferDrop sets partitions aside when an exactly-once commit is ending its transaction
// (the loop holds mu, and may wait for the group): the transaction then aborts, and the loop
// drops them once it has ended. It reports whether it did.
func (r *Runtime) deferDrop(parts map[string][]int32) bool {
	r.endMu.Lock()
	defer r.endMu.Unlock()
	if !r.ending {
		return false
	}
	r.txnFailed.Store(true)
	r.deferred = append(r.deferred, parts)
	return true
}

// dropDeferredLocked drops the partitions set aside while a transaction ended.
func (r *Runtime) dropDeferredLocked() {
	r.endMu.Lock()
	deferred := r.deferred
	r.deferred = nil
	r.endMu.Unlock()
	for _, parts := range deferred {
		r.dropLocked(parts)
		r.revoked = true
	}
	if len(deferred) > 0 {
		r.reconcileStandbysLocked()
	}
}

// dropLocked forgets partitions and closes the tasks left without any.
func (r *Runtime) dropLocked(parts map[string][]int32) {
	r.awaitCommitNowLocked() // its tail may write the stores of the tasks closed here
	var closed []string
	for topic, ps := range parts {
		for _, p := range ps {
			tp := topicPartition{topic, p}
			t := r.parts[tp]
			if t == nil {
				continue
			}
			if pos := t.parts[tp]; pos.paused.Load() {
				// kgo keeps a partition paused until it is resumed, also when it comes back
				// with a later assignment.
				r.unpause[tp.topic] = append(r.unpause[tp.topic], tp.partition)
			}
			if pos := t.parts[tp]; pos.met != nil {
				r.met.dropPartition(tp, pos.met)
			}
			delete(r.parts, tp)
			delete(t.parts, tp)
			t.dropInboxLocked(map[topicPartition]bool{tp: true})
			t.group.RemovePartition(tp.topic, tp.partition)
			if len(t.parts) == 0 {
				if t.task == nil {
					// Still restoring: startTask sees the task is gone and stops.
				} else if err := t.task.Close(); err != nil {
					r.log.Warn("kstream: closing task", "task", t.id.String(), "err", err)
				}
				r.taskClosedLocked(t)
				delete(r.tasks, t.id)
				closed = append(closed, t.id.String())
			}
		}
	}
	r.resizeStoreCachesLocked()
	r.publishQueryLocked()
	r.publishTasksLocked()
	slices.Sort(closed)
	r.log.Info("kstream: partitions revoked", "app", r.cfg.ApplicationID, "closed_tasks", closed, "tasks", len(r.tasks))
}
