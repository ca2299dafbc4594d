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
	capacity := javaTableSizeFor(max(int(float32(len(keys))/0.75)+1, 16))
	bucket := func(s *set) int {
		var h int32
		for _, t := range s.topics {
			h += javaStringHash(t)
		}
		return javaBucket(h, capacity)
	}
	slices.SortStableFunc(uniq, func(a, b *set) int { return bucket(a) - bucket(b) })
	out := make([][]string, 0, len(uniq))
	for _, s := range uniq {
		out = append(out, javaHashSetOrder(s.topics))
	}
	return out
}

// javaHashSetOrder returns names in the order a java.util.HashSet holding them iterates
// them, when they were added in the order given to a set of the default capacity (16,
// doubled whenever it is more than three quarters full): by the bucket of each name's
// String.hashCode (spread as HashMap.hash spreads it), those of one bucket in the order
// given (a resize keeps it). Duplicates must not be given.
func javaHashSetOrder(names []string) []string {
	capacity := 16
	for len(names) > capacity*3/4 {
		capacity *= 2
	}
	out := slices.Clone(names)
	slices.SortStableFunc(out, func(a, b string) int {
		return javaBucket(javaStringHash(a), capacity) - javaBucket(javaStringHash(b), capacity)
	})
	return out
}

// javaStringHash is Java's String.hashCode of s.
func javaStringHash(s string) int32 {
	var h int32
	for _, c := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(c)
	}
	return h
}

// javaBucket is the bucket of a key with hash code h in a HashMap of capacity buckets.
func javaBucket(h int32, capacity int) int {
	u := uint32(h)
	return int((u ^ u>>16) & uint32(capacity-1))
}

// javaTableSizeFor is HashMap.tableSizeFor: the power of two at least n.
func javaTableSizeFor(n int) int {
	c := 1
	for c < n {
		c *= 2
	}
	return c
}
