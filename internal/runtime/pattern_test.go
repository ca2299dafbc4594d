package runtime

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestResolvePatterns(t *testing.T) {
	re := regexp.MustCompile(`in-.*`)
	topo := &Topology{
		SubTopologies: []SubTopology{
			{ID: 0, Sources: []Source{{Pattern: re, Reset: ResetLatest}}},
			{ID: 1, Sources: []Source{{Topic: "in-named"}}},
		},
		CopartitionGroups: [][]string{{PatternMarker(re.String()), "table"}},
	}
	topics := []string{"table", "in-b", "xin-c", "in-a", "in-named", "in-internal", "in-"}
	if err := ResolvePatterns(topo, topics, func(t string) bool { return t == "in-internal" }); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range topo.SubTopologies[0].Sources {
		if s.Pattern != nil || s.Reset != ResetLatest {
			t.Fatalf("source %+v: want a topic with the pattern's reset", s)
		}
		got = append(got, s.Topic)
	}
	// Whole names only (not xin-c), sorted, without a named source's topic or an
	// internal topic.
	if want := []string{"in-", "in-a", "in-b"}; !slices.Equal(got, want) {
		t.Fatalf("sources = %v, want %v", got, want)
	}
	if want := []string{"in-", "in-a", "in-b", "table"}; !slices.Equal(topo.CopartitionGroups[0], want) {
		t.Fatalf("co-partition group = %v, want %v", topo.CopartitionGroups[0], want)
	}

	none := &Topology{SubTopologies: []SubTopology{{ID: 0, Sources: []Source{{Pattern: re}}}}}
	if err := ResolvePatterns(none, []string{"other"}, nil); err == nil || !strings.Contains(err.Error(), `"in-.*"`) {
		t.Fatalf("no match: err = %v, want one naming the pattern", err)
	}
}
