package kstream

import (
	"strings"
	"testing"

	"github.com/kstream-go/kstream/serde"
)

// The hook that key-dependent operators use inserts a repartition topic only after a
// key-changing operator, and type-preserving operators keep the mark.
func TestRepartitionIfKeyChanged(t *testing.T) {
	b := NewBuilder()
	s := Stream(b, "in", serde.String(), serde.String())
	if got := s.repartitionIfKeyChanged("unchanged"); got.n != s.n {
		t.Fatal("repartitioned a stream whose key did not change")
	}
	mv := MapValues(s.Filter(func(string, string) bool { return true }), func(v string) string { return v })
	if mv.keyChanged || mv.repartitionIfKeyChanged("still-unchanged").n != mv.n {
		t.Fatal("MapValues/Filter marked the key as changed")
	}
	rekeyed := SelectKey(s, func(_, v string) string { return v }).Filter(func(string, string) bool { return true }).WithSerdes(serde.String(), nil)
	if !rekeyed.keyChanged {
		t.Fatal("SelectKey then Filter lost the key-changed mark")
	}
	r := rekeyed.repartitionIfKeyChanged("by-value")
	if r.n == rekeyed.n || r.keyChanged || r.n.kind != kindSource || !r.n.internal {
		t.Fatal("no repartition source inserted after a key change")
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
