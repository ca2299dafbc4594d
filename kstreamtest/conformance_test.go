package kstreamtest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
)

// The scenarios of the conformance test, mirrored one for one in
// testing/conformance/src/main/java/conformance/Main.java, whose output through Java's
// TopologyTestDriver is in testdata/conformance/<name>.txt (see the README there).
var confScenarios = []struct {
	name  string
	build func(s kstream.KStream[string, string])
}{
	{"stateless", func(s kstream.KStream[string, string]) { confStateless(s, "out", false) }},
	{"repartition", func(s kstream.KStream[string, string]) { confStateless(s, "out", true) }},
	{"siblings", func(s kstream.KStream[string, string]) {
		s.Filter(func(string, string) bool { return false }).To("out", nil, nil)
		s.Split().Branch("never", func(string, string) bool { return false }).NoDefaultBranch()["never"].To("out", nil, nil)
		kstream.MapValues(s, strings.ToUpper).To("out", serde.String(), serde.String())
	}},
	{"flatmap-selectkey", func(s kstream.KStream[string, string]) {
		fm := kstream.FlatMap(s, func(k, v string) []kstream.KeyValue[string, string] {
			if v == "" {
				return nil
			}
			return []kstream.KeyValue[string, string]{kstream.KV(v[:1], k), kstream.KV(k, v)}
		})
		kstream.SelectKey(fm, func(k, _ string) string { return k + "!" }).To("out", serde.String(), serde.String())
	}},
}

// confStateless is also the topology of TestDriverMatchesRuntime, writing to out.
func confStateless(s kstream.KStream[string, string], out string, repartition bool) {
	br := s.Filter(func(_, v string) bool { return v != "" }).Split(kstream.Named("len-")).
		Branch("short", func(_, v string) bool { return len(v) <= 5 }).
		DefaultBranch("long")
	short := kstream.MapValues(br["len-short"], strings.ToUpper)
	long := kstream.FlatMapValues(br["len-long"], func(v string) []string { return []string{v[:3], v[3:]} })
	merged := short.Merge(long)
	if repartition {
		merged = kstream.SelectKey(merged, func(k, v string) string { return k + "/" + v[:1] }).
			WithSerdes(serde.String(), serde.String()).Repartition("eq")
	}
	merged.To(out, serde.String(), serde.String())
}

// confInput is the input of every scenario.
func confInput() []kstream.Record[string, string] {
	words := []string{"kafka", "streams", "go", "", "exactly", "once", "tables", "joins"}
	recs := make([]kstream.Record[string, string], 0, 40)
	for i := range 40 {
		r := kstream.Record[string, string]{
			Key:       "k" + strconv.Itoa(i%7),
			Value:     words[i%len(words)],
			Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i)*1000),
		}
		if i%3 == 0 {
			r.Headers = []kstream.Header{{Key: "i", Value: []byte(strconv.Itoa(i))}}
		}
		recs = append(recs, r)
	}
	return recs
}

// confRun runs one scenario through the driver and returns its output in the golden format.
func confRun(t *testing.T, build func(s kstream.KStream[string, string])) []string {
	t.Helper()
	b := kstream.NewBuilder()
	build(kstream.Stream(b, "in", serde.String(), serde.String()))
	d, err := kstreamtest.New(b, kstream.Config{ApplicationID: "conformance"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	in := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.String())
	for _, r := range confInput() {
		if err := in.PipeRecord(r); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.String()).ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	lines := make([]string, 0, len(recs))
	for _, r := range recs {
		hs := make([]string, 0, len(r.Headers))
		for _, h := range r.Headers {
			hs = append(hs, h.Key+"="+string(h.Value))
		}
		lines = append(lines, fmt.Sprintf("%s|%s|%d|%s", r.Key, r.Value, r.Timestamp.UnixMilli(), strings.Join(hs, ",")))
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// confGolden reads a golden file as lines; it must end in a newline.
func confGolden(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (regenerate the golden files with testing/conformance/run.sh)", err)
	}
	s := string(data)
	if s == "" {
		return nil
	}
	if !strings.HasSuffix(s, "\n") {
		t.Fatalf("%s: no final newline", path)
	}
	if strings.Contains(s, "\r") {
		t.Fatalf("%s: has \\r; lines must end in \\n", path)
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// confDiff is a line diff of want (Java) and got (Go) with 3 lines of context: "-" marks a
// line only Java wrote, "+" one only Go wrote, each with its line number on that side.
func confDiff(want, got []string) string {
	// Longest common subsequence, from the end.
	lcs := make([][]int, len(want)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(got)+1)
	}
	for i := len(want) - 1; i >= 0; i-- {
		for j := len(got) - 1; j >= 0; j-- {
			if want[i] == got[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type op struct {
		same bool
		text string
	}
	var ops []op
	for i, j := 0, 0; i < len(want) || j < len(got); {
		switch {
		case i < len(want) && j < len(got) && want[i] == got[j]:
			ops = append(ops, op{true, fmt.Sprintf("         %3d %3d  %s", i+1, j+1, want[i])})
			i++
			j++
		case i < len(want) && (j == len(got) || lcs[i+1][j] >= lcs[i][j+1]):
			ops = append(ops, op{false, fmt.Sprintf("  - java %3d      %s", i+1, want[i])})
			i++
		default:
			ops = append(ops, op{false, fmt.Sprintf("  + go       %3d  %s", j+1, got[j])})
			j++
		}
	}
	const context = 3
	show := make([]bool, len(ops))
	for k, o := range ops {
		if !o.same {
			for c := max(0, k-context); c <= min(len(ops)-1, k+context); c++ {
				show[c] = true
			}
		}
	}
	var sb strings.Builder
	for k, o := range ops {
		if !show[k] {
			if k > 0 && show[k-1] {
				sb.WriteString("         ...\n")
			}
			continue
		}
		sb.WriteString(o.text + "\n")
	}
	return sb.String()
}

// TestConformanceWithJava requires the driver's output to equal Java TopologyTestDriver's
// for the same topology and input, record for record and in order. The goldens are read
// from $KSTREAM_CONFORMANCE_DIR when set (CI regenerates them there with Java), otherwise
// from testdata/conformance.
func TestConformanceWithJava(t *testing.T) {
	dir := os.Getenv("KSTREAM_CONFORMANCE_DIR")
	if dir == "" {
		dir = filepath.Join("testdata", "conformance")
	}
	for _, sc := range confScenarios {
		t.Run(sc.name, func(t *testing.T) {
			path := filepath.Join(dir, sc.name+".txt")
			want := confGolden(t, path)
			got := confRun(t, sc.build)
			if slices.Equal(got, want) {
				return
			}
			t.Errorf("Go driver output differs from Java's %s: java %d records, go %d records\n"+
				"  (line numbers: java, go)\n%s", path, len(want), len(got), confDiff(want, got))
		})
	}
}
