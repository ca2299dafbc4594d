package runtime

import (
	"fmt"
	"maps"
)

// sourceIndex is what the instance reads: each sub-topology's source topics (the pattern
// sources resolved to the topics they match), the sub-topology of each topic, and the
// partition counts of the sources and internal topics. It is immutable: a pattern source
// that picks up a topic created since the start replaces it whole (pattern.go), so that the
// group's callbacks, the balancer, the topic watcher, the standbys and the queries, each on
// its own goroutine, read it without a lock (Runtime.sources).
type sourceIndex struct {
	// subs are the sources of each sub-topology, by id; a pattern source is left out.
	subs [][]Source
	// topicSub is the sub-topology reading each source topic; topicSubs the same as lists,
	// for the balancer.
	topicSub  map[string]int
	topicSubs map[string][]int
	// counts are the partition counts of the sources and internal topics; nil before
	// prepare.
	counts map[string]int32
	// copartitioned are the source topics that must be co-partitioned with others.
	copartitioned map[string]bool
}

// newSourceIndex indexes the sources of topo (its pattern sources left out) with counts.
func newSourceIndex(topo *Topology, counts map[string]int32) *sourceIndex {
	ix := &sourceIndex{subs: make([][]Source, len(topo.SubTopologies)), topicSub: map[string]int{},
		topicSubs: map[string][]int{}, counts: counts, copartitioned: map[string]bool{}}
	for i, st := range topo.SubTopologies {
		for _, src := range st.Sources {
			if src.Pattern != nil {
				continue
			}
			ix.subs[i] = append(ix.subs[i], src)
			ix.topicSub[src.Topic] = st.ID
			ix.topicSubs[src.Topic] = append(ix.topicSubs[src.Topic], st.ID)
		}
	}
	for _, g := range topo.CopartitionGroups {
		if len(g) > 1 {
			for _, t := range g {
				ix.copartitioned[t] = true
			}
		}
	}
	return ix
}

// with returns a copy of ix where sub-topology sub also reads src, a topic of n
// partitions, co-partitioned with others if copartitioned.
func (ix *sourceIndex) with(sub int, src Source, n int32, copartitioned bool) *sourceIndex {
	out := &sourceIndex{subs: make([][]Source, len(ix.subs)), topicSub: maps.Clone(ix.topicSub),
		topicSubs: maps.Clone(ix.topicSubs), counts: maps.Clone(ix.counts), copartitioned: maps.Clone(ix.copartitioned)}
	copy(out.subs, ix.subs)
	out.subs[sub] = append(append([]Source(nil), ix.subs[sub]...), src)
	out.topicSub[src.Topic] = sub
	out.topicSubs[src.Topic] = []int{sub}
	if out.counts == nil {
		out.counts = map[string]int32{}
	}
	out.counts[src.Topic] = n
	if copartitioned {
		out.copartitioned[src.Topic] = true
	}
	return out
}

// sources returns what the instance reads now (see sourceIndex).
func (r *Runtime) sources() *sourceIndex { return r.src.Load() }

// subOf returns the sub-topology reading source topic t.
func (r *Runtime) subOf(t string) (int, bool) {
	sub, ok := r.sources().topicSub[t]
	return sub, ok
}

// sourcesOnce returns the error of a topic that is a source of two sub-topologies of topo.
func sourcesOnce(topo *Topology) error {
	seen := map[string]int{}
	for _, st := range topo.SubTopologies {
		for _, src := range st.Sources {
			if src.Pattern != nil {
				continue
			}
			if prev, ok := seen[src.Topic]; ok && prev != st.ID {
				return fmt.Errorf("kstream: topic %q is a source of sub-topologies %d and %d", src.Topic, prev, st.ID)
			}
			seen[src.Topic] = st.ID
		}
	}
	return nil
}
