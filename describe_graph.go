package kstream

import "github.com/kstream-go/kstream/internal/runtime"

// TopologyDescription is the structure of a topology, for tools that draw it: Kafka
// Streams' TopologyDescription (Topology.describe()), whose toString is [Topology.Describe].
type TopologyDescription struct {
	// Subtopologies are in the order Describe prints them; a global store's sub-topology
	// (Java's TopologyDescription.GlobalStore) is one of them, marked by its GlobalStore.
	Subtopologies []SubtopologyDescription
}

// SubtopologyDescription is one sub-topology: Kafka Streams' TopologyDescription.Subtopology.
type SubtopologyDescription struct {
	// ID is the number Describe prints; tasks of the sub-topology are "<ID>_<partition>".
	ID int
	// GlobalStore names the store of a global table's sub-topology, which generates no tasks
	// (Java's TopologyDescription.GlobalStore); "" otherwise.
	GlobalStore string
	// Nodes are in Describe's order: larger sub-trees first, then by name.
	Nodes []NodeDescription
}

// NodeKind is the kind of a topology node.
type NodeKind string

// The kinds of nodes, as Describe names them.
const (
	SourceNode    NodeKind = "source"
	ProcessorNode NodeKind = "processor"
	SinkNode      NodeKind = "sink"
)

// NodeDescription is one node of a sub-topology: Kafka Streams' TopologyDescription.Node
// with its Source, Processor and Sink views.
type NodeDescription struct {
	Name string
	Kind NodeKind
	// Topics are a source's topics (Source.topicSet); internal topics without the
	// application id prefix, as Describe prints them.
	Topics []string
	// Topic is a sink's fixed topic (Sink.topic); "" when a TopicNameExtractor picks it per
	// record (Extractor then describes it).
	Topic     string
	Extractor string
	// Stores are a processor's state stores (Processor.stores).
	Stores []string
	// Predecessors and Successors are node names, in Describe's order.
	Predecessors []string
	Successors   []string
}

// Description returns the structure of the topology (see [TopologyDescription]).
func (t *Topology) Description() TopologyDescription {
	var td TopologyDescription
	for i, sub := range t.subs {
		sd := SubtopologyDescription{ID: i}
		if d := globalStoreOf(sub); d != nil {
			sd.GlobalStore = d.name
			var src, proc *node
			for _, n := range sub {
				if n.kind == kindSource {
					src = n
				} else {
					proc = n
				}
			}
			if src != nil && proc != nil {
				sd.Nodes = []NodeDescription{
					{Name: src.name, Kind: SourceNode, Topics: []string{d.sourceTopic}, Successors: []string{proc.name}},
					{Name: proc.name, Kind: ProcessorNode, Stores: []string{d.name}, Predecessors: []string{src.name}},
				}
			}
			td.Subtopologies = append(td.Subtopologies, sd)
			continue
		}
		for _, dn := range describeSub(sub) {
			n := dn.n
			nd := NodeDescription{Name: n.name, Predecessors: dnodeNames(dn.preds.items()), Successors: dnodeNames(dn.succs.items())}
			switch n.kind {
			case kindSource:
				nd.Kind = SourceNode
				for _, j := range runtime.JavaHashOrder(n.topics, true) {
					nd.Topics = append(nd.Topics, n.topics[j])
				}
			case kindSink:
				nd.Kind = SinkNode
				nd.Topic = n.sinkTopic
				if n.sinkTopic == "" {
					nd.Extractor = n.describe
				}
			default:
				nd.Kind = ProcessorNode
				names := make([]string, len(n.stores))
				for i, d := range n.stores {
					names[i] = d.name
				}
				for _, j := range runtime.JavaHashOrder(names, true) {
					nd.Stores = append(nd.Stores, names[j])
				}
			}
			sd.Nodes = append(sd.Nodes, nd)
		}
		td.Subtopologies = append(td.Subtopologies, sd)
	}
	return td
}

func dnodeNames(dns []*dnode) []string {
	if len(dns) == 0 {
		return nil
	}
	out := make([]string, len(dns))
	for i, dn := range dns {
		out[i] = dn.n.name
	}
	return out
}
