package runtime

import (
	"slices"
	"unicode/utf16"
)

// A streams group (KIP-1071) compares the topology each member declares with the group's,
// field by field and in order, and refuses a member whose declaration differs ("Topology
// updates are not supported yet."). For a kstream member to join a group with Kafka Streams
// members, it must list what Java lists in Java's order. Most lists Java sorts; the
// co-partition groups it does not: they are java.util.HashSets, iterated as they are. The
// functions here reproduce that order (Java 17's HashMap, as Kafka Streams 4.4 builds the
// sets in InternalTopologyBuilder.copartitionGroups).

// CopartitionSource is a source node of a co-partitioned operand: its name (Kafka Streams'
// name for it, such as KSTREAM-SOURCE-0000000000) and the full names of the topics it reads,
// in the order it was given them.
type CopartitionSource struct {
	Node   string
	Topics []string
}

// JavaCopartitionGroups returns the co-partition groups of groups (each the source nodes of
// one join's operands, in operand order) as Kafka Streams lists them: groups that share a
// topic merged as Java merges them, the groups in the order of Java's HashSet of groups,
// and the topics of each in the order of its HashSet. Topology.CopartitionGroups is made
// with it, so that a streams-group declaration is Java's byte for byte.
func JavaCopartitionGroups(groups [][]CopartitionSource) [][]string {
	type set struct{ topics []string } // in insertion order
	byTopic := map[string]*set{}
	var keys []string // byTopic's keys in insertion order (Java's LinkedHashMap)
	for _, g := range groups {
		// The group's node names, a HashSet; its topics, a HashSet filled in node order.
		var names []string
		topicsOf := map[string][]string{}
		for _, src := range g {
			if _, ok := topicsOf[src.Node]; !ok {
				names = append(names, src.Node)
			}
			topicsOf[src.Node] = append(topicsOf[src.Node], src.Topics...)
		}
		var topics []string
		for _, n := range javaHashSetOrder(names) {
			for _, t := range topicsOf[n] {
				if !slices.Contains(topics, t) {
					topics = append(topics, t)
				}
			}
		}
		topics = javaHashSetOrder(topics)
		// The set of the first of its topics already in a group takes them all.
		var into *set
		for _, t := range topics {
			if into = byTopic[t]; into != nil {
				break
			}
		}
		if into == nil {
			into = &set{}
		}
		for _, t := range topics {
			if !slices.Contains(into.topics, t) {
				into.topics = append(into.topics, t)
			}
		}
		for _, t := range topics {
			if _, ok := byTopic[t]; !ok {
				keys = append(keys, t)
			}
			byTopic[t] = into
		}
	}
	// new HashSet<>(map.values()): sized for every value, duplicates included; a set's hash
	// is the sum of its elements' hashes.
	var uniq []*set
	for _, k := range keys {
		if s := byTopic[k]; !slices.Contains(uniq, s) {
			uniq = append(uniq, s)
		}
	}
	hashes := make([]int32, len(uniq))
	for i, s := range uniq {
		for _, t := range s.topics {
			hashes[i] += javaStringHash(t)
		}
	}
	out := make([][]string, 0, len(uniq))
	for _, j := range javaOrder(hashes, javaTableSize(len(keys), true)) {
		out = append(out, javaHashSetOrder(uniq[j].topics))
	}
	return out
}

// JavaHashOrder returns the indexes of keys in the order in which a java.util.HashMap (or
// HashSet) iterates them when they were inserted in the order given: by bucket, and in
// insertion order within a bucket (a resize keeps that order). copied sizes the table as
// the HashSet(Collection) constructor does; otherwise it grows by insertion from 16.
// Buckets that Java would turn into trees (8 keys in one bucket of a table of 64 or more)
// are not modelled. Describe prints sets in this order, as Java does.
func JavaHashOrder(keys []string, copied bool) []int {
	hashes := make([]int32, len(keys))
	for i, k := range keys {
		hashes[i] = javaStringHash(k)
	}
	return javaOrder(hashes, javaTableSize(len(keys), copied))
}

// javaHashSetOrder returns names, added in this order to a HashSet that grows by insertion,
// in the order the set iterates them. Duplicates must not be given.
func javaHashSetOrder(names []string) []string {
	out := make([]string, len(names))
	for i, j := range JavaHashOrder(names, false) {
		out[i] = names[j]
	}
	return out
}

// javaTableSize is the table size of a HashMap holding n keys: as the HashSet(Collection)
// constructor sizes it (tableSizeFor(max(n/.75f + 1, 16))) if copied, else grown by
// insertion from 16 (doubled whenever more than three quarters full).
func javaTableSize(n int, copied bool) int {
	size := 16
	if copied {
		for size < n*4/3+1 {
			size *= 2
		}
		return size
	}
	for n > size*3/4 {
		size *= 2
	}
	return size
}

// javaOrder returns the indexes of keys with the given hash codes in the order a HashMap of
// size buckets iterates them, when they were inserted in index order.
func javaOrder(hashes []int32, size int) []int {
	order := make([]int, len(hashes))
	for i := range order {
		order[i] = i
	}
	bucket := func(i int) int {
		h := uint32(hashes[i])
		return int((h ^ h>>16) & uint32(size-1))
	}
	slices.SortStableFunc(order, func(a, b int) int { return bucket(a) - bucket(b) })
	return order
}

// javaStringHash is java.lang.String.hashCode.
func javaStringHash(s string) int32 {
	var h int32
	for _, c := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(c)
	}
	return h
}
