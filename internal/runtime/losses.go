package runtime

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
)

// What operators lose: the records they drop (as late, or for a null key) and the final
// results they never emit. Unlike the Prometheus metrics, these counts are kept whether or
// not Config.Metrics is set: App.Stats, App.Status and the ops page show them.

// LostWindowExpired is the reason of a final result that was never emitted because its
// window expired from its store (its retention passed) before it closed: the label reason of
// kstream_operator_lost_results_total.
const LostWindowExpired = "window_expired"

// OperatorCountKey names one counter of [OperatorCounts].
type OperatorCountKey struct {
	Task     TaskID
	Operator string
	// Lost marks a count of final results never emitted; otherwise it counts input records
	// dropped.
	Lost   bool
	Reason string
}

// OperatorCount is one counter's value.
type OperatorCount struct {
	OperatorCountKey
	N int64
}

// OperatorCounts counts, by task, operator and reason, the records operators dropped and
// the final results they lost. An operator takes its counter once ([OperatorCounts.Counter])
// and adds to it with one atomic operation. It is safe for concurrent use; one table serves
// an application (all its tasks), from its compilation on.
type OperatorCounts struct {
	mu sync.Mutex
	m  map[OperatorCountKey]*atomic.Int64
}

// NewOperatorCounts returns an empty table.
func NewOperatorCounts() *OperatorCounts {
	return &OperatorCounts{m: map[OperatorCountKey]*atomic.Int64{}}
}

// Counter returns the counter of k, created (at zero) on first use.
func (c *OperatorCounts) Counter(k OperatorCountKey) *atomic.Int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.m[k]
	if n == nil {
		n = new(atomic.Int64)
		c.m[k] = n
	}
	return n
}

// Snapshot returns every counter that is not zero, by operator, then dropped before lost,
// then reason, then task.
func (c *OperatorCounts) Snapshot() []OperatorCount {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	out := make([]OperatorCount, 0, len(c.m))
	for k, n := range c.m {
		if v := n.Load(); v != 0 {
			out = append(out, OperatorCount{k, v})
		}
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b OperatorCount) int {
		if x := cmp.Compare(a.Operator, b.Operator); x != 0 {
			return x
		}
		if a.Lost != b.Lost {
			if a.Lost {
				return 1
			}
			return -1
		}
		if x := cmp.Compare(a.Reason, b.Reason); x != 0 {
			return x
		}
		if x := cmp.Compare(a.Task.SubTopology, b.Task.SubTopology); x != 0 {
			return x
		}
		return cmp.Compare(a.Task.Partition, b.Task.Partition)
	})
	return out
}
