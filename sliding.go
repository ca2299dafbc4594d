package kstream

import (
	"fmt"
)

// newSlidingAggregator returns the processor of an aggregation over sliding windows.
func newSlidingAggregator[K, V, VA any](t *task, n *node, a *windowAgg[K, V, VA], st *windowKV[K, VA]) (any, error) {
	return nil, fmt.Errorf("kstream: operator %s: sliding windows are not implemented yet", n.name)
}
