package kstream

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"

	"github.com/kstream-go/kstream/internal/runtime"
	"github.com/kstream-go/kstream/store"
)

// Builder collects the sources, operators and sinks of a topology. Create one with
// [NewBuilder], add sources with [Stream] or [StreamTopics], chain operators, then pass it to
// [New] (or call [Builder.Build] to inspect it). A Builder is not safe for concurrent use.
type Builder struct {
	stores     map[string]*storeDef
	storeOrder []*storeDef
	// nodes are in the order Kafka Streams adds them to its topology builder (creation
	// order, except that a shared repartition follows the node it repartitions; see
	// repartitionForKey): Describe and the sub-topology numbering depend on it.
	nodes    []*node
	names    map[string]*node
	internal []runtime.InternalTopic
	// copart are the co-partitioned operands of the joins; their source topics are
	// resolved at Build, when every shared repartition is in place.
	copart [][]*node
	errs   []error
	// index is Kafka Streams' name counter (InternalStreamsBuilder.index): every generated
	// operator name takes the next value, and some operators take values they do not
	// show, so that generated names are those Java gives the same topology.
	index int
	// joinRepartitions are the repartitions made by unnamed stream-table joins, by the
	// stream node they repartition (a KStream[K, V]): further unnamed joins of that stream
	// share them, as Java's repartitionForJoin does.
	joinRepartitions map[*node]any
	// sharedChecks report, at Build, shared repartitions that no sharer gave serdes.
	sharedChecks []func() error
	// internalLike maps an internal topic to the node whose source topics give its partition
	// count (the foreign-key join's topics; runtime.InternalTopic.PartitionsOf).
	internalLike map[string]*node
	// internalOps names, for the repartition topics made for an operator (repartitionForKey),
	// that operator as error messages do ("ToTable \"store\"", "Join"): the explicit-naming
	// check (naming.go) says how to name them.
	internalOps map[string]string
}

// NewBuilder returns an empty topology builder.
func NewBuilder() *Builder {
	return &Builder{names: map[string]*node{}, stores: map[string]*storeDef{}, joinRepartitions: map[*node]any{}, internalOps: map[string]string{}}
}

type nodeKind int

const (
	kindSource nodeKind = iota
	kindProcessor
	kindSink
)

// node is the type-erased view of one operator. Its typed behaviour lives in the closures
// set by the generic operator functions.
type node struct {
	id       int
	name     string
	kind     nodeKind
	parents  []*node
	children []*node

	// Sources.
	topics []string
	// pattern, for a source made by StreamPattern (topics is then empty), matches the
	// topics it reads.
	pattern   *regexp.Regexp
	reset     OffsetReset
	internal  bool
	extractor TimestampExtractor // nil: Config.DefaultTimestampExtractor
	// Sinks.
	sinkTopic string // fixed topic, or "" for a topic chosen per record
	// checks prepare the serdes of a sink with a fixed topic at start (startChecks).
	checks []startCheck
	// stores are the state stores this node uses.
	stores []*storeDef
	// globals are the global stores this node reads. They are not listed by Describe (as
	// in Kafka Streams) and do not tie the node to their sub-topology.
	globals []*storeDef
	// global marks the source and processor of a global table.
	global bool
	// describe is extra text for Describe (e.g. the topic extractor).
	describe string

	// What Kafka Streams' repartition optimization needs to know of the node (see
	// repartitionForKey): whether it may change keys (SelectKey, Map, FlatMap, Process) or
	// values (MapValues, FlatMapValues, Process), or merges streams.
	keyChanging, valueChanging, merge bool
	// shared is the repartition that every key-dependent operator downstream of this
	// key-changing (or merge) node shares: a *repartition[K, V].
	shared any
	// sharedOf is set on the source of a shared repartition: the node it repartitions.
	sharedOf *node
	// relaxedJoin marks a left join, which takes records with a null key (KIP-962); a
	// repartition with one downstream keeps null keys (repartitionKeeps).
	relaxedJoin bool
	// repSource is set on the filter node of a repartition: the repartition's source.
	// keepNullKeys is set on it at Build when a left join is downstream of that source.
	repSource    *node
	keepNullKeys bool
	// windowGrace is set on the node of a windowed aggregation (hasWindowGrace): how long
	// after a window's end its result may still change, which KTable.Suppress with
	// UntilWindowCloses waits for. It is the grace period (session windows: the grace
	// period plus the inactivity gap), as Kafka Streams' GraphGraceSearchUtil finds it.
	windowGrace    int64
	hasWindowGrace bool
	// serdeIDs identifies the serdes an internal sink writes with, for the topology's
	// fingerprint; nil when not known.
	serdeIDs func() (key, value string)

	// instantiate creates this node's per-task input: for sources a sourceFn, for other
	// nodes a func(Record[K, V]) of the node's input types. The task memoizes the result,
	// so a node with several parents (Merge) is instantiated once.
	instantiate func(t *task) (any, error)
}

// sourceFn is the per-task entry of a source node.
type sourceFn func(raw *rawRecord)

func (b *Builder) errorf(format string, args ...any) {
	b.errs = append(b.errs, fmt.Errorf("kstream: "+format, args...))
}

// newName returns the next generated name of kind prefix, as Kafka Streams'
// InternalStreamsBuilder.newProcessorName makes them: "<prefix>-<10 digits>".
func (b *Builder) newName(prefix string) string {
	name := genName(prefix, b.index)
	b.index++
	return name
}

// addNode registers n. With a prefix, n is an operator that Kafka Streams names with
// NamedInternal.orElseGenerateWithPrefix: it takes a generated name of kind "KSTREAM-"+prefix
// from the counter even when name gives it one (Kafka Streams 4.4 does), and is called name
// if given. Without a prefix, n is called name and the counter is left alone.
func (b *Builder) addNode(n *node, prefix, name string, parents ...*node) *node {
	n.id = len(b.nodes)
	if prefix != "" {
		if gen := b.newName("KSTREAM-" + prefix); name == "" {
			name = gen
		}
	}
	if _, dup := b.names[name]; dup {
		b.errorf("operator name %q is used twice", name)
		name = fmt.Sprintf("%s-%010d", name, n.id)
	}
	n.name = name
	b.names[name] = n
	for _, p := range parents {
		n.parents = append(n.parents, p)
		p.children = append(p.children, n)
	}
	b.nodes = append(b.nodes, n)
	return n
}

// Topology is a built, immutable topology.
type Topology struct {
	stores   []*storeDef
	subs     [][]*node // nodes of each sub-topology, in creation order
	internal []runtime.InternalTopic
	// copart are the source nodes of each join's co-partitioned operands (internal topics
	// without the application id), in operand order.
	copart [][]runtime.CopartitionSource
	nodes  []*node
	// async is what the async operators of the application built from it share (set by
	// compile).
	async *asyncShared
}

// Build checks the topology and cuts it into sub-topologies. It returns every problem found
// (unknown names, topics read twice, operators without input) joined into one error.
func (b *Builder) Build() (*Topology, error) {
	errs := slices.Clone(b.errs)
	for _, check := range b.sharedChecks {
		if err := check(); err != nil {
			errs = append(errs, err)
		}
	}
	topicOwner := map[string]string{}
	for _, n := range b.nodes {
		if n.kind != kindSource {
			continue
		}
		for _, t := range n.topics {
			if prev, dup := topicOwner[t]; dup {
				errs = append(errs, fmt.Errorf("kstream: topic %q is read by two sources, %s and %s; read it once and reuse the stream", t, prev, n.name))
			}
			topicOwner[t] = n.name
		}
	}
	if len(b.nodes) == 0 {
		errs = append(errs, errors.New("kstream: the topology is empty; add a source with kstream.Stream"))
	}
	for _, d := range b.storeOrder {
		if _, ok := d.codec.(store.ChangelogRecordCodec); d.versioned && !ok {
			errs = append(errs, fmt.Errorf("kstream: store %q: option Versioned applies to key-value stores of tables only (Table, ToTable, Materialized, aggregations)", d.name))
		}
		if d.global && b.stores[d.name+runtime.GlobalOffsetsSuffix] != nil {
			errs = append(errs, fmt.Errorf("kstream: store name %q is reserved for the positions of global store %q", d.name+runtime.GlobalOffsetsSuffix, d.name))
		}
		if b.stores[d.name+runtime.TopicIDSuffix] != nil {
			errs = append(errs, fmt.Errorf("kstream: store name %q is reserved for the changelog topic id of store %q", d.name+runtime.TopicIDSuffix, d.name))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for i, n := range b.nodes {
		n.id = i
	}
	b.markNullKeyFilters()

	// Sub-topologies are the connected components of the graph (repartition topics are not
	// edges: their sink and source are separate nodes).
	parent := make([]int, len(b.nodes))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	union := func(x, y *node) {
		a, z := find(x.id), find(y.id)
		if a != z {
			parent[max(a, z)] = min(a, z)
		}
	}
	for _, n := range b.nodes {
		for _, c := range n.children {
			union(n, c)
		}
	}
	// Operators that share a store (a table and the joins that read it) run in one task.
	for _, d := range b.storeOrder {
		for _, u := range d.users[1:] {
			union(d.users[0], u)
		}
	}
	for i := range b.internal {
		if n := b.internalLike[b.internal[i].Name]; n != nil {
			b.internal[i].PartitionsOf = b.sourceTopicsOf(n)
		}
	}
	index := map[int]int{}
	t := &Topology{internal: b.internal, nodes: b.nodes, stores: b.storeOrder}
	for _, operands := range b.copart {
		var group []runtime.CopartitionSource
		for _, n := range operands {
			for _, src := range b.sourceNodesOf(n) {
				group = append(group, runtime.CopartitionSource{Node: src.name, Topics: sourceTopics(src)})
			}
		}
		t.copart = append(t.copart, group)
	}
	for _, n := range b.nodes { // creation order, so sub-topology 0 holds the first source
		root := find(n.id)
		i, ok := index[root]
		if !ok {
			i = len(t.subs)
			index[root] = i
			t.subs = append(t.subs, nil)
		}
		t.subs[i] = append(t.subs[i], n)
	}
	for _, d := range t.stores {
		sub := t.subOf(d.users[0])
		for _, u := range d.users[1:] {
			if t.subOf(u) != sub {
				return nil, fmt.Errorf("kstream: store %q is used by %s and %s, which are in different sub-topologies; a store belongs to one", d.name, d.users[0].name, u.name)
			}
		}
	}
	return t, nil
}

// markNullKeyFilters decides, for every repartition, whether its filter drops records with a
// null key: it does unless a left join is downstream (Kafka Streams' rewriteRepartitionNodes
// with NodesWithRelaxedNullKeyJoinDownstream), looking through further repartitions.
func (b *Builder) markNullKeyFilters() {
	readers := map[string]*node{} // internal topic -> its source
	for _, n := range b.nodes {
		if n.kind == kindSource && n.internal {
			for _, topic := range n.topics {
				readers[topic] = n
			}
		}
	}
	memo := map[*node]bool{}
	var relaxed func(n *node) bool
	relaxed = func(n *node) bool {
		if r, ok := memo[n]; ok {
			return r
		}
		memo[n] = false // cycles cannot happen, but a node is visited once
		r := n.relaxedJoin
		for _, c := range n.children {
			r = relaxed(c) || r
		}
		if n.kind == kindSink && n.internal && readers[n.sinkTopic] != nil {
			r = relaxed(readers[n.sinkTopic]) || r
		}
		memo[n] = r
		return r
	}
	for _, n := range b.nodes {
		if n.repSource != nil {
			n.keepNullKeys = relaxed(n.repSource)
		}
	}
}

// subOf returns the sub-topology index of the node named name.
func (t *Topology) subOf(n *node) int {
	for i, sub := range t.subs {
		if slices.Contains(sub, n) {
			return i
		}
	}
	return -1
}

// globalStoreOf returns the global store of sub if sub is a global table's sub-topology.
func globalStoreOf(sub []*node) *storeDef {
	for _, n := range sub {
		if n.global && len(n.stores) > 0 {
			return n.stores[0]
		}
	}
	return nil
}

// compile returns the runtime's view of t.
// Internal topic names in the graph lack the application id; compile prefixes them.
func (t *Topology) compile(appID string, h *handlers, newTask func(sub []*node, env runtime.TaskEnv, id runtime.TaskID, stores map[string]store.Backend) (runtime.Task, error)) *runtime.Topology {
	rt := &runtime.Topology{InternalTopics: slices.Clone(t.internal)}
	isInternal := map[string]bool{}
	for _, it := range t.internal {
		isInternal[it.Name] = true
	}
	for i := range rt.InternalTopics {
		it := &rt.InternalTopics[i]
		it.Name = internalTopic(appID, it.Name)
		if len(it.PartitionsOf) > 0 {
			like := make([]string, len(it.PartitionsOf))
			for j, topic := range it.PartitionsOf {
				if like[j] = topic; isInternal[topic] {
					like[j] = internalTopic(appID, topic)
				}
			}
			it.PartitionsOf = like
		}
	}
	groups := make([][]runtime.CopartitionSource, 0, len(t.copart))
	for _, g := range t.copart {
		group := make([]runtime.CopartitionSource, 0, len(g))
		for _, src := range g {
			topics := slices.Clone(src.Topics)
			for i, topic := range topics {
				if isInternal[topic] {
					topics[i] = internalTopic(appID, topic)
				}
			}
			group = append(group, runtime.CopartitionSource{Node: src.Node, Topics: topics})
		}
		groups = append(groups, group)
	}
	rt.CopartitionGroups = runtime.JavaCopartitionGroups(groups)
	for i, sub := range t.subs {
		st := runtime.SubTopology{ID: i}
		if d := globalStoreOf(sub); d != nil {
			// No sources: the group consumer does not read the topic and no task is made;
			// the runtime's global goroutine reads every partition of it.
			st.NewTask = func(runtime.TaskEnv, runtime.TaskID, map[string]store.Backend) (runtime.Task, error) {
				return nil, fmt.Errorf("kstream: sub-topology %d is global store %s; it has no tasks", i, d.name)
			}
			rt.SubTopologies = append(rt.SubTopologies, st)
			rt.GlobalStores = append(rt.GlobalStores, runtime.GlobalStoreSpec{
				Name: d.name, Topic: d.sourceTopic, Persistent: d.persistent, SubTopology: i, Accept: d.accept(h),
			})
			continue
		}
		for _, n := range sub {
			switch n.kind {
			case kindSource:
				reset, resetD := n.reset.runtime()
				for _, topic := range n.topics {
					if n.internal {
						topic = internalTopic(appID, topic)
					}
					st.Sources = append(st.Sources, runtime.Source{Topic: topic, Reset: reset, ResetDuration: resetD, Internal: n.internal})
				}
				if n.pattern != nil {
					st.Sources = append(st.Sources, runtime.Source{Pattern: n.pattern, Reset: reset, ResetDuration: resetD})
				}
			case kindSink:
				if n.sinkTopic != "" && !n.internal {
					rt.SinkTopics = append(rt.SinkTopics, runtime.SinkTopic{Topic: n.sinkTopic, Operator: n.name})
				}
			}
		}
		for _, d := range t.stores {
			if t.subOf(d.users[0]) != i {
				continue
			}
			spec := runtime.StoreSpec{Name: d.name, Persistent: d.persistent, Timestamped: d.timestamped, Codec: d.codec, NoReadCache: d.noReadCache}
			if d.sourceTopic != "" {
				// A table read from a topic uses that topic as its changelog.
				spec.Changelog, spec.SourceTopic = d.sourceTopic, true
			} else if d.logged {
				spec.Changelog = internalTopic(appID, d.name+"-changelog")
				configs := map[string]*string{"cleanup.policy": ptr("compact")}
				if d.codec != nil {
					// Window and session stores: compact,delete with the store's retention
					// plus a day, as Kafka Streams' WindowedChangelogTopicConfig.
					configs = d.codec.TopicConfigs()
				}
				if len(d.changelogConfig) > 0 {
					// WithChangelogConfig: the user's configs over the defaults, as Kafka
					// Streams' InternalTopicConfig.properties.
					configs = maps.Clone(configs)
					for k, v := range d.changelogConfig {
						configs[k] = ptr(v)
					}
				}
				rt.InternalTopics = append(rt.InternalTopics, runtime.InternalTopic{
					Name: spec.Changelog, Writer: i, Configs: configs,
				})
			}
			st.Stores = append(st.Stores, spec)
			// The store's serdes name their subjects after its changelog (storeSerde).
			bindTo := spec.Changelog
			if bindTo == "" {
				bindTo = internalTopic(appID, d.name+"-changelog")
			}
			for _, bind := range d.binds {
				bind(bindTo)
			}
		}
		nodes := sub
		st.NewTask = func(env runtime.TaskEnv, id runtime.TaskID, stores map[string]store.Backend) (runtime.Task, error) {
			return newTask(nodes, env, id, stores)
		}
		rt.SubTopologies = append(rt.SubTopologies, st)
	}
	// Each internal topic's writer is the sub-topology holding its sink.
	for i := range t.internal {
		for _, n := range t.nodes {
			if n.kind == kindSink && n.internal && n.sinkTopic == t.internal[i].Name {
				rt.InternalTopics[i].Writer = t.subOf(n)
			}
		}
	}
	return rt
}

// internalTopic is the full name of an application-owned topic: Kafka Streams names them
// "<application.id>-<name>".
func internalTopic(appID, suffix string) string { return appID + "-" + suffix }

// genName is a generated operator name, as Kafka Streams makes them: "<KIND>-<10 digits>".
func genName(kind string, id int) string { return fmt.Sprintf("%s-%010d", kind, id) }
