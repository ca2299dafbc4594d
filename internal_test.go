package kstream

import (
	"strings"
	"testing"

	"github.com/kstream-go/kstream/serde"
)

// Key-changing operators mark the stream, type-preserving operators keep the mark, and the
// hook that key-dependent operators use puts the repartition right after the key-changing
// operator, moving the filter between them below it (Java's repartition optimization).
func TestRepartitionForKey(t *testing.T) {
	b := NewBuilder()
	s := Stream(b, "in", serde.String(), serde.String())
	if s.keyChanged {
		t.Fatal("a source is marked as re-keyed")
	}
	mv := MapValues(s.Filter(func(string, string) bool { return true }), func(v string) string { return v })
	if mv.keyChanged {
		t.Fatal("MapValues/Filter marked the key as changed")
	}
	sel := SelectKey(s, func(_, v string) string { return v })
	rekeyed := sel.Filter(func(string, string) bool { return true }).WithSerdes(serde.String(), nil)
	if !rekeyed.keyChanged {
		t.Fatal("SelectKey then Filter lost the key-changed mark")
	}
	r := repartitionForKey(rekeyed, "by-value", false, "test")
	if r.n != rekeyed.n || r.keyChanged {
		t.Fatal("the repartitioned stream is not the filter's, partitioned")
	}
	if src := r.n.parents[0]; src.kind != kindSource || !src.internal || src.name != "by-value-repartition-source" {
		t.Fatalf("the filter was not moved below the repartition source: its parent is %s", src.name)
	}
	if len(sel.n.children) != 1 || sel.n.children[0].name != "by-value-repartition-filter" {
		t.Fatalf("SelectKey's children: %s", sel.n.children[0].name)
	}
	for _, k := range []KStream[string, string]{
		Map(s, func(k, v string) (string, string) { return v, k }).WithSerdes(serde.String(), serde.String()),
		FlatMap(s, func(k, v string) []KeyValue[string, string] { return nil }).WithSerdes(serde.String(), serde.String()),
		Process(s, func() Processor[string, string, string, string] { return nil }).WithSerdes(serde.String(), serde.String()),
	} {
		if !k.keyChanged {
			t.Fatal("a key-changing operator did not mark the stream")
		}
	}
	r.To("out", nil, nil)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d := topo.Describe()
	if !strings.Contains(d, "Sub-topology: 1") || !strings.Contains(d, "by-value-repartition") || strings.Contains(d, "unchanged-repartition") {
		t.Fatalf("unexpected topology:\n%s", d)
	}
	rt := topo.compile("app", nil, nil)
	if len(rt.InternalTopics) != 1 || rt.InternalTopics[0].Name != "app-by-value-repartition" || rt.InternalTopics[0].Writer != 0 {
		t.Fatalf("internal topics: %+v", rt.InternalTopics)
	}
	if len(rt.SinkTopics) != 1 || rt.SinkTopics[0].Topic != "out" {
		t.Fatalf("sink topics: %+v", rt.SinkTopics)
	}
}
