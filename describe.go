package kstream

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode/utf16"

	"github.com/kstream-go/kstream/internal/runtime"
)

// Describe returns the sub-topologies with their sources, processors and sinks, as Kafka
// Streams' TopologyDescription.toString prints them: for a topology that Java can build
// too, with the same operator and store names and topology.optimization=all (the
// repartition topics that kstream shares are those Java's optimizer merges), the text is
// the same byte for byte.
//
// Java's text depends on more than the graph: the nodes of a sub-topology are listed by the
// size of the sub-tree below them, then by name, and the successors and predecessors of a
// node in an order that comes from the order in which Java's describe() connects them (a
// HashMap of the node names) and the sub-tree sizes at that moment. Describe computes it the
// same way, so that the two outputs can be diffed.
func (t *Topology) Describe() string {
	var sb strings.Builder
	sb.WriteString("Topologies:\n ")
	for i, sub := range t.subs {
		sb.WriteString("  ")
		if d := globalStoreOf(sub); d != nil {
			describeGlobal(&sb, i, sub, d)
			continue
		}
		fmt.Fprintf(&sb, "Sub-topology: %d\n", i)
		for _, dn := range describeSub(sub) {
			sb.WriteString("    ")
			sb.WriteString(dn.String())
			sb.WriteString("\n")
		}
		sb.WriteString("\n")
	}
	return sb.String()
}

// String is Describe.
func (t *Topology) String() string { return t.Describe() }

// describeGlobal writes a global store's sub-topology, which Java prints without a blank
// line after it (TopologyDescription.GlobalStore.toString).
func describeGlobal(sb *strings.Builder, id int, sub []*node, d *storeDef) {
	var src, proc *node
	for _, n := range sub {
		if n.kind == kindSource {
			src = n
		} else {
			proc = n
		}
	}
	fmt.Fprintf(sb, "Sub-topology: %d for global store (will not generate tasks)\n", id)
	fmt.Fprintf(sb, "    Source: %s (topics: [%s])\n      --> %s\n", src.name, d.sourceTopic, proc.name)
	fmt.Fprintf(sb, "    Processor: %s (stores: [%s])\n      --> none\n      <-- %s\n", proc.name, d.name, src.name)
}

// dnode is a node of Java's TopologyDescription (InternalTopologyBuilder.AbstractNode).
type dnode struct {
	n *node
	// size is the size of the sub-tree rooted at the node, counting a node once per path
	// that reaches it, as Java's updateSize does.
	size         int
	preds, succs treeSet
}

// describeSub returns the nodes of sub in Java's order, connected as Java's
// InternalTopologyBuilder.describeSubtopology connects them. sub is in the order Java adds
// the nodes to its topology builder.
func describeSub(sub []*node) []*dnode {
	names := make([]string, len(sub))
	byNode := make(map[*node]*dnode, len(sub))
	for i, n := range sub {
		names[i] = n.name
		byNode[n] = &dnode{n: n, size: 1}
	}
	// Java iterates a HashMap of the nodes by name and connects each node to its
	// predecessors, updating the sizes as it goes; the successor and predecessor sets are
	// TreeSets whose order depends on the sizes at each insertion.
	for _, i := range runtime.JavaHashOrder(names, false) {
		dn := byNode[sub[i]]
		for i, p := range dn.n.parents {
			pd := byNode[p]
			if pd == nil || slices.Contains(dn.n.parents[:i], p) { // a merge of a stream with itself
				continue
			}
			dn.preds.add(pd)
			pd.succs.add(dn)
			updateSize(pd, dn.size)
		}
	}
	out := make([]*dnode, 0, len(sub))
	for _, n := range sub {
		out = append(out, byNode[n])
	}
	sort.Slice(out, func(i, j int) bool { return compareDnodes(out[i], out[j]) < 0 })
	return out
}

func updateSize(dn *dnode, delta int) {
	dn.size += delta
	for _, p := range dn.preds.items() {
		updateSize(p, delta)
	}
}

// compareDnodes is Java's NodeComparator: larger sub-trees first, then by name.
func compareDnodes(a, b *dnode) int {
	if a == b {
		return 0
	}
	if a.size != b.size {
		return b.size - a.size
	}
	return javaCompareStrings(a.n.name, b.n.name)
}

// String is the node as Java's Source, Processor and Sink toString print it.
func (dn *dnode) String() string {
	n := dn.n
	switch n.kind {
	case kindSource:
		if n.pattern != nil { // Java prints the Pattern itself, without brackets
			return fmt.Sprintf("Source: %s (topics: %s)\n      --> %s", n.name, n.pattern.String(), dn.succs.names())
		}
		return fmt.Sprintf("Source: %s (topics: [%s])\n      --> %s", n.name, javaSetString(n.topics), dn.succs.names())
	case kindSink:
		if n.sinkTopic != "" {
			return fmt.Sprintf("Sink: %s (topic: %s)\n      <-- %s", n.name, n.sinkTopic, dn.preds.names())
		}
		return fmt.Sprintf("Sink: %s (extractor class: %s)\n      <-- %s", n.name, n.describe, dn.preds.names())
	default:
		stores := make([]string, len(n.stores))
		for i, d := range n.stores {
			stores[i] = d.name
		}
		return fmt.Sprintf("Processor: %s (stores: [%s])\n      --> %s\n      <-- %s", n.name, javaSetString(stores), dn.succs.names(), dn.preds.names())
	}
}

// javaSetString is the text of a java.util.HashSet copied from a collection holding ss in
// this order (Java prints the topics of a source and the stores of a processor that way).
func javaSetString(ss []string) string {
	var sb strings.Builder
	for i, j := range runtime.JavaHashOrder(ss, true) {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(ss[j])
	}
	return sb.String()
}

// javaCompareStrings is java.lang.String.compareTo: UTF-16 code units in order.
func javaCompareStrings(a, b string) int {
	ua, ub := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
	for i := 0; i < len(ua) && i < len(ub); i++ {
		if ua[i] != ub[i] {
			return int(ua[i]) - int(ub[i])
		}
	}
	return len(ua) - len(ub)
}

// treeSet models a java.util.TreeSet of description nodes ordered by NodeComparator: a
// red-black tree with the textbook insertion (Cormen et al.), which TreeMap uses too. The
// comparator reads sub-tree sizes that change after insertion, so the order of a set depends
// on the shape of its tree, which is why it is modelled rather than sorted.
type treeSet struct {
	root *rbNode
}

type rbNode struct {
	key                 *dnode
	left, right, parent *rbNode
	black               bool
}

func (s *treeSet) add(k *dnode) {
	t := s.root
	if t == nil {
		s.root = &rbNode{key: k, black: true}
		return
	}
	var parent *rbNode
	cmp := 0
	for t != nil {
		parent = t
		cmp = compareDnodes(k, t.key)
		switch {
		case cmp < 0:
			t = t.left
		case cmp > 0:
			t = t.right
		default:
			return
		}
	}
	e := &rbNode{key: k, parent: parent}
	if cmp < 0 {
		parent.left = e
	} else {
		parent.right = e
	}
	s.fixAfterInsertion(e)
}

func (s *treeSet) items() []*dnode {
	var out []*dnode
	var walk func(*rbNode)
	walk = func(x *rbNode) {
		if x == nil {
			return
		}
		walk(x.left)
		out = append(out, x.key)
		walk(x.right)
	}
	walk(s.root)
	return out
}

// names is Java's nodeNames: the names in set order, or "none".
func (s *treeSet) names() string {
	items := s.items()
	if len(items) == 0 {
		return "none"
	}
	names := make([]string, len(items))
	for i, dn := range items {
		names[i] = dn.n.name
	}
	return strings.Join(names, ", ")
}

func parentOf(x *rbNode) *rbNode {
	if x == nil {
		return nil
	}
	return x.parent
}

func leftOf(x *rbNode) *rbNode {
	if x == nil {
		return nil
	}
	return x.left
}

func rightOf(x *rbNode) *rbNode {
	if x == nil {
		return nil
	}
	return x.right
}

func isRed(x *rbNode) bool { return x != nil && !x.black }

func setBlack(x *rbNode, black bool) {
	if x != nil {
		x.black = black
	}
}

func (s *treeSet) fixAfterInsertion(x *rbNode) {
	x.black = false
	for x != nil && x != s.root && isRed(x.parent) {
		if parentOf(x) == leftOf(parentOf(parentOf(x))) {
			y := rightOf(parentOf(parentOf(x)))
			if isRed(y) {
				setBlack(parentOf(x), true)
				setBlack(y, true)
				setBlack(parentOf(parentOf(x)), false)
				x = parentOf(parentOf(x))
			} else {
				if x == rightOf(parentOf(x)) {
					x = parentOf(x)
					s.rotateLeft(x)
				}
				setBlack(parentOf(x), true)
				setBlack(parentOf(parentOf(x)), false)
				s.rotateRight(parentOf(parentOf(x)))
			}
		} else {
			y := leftOf(parentOf(parentOf(x)))
			if isRed(y) {
				setBlack(parentOf(x), true)
				setBlack(y, true)
				setBlack(parentOf(parentOf(x)), false)
				x = parentOf(parentOf(x))
			} else {
				if x == leftOf(parentOf(x)) {
					x = parentOf(x)
					s.rotateRight(x)
				}
				setBlack(parentOf(x), true)
				setBlack(parentOf(parentOf(x)), false)
				s.rotateLeft(parentOf(parentOf(x)))
			}
		}
	}
	s.root.black = true
}

func (s *treeSet) rotateLeft(p *rbNode) {
	if p == nil {
		return
	}
	r := p.right
	p.right = r.left
	if r.left != nil {
		r.left.parent = p
	}
	r.parent = p.parent
	switch {
	case p.parent == nil:
		s.root = r
	case p.parent.left == p:
		p.parent.left = r
	default:
		p.parent.right = r
	}
	r.left = p
	p.parent = r
}

func (s *treeSet) rotateRight(p *rbNode) {
	if p == nil {
		return
	}
	l := p.left
	p.left = l.right
	if l.right != nil {
		l.right.parent = p
	}
	l.parent = p.parent
	switch {
	case p.parent == nil:
		s.root = l
	case p.parent.right == p:
		p.parent.right = l
	default:
		p.parent.left = l
	}
	l.right = p
	p.parent = l
}
