package kstream

// Splitter routes each record of a stream to the first branch whose predicate matches.
// Create one with [KStream.Split], add branches with [Splitter.Branch], and finish with
// [Splitter.DefaultBranch] or [Splitter.NoDefaultBranch], which return the branches by name.
// It corresponds to Kafka Streams' BranchedKStream.
type Splitter[K, V any] struct {
	s        KStream[K, V]
	n        *node
	prefix   string
	names    []string // map keys
	preds    []func(K, V) bool
	branches []*node
	hasDef   bool
	done     bool
}

// Split starts a split of s. [Named] sets the prefix of the branch names.
func (s KStream[K, V]) Split(opts ...Option) *Splitter[K, V] {
	c := s.b.options("Split", opts)
	sp := &Splitter[K, V]{s: s, prefix: c.name}
	n := &node{kind: kindProcessor}
	s.b.addNode(n, "BRANCH", c.name, s.n)
	sp.n = n
	n.instantiate = func(t *task) (any, error) {
		ctx, err := childInputs[K, V](t, n)
		if err != nil {
			return nil, err
		}
		return func(r Record[K, V]) {
			defer t.recoverIn(n)
			for i, pred := range sp.preds {
				if pred(r.Key, r.Value) {
					ctx.children[i](r)
					return
				}
			}
			if sp.hasDef {
				ctx.children[len(sp.preds)](r)
			}
		}, nil
	}
	return sp
}

// Branch adds a branch named name that takes the records matching pred and no earlier
// branch. The branch's key in the result map is the split's prefix followed by name; its
// operator is named, as in Kafka Streams, the split's name (the prefix, or a generated
// KSTREAM-BRANCH- name) followed by name.
func (sp *Splitter[K, V]) Branch(name string, pred func(K, V) bool) *Splitter[K, V] {
	if sp.done {
		sp.s.b.errorf("Split: Branch(%q) after the split was finished", name)
		return sp
	}
	sp.add(name)
	sp.preds = append(sp.preds, pred)
	return sp
}

func (sp *Splitter[K, V]) add(name string) {
	key := sp.prefix + name
	n := &node{kind: kindProcessor}
	// BranchedKStreamImpl.createBranch takes a generated name it does not use.
	sp.s.b.index++
	sp.s.b.addNode(n, "", sp.n.name+name, sp.n)
	n.instantiate = func(t *task) (any, error) {
		ctx, err := childInputs[K, V](t, n)
		if err != nil {
			return nil, err
		}
		return func(r Record[K, V]) { ctx.Forward(r) }, nil
	}
	for _, k := range sp.names {
		if k == key {
			sp.s.b.errorf("Split: branch %q is defined twice", key)
		}
	}
	sp.names = append(sp.names, key)
	sp.branches = append(sp.branches, n)
}

// DefaultBranch adds a last branch named name for the records no predicate matched, and
// returns every branch by name.
func (sp *Splitter[K, V]) DefaultBranch(name string) map[string]KStream[K, V] {
	if !sp.done {
		sp.add(name)
		sp.hasDef = true
	}
	return sp.NoDefaultBranch()
}

// NoDefaultBranch finishes the split: records no predicate matched are dropped (for this
// split only). It returns every branch by name.
func (sp *Splitter[K, V]) NoDefaultBranch() map[string]KStream[K, V] {
	sp.done = true
	out := make(map[string]KStream[K, V], len(sp.names))
	for i, key := range sp.names {
		out[key] = sp.s.same(KStream[K, V]{b: sp.s.b, n: sp.branches[i]})
	}
	return out
}
