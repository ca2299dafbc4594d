package runtime

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The instance's state is RUNNING exactly when three facts hold: the instance has started
// (global stores bootstrapped, the transactional producer initialized), it is a member of
// the group holding its latest assignment, and none of its active tasks restores. Each
// fact is kept here, and every event that can make the last of them true calls
// maybeRunningLocked, which derives the state from all three. Events that make one false
// (a revocation, a loss of partitions, a fence) set REBALANCING with the reason, which Status
// reports together with the time of the last state change, so that a state that lasts is
// explained.

// lifecycle holds the facts the state is derived from, and the time and reason of the
// current state.
type lifecycle struct {
	// started is set once Run has initialized everything that comes before processing,
	// and cleared while a fenced producer is replaced.
	started atomic.Bool
	// member is set when an assignment arrives and cleared when partitions are revoked or
	// lost (or a fenced producer is replaced): it says that the latest assignment is in
	// hand. A lost group session sets REBALANCING without clearing it: kgo rejoins by itself
	// (onAssigned follows), and the error may be polled after that rejoin; records fetched
	// without an error then end the REBALANCING it set (loop).
	member atomic.Bool

	mu    sync.Mutex
	since time.Time // when the state last changed
	// why says why the instance is not RUNNING (a pending rebalance, a start step...),
	// as set by the event that left RUNNING; Status refines it for restoring tasks.
	why string
}

// setState sets the state s, for the reason why (empty: none to tell).
func (r *Runtime) setState(s State, why string) {
	r.life.mu.Lock()
	old := State(r.state.Swap(int32(s)))
	if old != s {
		r.life.since = time.Now()
	}
	r.life.why = why
	r.life.mu.Unlock()
	if old == s {
		return
	}
	r.log.Info("kstream: state change", "app", r.cfg.ApplicationID, "from", old.String(), "to", s.String(), "reason", why)
	if r.cfg.OnState != nil {
		r.cfg.OnState(old, s)
	}
}

// rebalancing sets REBALANCING for the reason why unless the instance is closing (its
// state then moves to PENDING_SHUTDOWN and NOT_RUNNING, not back).
func (r *Runtime) rebalancing(why string) {
	if !r.closing.Load() {
		r.setState(StateRebalancing, why)
	}
}

// leftGroup notes that the latest assignment is no longer in hand (partitions revoked or
// lost, the session lost) and sets REBALANCING for the reason why.
func (r *Runtime) leftGroup(why string) {
	r.life.member.Store(false)
	r.rebalancing(why)
}

// maybeRunningLocked moves the state to RUNNING once the instance has started, holds its
// latest assignment, and no active task restores (as Kafka Streams stays in REBALANCING
// until its tasks are restored). r.mu must be held.
func (r *Runtime) maybeRunningLocked() {
	if r.closing.Load() || !r.life.started.Load() || !r.life.member.Load() {
		return
	}
	for _, t := range r.tasks {
		if t.task == nil {
			return
		}
	}
	r.setState(StateRunning, "")
}

// startedRunning notes that Run has initialized everything that comes before processing;
// an assignment that arrived meanwhile now makes the instance RUNNING.
func (r *Runtime) startedRunning() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.life.started.Store(true)
	if !r.life.member.Load() {
		r.rebalancing("waiting for the group's assignment")
		return
	}
	r.maybeRunningLocked()
}

// StateInfo is the instance's state, since when it has held, and why.
type StateInfo struct {
	State State
	// Since is when the state last changed (zero before Run).
	Since time.Time
	// Reason says why the instance is in this state when it is not RUNNING: the step of
	// the start it is at, the rebalance it waits for, the tasks that restore, the error
	// that stopped it. Empty when there is nothing to say.
	Reason string
}

// StateInfo returns the state, since when, and why.
func (r *Runtime) StateInfo() StateInfo {
	r.life.mu.Lock()
	si := StateInfo{State: State(r.state.Load()), Since: r.life.since, Reason: r.life.why}
	r.life.mu.Unlock()
	switch si.State {
	case StateRebalancing:
		if r.life.started.Load() && r.life.member.Load() {
			if ids := r.restoringTaskIDs(); len(ids) > 0 {
				si.Reason = restoringReason(ids)
			}
		}
	case StateError:
		if err := r.fatal(); err != nil {
			si.Reason = err.Error()
		}
	}
	return si
}

// restoringTaskIDs lists the active tasks whose stores restore, from the query snapshot.
func (r *Runtime) restoringTaskIDs() []TaskID {
	st := r.query.state.Load()
	if st == nil {
		return nil
	}
	var ids []TaskID
	for _, e := range st.active {
		if e.restoring && !slices.Contains(ids, e.run.id) {
			ids = append(ids, e.run.id)
		}
	}
	slices.SortFunc(ids, compareTaskIDs)
	return ids
}

// restoringReason says which tasks restore (the first few by name).
func restoringReason(ids []TaskID) string {
	const named = 5
	var b strings.Builder
	b.WriteString("restoring the stores of ")
	b.WriteString(strconv.Itoa(len(ids)))
	b.WriteString(" active task(s): ")
	for i, id := range ids[:min(len(ids), named)] {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(id.String())
	}
	if len(ids) > named {
		fmt.Fprintf(&b, " and %d more", len(ids)-named)
	}
	return b.String()
}
