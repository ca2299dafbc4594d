package runtime

import "time"

// What event-time alignment (package kstream's align.go) asks of the runtime: which
// sub-topology writes a repartition topic and how many tasks it has, and whether a task is
// caught up with its input.

// Upstream implements TaskEnv.
func (r *Runtime) Upstream(topic string) (sub int, tasks, partitions int32, ok bool) {
	ix := r.sources()
	if ix.counts == nil {
		return 0, 0, 0, false
	}
	for _, it := range r.topo.InternalTopics {
		if it.Name != topic {
			continue
		}
		for _, src := range ix.subs[it.Writer] {
			tasks = max(tasks, ix.counts[src.Topic])
		}
		return it.Writer, tasks, ix.counts[topic], tasks > 0 && ix.counts[topic] > 0
	}
	return 0, 0, 0, false
}

// Holding implements TaskEnv.
func (r *Runtime) Holding() bool { return r.held.on.Load() }

// CaughtUp implements TaskEnv. It runs on the task's goroutine, as lagOf does.
func (r *Runtime) CaughtUp(id TaskID) bool {
	t := r.tasks[id]
	if t == nil || t.group == nil || t.group.Buffered() > 0 {
		return false
	}
	now := time.Now()
	for tp := range t.parts {
		// What PartitionGroup.Ready knows of the lag: from the last fetch, or, for a
		// partition nothing was fetched from, the broker's answer (asked in the background).
		if lag, known := r.lagOf(t, tp, now); !known || lag > 0 {
			return false
		}
	}
	return true
}
