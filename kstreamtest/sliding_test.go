package kstreamtest_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
)

// The sliding-window tests pipe the same input into a topology and compare its output with
// what Kafka Streams 4.4.0's TopologyTestDriver produced for the same topology and input
// (KStreamSlidingWindowAggregate, with STATESTORE_CACHE_MAX_BYTES_CONFIG=0 and the internal
// "__emit.interval.ms.kstreams.windowed.aggregation__"=0 so that every update and every
// final result is emitted at once). Each output line is key@start/end=value@timestamp, and
// the last one is the count of dropped records (Java's dropped-records-total).
//
// slidingMain covers: early records (before the time difference, 10ms), in-order and
// out-of-order records within the grace period (20ms), two records with the same
// timestamp, a record too late for every window (a:L@5) and one too late for some (a:M@10),
// a null value (~) and a null key (-), keys whose records are further apart than the time
// difference (c), and records that close windows for the emission on close.
const slidingMain = "a:A@3 a:B@7 b:C@5 a:D@15 a:E@2 a:F@20 a:G@20 a:H@12 b:I@26 a:J@26 a:K@40 a:L@5 a:M@10 a:~@41 -:N@42 " +
	"c:O@50 a:P@55 b:Q@56 a:R@45 c:S@70 c:T@75 a:U@100 b:V@130"

// slidingRand is 60 records with pseudo-random timestamps (out of order by up to 24ms) and
// keys x and y.
const slidingRand = "x:a@0 x:b@1 y:c@5 x:d@0 x:e@0 x:f@9 x:g@14 x:h@17 x:i@20 y:j@24 x:k@18 x:l@29 y:m@30 x:n@33 " +
	"y:o@37 y:p@28 x:q@38 y:r@39 y:s@39 x:t@24 x:u@44 x:v@49 x:w@54 y:x@57 x:y@55 x:z@65 x:a@45 y:b@52 y:c@65 " +
	"x:d@79 y:e@81 x:f@81 x:g@82 x:h@84 x:i@85 x:j@89 x:k@91 x:l@94 y:m@86 y:n@97 x:o@101 y:p@94 y:q@107 " +
	"y:r@108 x:s@84 y:t@108 x:u@112 x:v@117 x:w@119 x:x@121 y:y@115 y:z@123 y:a@107 y:b@119 x:c@130 x:d@115 " +
	"x:e@130 y:f@131 x:g@121 x:h@135"

// slidingEdge has a window that closes at the retention's edge.
const slidingEdge = "a:A@25 b:B@45 c:C@70"

// slidingWindowed returns the input stream grouped by key with sliding windows.
func slidingWindowed(b *kstream.Builder, td, grace int64, onClose bool) kstream.TimeWindowedKStream[string, string] {
	s := kstream.Stream(b, "in", serde.String(), serde.String())
	w := s.GroupByKey().WindowedBy(kstream.SlidingWindowsOf(time.Duration(td) * time.Millisecond).WithGrace(time.Duration(grace) * time.Millisecond))
	if onClose {
		w = w.EmitOnWindowClose()
	}
	return w
}

// slidingOut writes a windowed table to "out" as key@start/end = value.
func slidingOut[V any](t kstream.KTable[serde.Windowed[string], V]) {
	kstream.Map(t.ToStream(), func(k serde.Windowed[string], v V) (string, string) {
		return fmt.Sprintf("%s@%d/%d", k.Key, k.StartMs(), k.EndMs()), fmt.Sprint(v)
	}).To("out", serde.String(), serde.String())
}

func slidingCount(td, grace int64, onClose bool) func(b *kstream.Builder) {
	return func(b *kstream.Builder) {
		slidingOut(kstream.WindowedCount(slidingWindowed(b, td, grace, onClose), "counts"))
	}
}

func slidingAgg(td, grace int64, onClose bool) func(b *kstream.Builder) {
	return func(b *kstream.Builder) {
		slidingOut(kstream.WindowedAggregate(slidingWindowed(b, td, grace, onClose), func() string { return "" },
			func(_, v, acc string) string { return acc + v }, serde.String(), "aggs"))
	}
}

func slidingReduce(td, grace int64, onClose bool) func(b *kstream.Builder) {
	return func(b *kstream.Builder) {
		slidingOut(kstream.WindowedReduce(slidingWindowed(b, td, grace, onClose), func(acc, v string) string { return acc + v }, "reduced"))
	}
}

// slidingSum regroups the windowed counts by key and sums them with an adder and a
// subtractor: the sums are right only if the counts' old values are right.
func slidingSum(td, grace int64) func(b *kstream.Builder) {
	return func(b *kstream.Builder) {
		counts := kstream.WindowedCount(slidingWindowed(b, td, grace, false), "counts")
		g := kstream.TableGroupBy(counts, func(k serde.Windowed[string], n int64) kstream.KeyValue[string, int64] { return kstream.KV(k.Key, n) },
			serde.String(), serde.Int64(), kstream.Named("regroup"))
		sums := kstream.TableReduce(g, func(a, n int64) int64 { return a + n }, func(a, n int64) int64 { return a - n }, "sums")
		kstream.MapValues(sums.ToStream(), func(n int64) string { return strconv.FormatInt(n, 10) }).To("out", serde.String(), serde.String())
	}
}

// runSliding builds a topology, pipes input ("key:value@ms" tokens; key "-" is a null key,
// value "~" a null value) and returns its output as key=value@ms lines, then dropped=N.
func runSliding(t *testing.T, build func(b *kstream.Builder), input string) []string {
	t.Helper()
	b := kstream.NewBuilder()
	build(b)
	// Without the record cache: slidingJava is Kafka Streams' output without its cache
	// (a record can update a window twice, which a cache forwards once).
	d := driverWith(t, b, kstream.Config{ApplicationID: "sliding", CacheMaxBytes: -1})
	in := kstreamtest.CreateInputTopic(d, "in", serde.Bytes(), serde.Bytes())
	for _, tok := range strings.Fields(input) {
		k, rest, _ := strings.Cut(tok, ":")
		v, at, _ := strings.Cut(rest, "@")
		ms, err := strconv.ParseInt(at, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		var kb, vb []byte
		if k != "-" {
			kb = []byte(k)
		}
		if v != "~" {
			vb = []byte(v)
		}
		if err := in.PipeRaw(kb, vb, time.UnixMilli(ms)); err != nil {
			t.Fatalf("piping %s: %v", tok, err)
		}
	}
	recs, err := kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.String()).ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, r := range recs {
		lines = append(lines, fmt.Sprintf("%s=%s@%d", r.Key, r.Value, r.Timestamp.UnixMilli()))
	}
	return append(lines, fmt.Sprintf("dropped=%d", d.DroppedRecords()))
}

func TestSlidingWindowsJava(t *testing.T) {
	for _, tc := range []struct {
		name  string
		input string
		build func(b *kstream.Builder)
		// missing are the lines of Java's output that kstream does not emit, for the known
		// difference.
		missing []string
	}{
		{"count-main-update", slidingMain, slidingCount(10, 20, false), nil},
		{"count-main-close", slidingMain, slidingCount(10, 20, true), nil},
		{"agg-main-update", slidingMain, slidingAgg(10, 20, false), nil},
		{"agg-main-close", slidingMain, slidingAgg(10, 20, true), nil},
		{"reduce-main-update", slidingMain, slidingReduce(10, 20, false), nil},
		{"sum-main", slidingMain, slidingSum(10, 20), nil},
		{"count-rand-update", slidingRand, slidingCount(10, 15, false), nil},
		{"count-rand-close", slidingRand, slidingCount(10, 15, true), nil},
		{"agg-rand-nograce-update", slidingRand, slidingAgg(5, 0, false), nil},
		{"agg-rand-nograce-close", slidingRand, slidingAgg(5, 0, true), nil},
		{"reduce-main-close", slidingMain, slidingReduce(10, 20, true), nil},
		{"count-edge-update", slidingEdge, slidingCount(10, 0, false), nil},
		// b:B@45 moves the store's stream time to 35 (its left window's start) and the
		// retention is 20, so that a@15/25 is at the retention edge, which an aggregation
		// emitting on close still reads, as Java's time-ordered store does.
		{"count-edge-close", slidingEdge, slidingCount(10, 0, true), nil},
		{"reduce-rand-close", slidingRand, slidingReduce(7, 3, true), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, ok := slidingJava[tc.name]
			if !ok {
				t.Fatalf("no Java output for %s", tc.name)
			}
			want = slices.DeleteFunc(slices.Clone(want), func(l string) bool { return slices.Contains(tc.missing, l) })
			got := runSliding(t, tc.build, tc.input)
			if d := slidingDiff(want, got); d != "" {
				t.Errorf("output differs from Kafka Streams' (- Java, + kstream):\n%s", d)
			}
		})
	}
}

// slidingDiff lists the lines of want and got side by side from the first difference.
func slidingDiff(want, got []string) string {
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	if i == len(want) && i == len(got) {
		return ""
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "first difference at line %d\n", i+1)
	for j := i; j < max(len(want), len(got)) && j < i+15; j++ {
		w, g := "", ""
		if j < len(want) {
			w = want[j]
		}
		if j < len(got) {
			g = got[j]
		}
		fmt.Fprintf(&sb, "  - %-24s + %s\n", w, g)
	}
	return sb.String()
}

// slidingJava is the output of Kafka Streams 4.4.0 for the scenarios of
// TestSlidingWindowsJava.
var slidingJava = map[string][]string{
	"count-main-update": {
		"a@0/10=1@3",
		"a@4/14=1@7",
		"a@0/10=2@7",
		"b@0/10=1@5",
		"a@8/18=1@15",
		"a@5/15=2@15",
		"a@3/13=2@7",
		"a@0/10=3@7",
		"a@16/26=1@20",
		"a@10/20=2@20",
		"a@16/26=2@20",
		"a@10/20=3@20",
		"a@10/20=4@20",
		"a@8/18=2@15",
		"a@5/15=3@15",
		"a@4/14=2@12",
		"a@3/13=3@12",
		"a@2/12=4@12",
		"a@13/23=3@20",
		"b@16/26=1@26",
		"a@16/26=3@26",
		"a@21/31=1@26",
		"a@30/40=1@40",
		"a@10/20=5@20",
		"a@11/21=4@20",
		"c@40/50=1@50",
		"a@45/55=1@55",
		"b@46/56=1@56",
		"a@45/55=2@55",
		"a@41/51=1@45",
		"a@35/45=2@45",
		"a@46/56=1@55",
		"c@60/70=1@70",
		"c@71/81=1@75",
		"c@65/75=2@75",
		"a@90/100=1@100",
		"b@120/130=1@130",
		"dropped=9",
	},
	"count-main-close": {
		"a@0/10=3@7",
		"b@0/10=1@5",
		"a@2/12=4@12",
		"a@3/13=3@12",
		"a@4/14=2@12",
		"a@5/15=3@15",
		"a@8/18=2@15",
		"a@10/20=5@20",
		"a@11/21=4@20",
		"a@13/23=3@20",
		"a@16/26=3@26",
		"b@16/26=1@26",
		"a@21/31=1@26",
		"a@30/40=1@40",
		"a@35/45=2@45",
		"c@40/50=1@50",
		"a@41/51=1@45",
		"c@60/70=1@70",
		"c@65/75=2@75",
		"a@90/100=1@100",
		"dropped=9",
	},
	"agg-main-update": {
		"a@0/10=A@3",
		"a@4/14=B@7",
		"a@0/10=AB@7",
		"b@0/10=C@5",
		"a@8/18=D@15",
		"a@5/15=BD@15",
		"a@3/13=AB@7",
		"a@0/10=ABE@7",
		"a@16/26=F@20",
		"a@10/20=DF@20",
		"a@16/26=FG@20",
		"a@10/20=DFG@20",
		"a@10/20=DFGH@20",
		"a@8/18=DH@15",
		"a@5/15=BDH@15",
		"a@4/14=BH@12",
		"a@3/13=ABH@12",
		"a@2/12=ABEH@12",
		"a@13/23=DFG@20",
		"b@16/26=I@26",
		"a@16/26=FGJ@26",
		"a@21/31=J@26",
		"a@30/40=K@40",
		"a@10/20=DFGHM@20",
		"a@11/21=DFGH@20",
		"c@40/50=O@50",
		"a@45/55=P@55",
		"b@46/56=Q@56",
		"a@45/55=PR@55",
		"a@41/51=R@45",
		"a@35/45=KR@45",
		"a@46/56=P@55",
		"c@60/70=S@70",
		"c@71/81=T@75",
		"c@65/75=ST@75",
		"a@90/100=U@100",
		"b@120/130=V@130",
		"dropped=9",
	},
	"agg-main-close": {
		"a@0/10=ABE@7",
		"b@0/10=C@5",
		"a@2/12=ABEH@12",
		"a@3/13=ABH@12",
		"a@4/14=BH@12",
		"a@5/15=BDH@15",
		"a@8/18=DH@15",
		"a@10/20=DFGHM@20",
		"a@11/21=DFGH@20",
		"a@13/23=DFG@20",
		"a@16/26=FGJ@26",
		"b@16/26=I@26",
		"a@21/31=J@26",
		"a@30/40=K@40",
		"a@35/45=KR@45",
		"c@40/50=O@50",
		"a@41/51=R@45",
		"c@60/70=S@70",
		"c@65/75=ST@75",
		"a@90/100=U@100",
		"dropped=9",
	},
	"reduce-main-update": {
		"a@0/10=A@3",
		"a@4/14=B@7",
		"a@0/10=AB@7",
		"b@0/10=C@5",
		"a@8/18=D@15",
		"a@5/15=BD@15",
		"a@3/13=AB@7",
		"a@0/10=ABE@7",
		"a@16/26=F@20",
		"a@10/20=DF@20",
		"a@16/26=FG@20",
		"a@10/20=DFG@20",
		"a@10/20=DFGH@20",
		"a@8/18=DH@15",
		"a@5/15=BDH@15",
		"a@4/14=BH@12",
		"a@3/13=ABH@12",
		"a@2/12=ABEH@12",
		"a@13/23=DFG@20",
		"b@16/26=I@26",
		"a@16/26=FGJ@26",
		"a@21/31=J@26",
		"a@30/40=K@40",
		"a@10/20=DFGHM@20",
		"a@11/21=DFGH@20",
		"c@40/50=O@50",
		"a@45/55=P@55",
		"b@46/56=Q@56",
		"a@45/55=PR@55",
		"a@41/51=R@45",
		"a@35/45=KR@45",
		"a@46/56=P@55",
		"c@60/70=S@70",
		"c@71/81=T@75",
		"c@65/75=ST@75",
		"a@90/100=U@100",
		"b@120/130=V@130",
		"dropped=9",
	},
	"sum-main": {
		"a=1@3",
		"a=2@7",
		"a=3@7",
		"b=1@5",
		"a=4@15",
		"a=5@15",
		"a=7@15",
		"a=8@15",
		"a=9@20",
		"a=10@20",
		"a=11@20",
		"a=12@20",
		"a=13@20",
		"a=14@20",
		"a=15@20",
		"a=16@20",
		"a=17@20",
		"a=18@20",
		"a=21@20",
		"b=2@26",
		"a=22@26",
		"a=23@26",
		"a=24@40",
		"a=25@40",
		"a=29@40",
		"c=1@50",
		"a=30@55",
		"b=3@56",
		"a=31@55",
		"a=32@55",
		"a=33@55",
		"a=34@55",
		"c=2@70",
		"c=3@75",
		"c=4@75",
		"a=35@100",
		"b=4@130",
		"dropped=9",
	},
	"count-rand-update": {
		"x@0/10=1@0",
		"x@1/11=1@1",
		"x@0/10=2@1",
		"y@0/10=1@5",
		"x@0/10=3@1",
		"x@0/10=4@1",
		"x@1/11=2@9",
		"x@2/12=1@9",
		"x@0/10=5@9",
		"x@10/20=1@14",
		"x@4/14=2@14",
		"x@10/20=2@17",
		"x@15/25=1@17",
		"x@7/17=3@17",
		"x@15/25=2@20",
		"x@10/20=3@20",
		"x@18/28=1@20",
		"y@14/24=1@24",
		"x@18/28=2@20",
		"x@15/25=3@20",
		"x@10/20=4@20",
		"x@8/18=4@18",
		"x@19/29=1@20",
		"x@19/29=2@29",
		"x@21/31=1@29",
		"y@25/35=1@30",
		"y@20/30=2@30",
		"x@30/40=1@33",
		"x@23/33=2@33",
		"y@31/41=1@37",
		"y@27/37=2@37",
		"y@27/37=3@37",
		"y@25/35=2@30",
		"y@20/30=3@30",
		"y@18/28=2@28",
		"y@29/39=2@37",
		"x@30/40=2@38",
		"x@34/44=1@38",
		"x@28/38=3@38",
		"y@31/41=2@39",
		"y@29/39=3@39",
		"y@38/48=1@39",
		"y@38/48=2@39",
		"y@31/41=3@39",
		"y@29/39=4@39",
		"x@23/33=3@33",
		"x@21/31=2@29",
		"x@19/29=3@29",
		"x@18/28=3@24",
		"x@15/25=4@24",
		"x@14/24=5@24",
		"x@25/35=2@33",
		"x@34/44=2@44",
		"x@39/49=1@44",
		"x@39/49=2@49",
		"x@45/55=1@49",
		"x@45/55=2@54",
		"x@50/60=1@54",
		"x@44/54=3@54",
		"y@47/57=1@57",
		"x@50/60=2@55",
		"x@45/55=3@55",
		"x@55/65=1@55",
		"x@55/65=2@65",
		"x@56/66=1@65",
		"x@45/55=4@55",
		"x@44/54=4@54",
		"x@46/56=3@55",
		"y@47/57=2@57",
		"y@42/52=1@52",
		"y@53/63=1@57",
		"y@58/68=1@65",
		"y@55/65=2@65",
		"x@69/79=1@79",
		"y@71/81=1@81",
		"x@80/90=1@81",
		"x@71/81=2@81",
		"x@80/90=2@82",
		"x@82/92=1@82",
		"x@72/82=3@82",
		"x@82/92=2@84",
		"x@80/90=3@84",
		"x@83/93=1@84",
		"x@74/84=4@84",
		"x@83/93=2@85",
		"x@82/92=3@85",
		"x@80/90=4@85",
		"x@85/95=1@85",
		"x@75/85=5@85",
		"x@85/95=2@89",
		"x@83/93=3@89",
		"x@82/92=4@89",
		"x@80/90=5@89",
		"x@86/96=1@89",
		"x@79/89=6@89",
		"x@86/96=2@91",
		"x@85/95=3@91",
		"x@83/93=4@91",
		"x@82/92=5@91",
		"x@90/100=1@91",
		"x@81/91=6@91",
		"x@90/100=2@94",
		"x@86/96=3@94",
		"x@85/95=4@94",
		"x@92/102=1@94",
		"x@84/94=5@94",
		"y@82/92=1@86",
		"y@76/86=2@86",
		"y@87/97=1@97",
		"y@87/97=1@97",
		"x@92/102=2@101",
		"x@95/105=1@101",
		"x@91/101=3@101",
		"y@87/97=2@97",
		"y@84/94=2@94",
		"y@95/105=1@97",
		"y@98/108=1@107",
		"y@97/107=2@107",
		"y@98/108=2@108",
		"y@108/118=1@108",
		"x@84/94=6@94",
		"x@83/93=5@91",
		"y@108/118=2@108",
		"y@98/108=3@108",
		"x@102/112=1@112",
		"x@102/112=1@112",
		"x@113/123=1@117",
		"x@107/117=2@117",
		"x@113/123=2@119",
		"x@118/128=1@119",
		"x@109/119=3@119",
		"x@118/128=2@121",
		"x@113/123=3@121",
		"x@120/130=1@121",
		"x@111/121=4@121",
		"y@108/118=3@115",
		"y@109/119=1@115",
		"y@105/115=4@115",
		"y@116/126=1@123",
		"y@113/123=2@123",
		"y@105/115=5@115",
		"y@98/108=4@108",
		"y@116/126=2@123",
		"y@113/123=3@123",
		"y@109/119=2@119",
		"y@120/130=1@123",
		"x@120/130=2@130",
		"x@122/132=1@130",
		"x@113/123=4@121",
		"x@111/121=5@121",
		"x@109/119=4@119",
		"x@107/117=3@117",
		"x@105/115=2@115",
		"x@116/126=3@121",
		"x@122/132=2@130",
		"x@120/130=3@130",
		"y@124/134=1@131",
		"y@121/131=2@131",
		"x@120/130=4@130",
		"x@118/128=3@121",
		"x@116/126=4@121",
		"x@113/123=5@121",
		"x@111/121=6@121",
		"x@131/141=1@135",
		"x@125/135=3@135",
		"dropped=9",
	},
	"count-rand-close": {
		"x@0/10=5@9",
		"y@0/10=1@5",
		"x@1/11=2@9",
		"x@2/12=1@9",
		"x@4/14=2@14",
		"x@7/17=3@17",
		"x@8/18=4@18",
		"x@10/20=4@20",
		"x@14/24=5@24",
		"y@14/24=1@24",
		"x@15/25=4@24",
		"x@18/28=3@24",
		"y@18/28=2@28",
		"x@19/29=3@29",
		"y@20/30=3@30",
		"x@21/31=2@29",
		"x@23/33=3@33",
		"x@25/35=2@33",
		"y@25/35=2@30",
		"y@27/37=3@37",
		"x@28/38=3@38",
		"y@29/39=4@39",
		"x@30/40=2@38",
		"y@31/41=3@39",
		"x@34/44=2@44",
		"y@38/48=2@39",
		"x@39/49=2@49",
		"y@42/52=1@52",
		"x@44/54=4@54",
		"x@45/55=4@55",
		"x@46/56=3@55",
		"y@47/57=2@57",
		"x@50/60=2@55",
		"y@53/63=1@57",
		"x@55/65=2@65",
		"y@55/65=2@65",
		"x@56/66=1@65",
		"y@58/68=1@65",
		"x@69/79=1@79",
		"x@71/81=2@81",
		"y@71/81=1@81",
		"x@72/82=3@82",
		"x@74/84=4@84",
		"x@75/85=5@85",
		"y@76/86=2@86",
		"x@79/89=6@89",
		"x@80/90=5@89",
		"x@81/91=6@91",
		"x@82/92=5@91",
		"y@82/92=1@86",
		"x@83/93=5@91",
		"x@84/94=6@94",
		"y@84/94=2@94",
		"x@85/95=4@94",
		"x@86/96=3@94",
		"y@87/97=2@97",
		"x@90/100=2@94",
		"x@91/101=3@101",
		"x@92/102=2@101",
		"x@95/105=1@101",
		"y@95/105=1@97",
		"y@97/107=2@107",
		"y@98/108=4@108",
		"x@102/112=1@112",
		"x@105/115=2@115",
		"y@105/115=5@115",
		"x@107/117=3@117",
		"y@108/118=3@115",
		"x@109/119=4@119",
		"y@109/119=2@119",
		"dropped=9",
	},
	"agg-rand-nograce-update": {
		"x@0/5=a@0",
		"x@1/6=b@1",
		"x@0/5=ab@1",
		"y@0/5=c@5",
		"x@0/5=abd@1",
		"x@0/5=abde@1",
		"x@4/9=f@9",
		"x@10/15=g@14",
		"x@9/14=fg@14",
		"x@15/20=h@17",
		"x@12/17=gh@17",
		"x@15/20=hi@20",
		"x@18/23=i@20",
		"y@19/24=j@24",
		"x@24/29=l@29",
		"y@25/30=m@30",
		"x@30/35=n@33",
		"x@28/33=ln@33",
		"y@32/37=o@37",
		"x@34/39=q@38",
		"x@33/38=nq@38",
		"y@38/43=r@39",
		"y@34/39=or@39",
		"y@38/43=rs@39",
		"y@34/39=ors@39",
		"x@39/44=u@44",
		"x@39/44=u@44",
		"x@45/50=v@49",
		"x@44/49=uv@49",
		"x@50/55=w@54",
		"x@49/54=vw@54",
		"y@52/57=x@57",
		"x@55/60=y@55",
		"x@60/65=z@65",
		"y@60/65=c@65",
		"x@74/79=d@79",
		"y@76/81=e@81",
		"x@80/85=f@81",
		"x@76/81=df@81",
		"x@80/85=fg@82",
		"x@82/87=g@82",
		"x@77/82=dfg@82",
		"x@82/87=gh@84",
		"x@80/85=fgh@84",
		"x@83/88=h@84",
		"x@79/84=dfgh@84",
		"x@83/88=hi@85",
		"x@82/87=ghi@85",
		"x@80/85=fghi@85",
		"x@85/90=i@85",
		"x@85/90=ij@89",
		"x@86/91=j@89",
		"x@84/89=hij@89",
		"x@86/91=jk@91",
		"x@90/95=k@91",
		"x@90/95=kl@94",
		"x@92/97=l@94",
		"x@89/94=jkl@94",
		"y@92/97=n@97",
		"x@96/101=o@101",
		"y@102/107=q@107",
		"y@108/113=r@108",
		"y@103/108=qr@108",
		"y@108/113=rt@108",
		"y@103/108=qrt@108",
		"x@107/112=u@112",
		"x@113/118=v@117",
		"x@112/117=uv@117",
		"x@118/123=w@119",
		"x@114/119=vw@119",
		"x@118/123=wx@121",
		"x@120/125=x@121",
		"x@116/121=vwx@121",
		"y@118/123=z@123",
		"y@118/123=zb@123",
		"y@120/125=z@123",
		"x@125/130=c@130",
		"x@125/130=ce@130",
		"y@126/131=f@131",
		"x@131/136=h@135",
		"x@130/135=ceh@135",
		"dropped=14",
	},
	"agg-rand-nograce-close": {
		"x@0/5=abde@1",
		"y@0/5=c@5",
		"x@1/6=b@1",
		"x@4/9=f@9",
		"x@9/14=fg@14",
		"x@10/15=g@14",
		"x@12/17=gh@17",
		"x@15/20=hi@20",
		"x@18/23=i@20",
		"y@19/24=j@24",
		"x@24/29=l@29",
		"y@25/30=m@30",
		"x@28/33=ln@33",
		"x@30/35=n@33",
		"y@32/37=o@37",
		"x@33/38=nq@38",
		"x@34/39=q@38",
		"y@34/39=ors@39",
		"y@38/43=rs@39",
		"x@39/44=u@44",
		"x@44/49=uv@49",
		"x@45/50=v@49",
		"x@49/54=vw@54",
		"x@50/55=w@54",
		"y@52/57=x@57",
		"x@55/60=y@55",
		"x@74/79=d@79",
		"x@76/81=df@81",
		"y@76/81=e@81",
		"x@77/82=dfg@82",
		"x@79/84=dfgh@84",
		"x@80/85=fghi@85",
		"x@82/87=ghi@85",
		"x@83/88=hi@85",
		"x@84/89=hij@89",
		"x@85/90=ij@89",
		"x@86/91=jk@91",
		"x@89/94=jkl@94",
		"x@90/95=kl@94",
		"x@92/97=l@94",
		"y@92/97=n@97",
		"x@96/101=o@101",
		"y@102/107=q@107",
		"y@103/108=qrt@108",
		"x@107/112=u@112",
		"y@108/113=rt@108",
		"x@112/117=uv@117",
		"x@113/118=v@117",
		"x@114/119=vw@119",
		"x@116/121=vwx@121",
		"x@118/123=wx@121",
		"y@118/123=zb@123",
		"x@120/125=x@121",
		"y@120/125=z@123",
		"x@125/130=ce@130",
		"y@126/131=f@131",
		"dropped=14",
	},
	"reduce-rand-close": {
		"x@0/7=abde@1",
		"y@0/7=c@5",
		"x@1/8=b@1",
		"x@2/9=f@9",
		"x@7/14=fg@14",
		"x@10/17=gh@17",
		"x@13/20=ghi@20",
		"x@15/22=hik@20",
		"y@17/24=j@24",
		"x@18/25=ik@20",
		"x@19/26=i@20",
		"x@22/29=l@29",
		"y@23/30=jm@30",
		"y@25/32=m@30",
		"x@26/33=ln@33",
		"y@29/36=m@30",
		"x@30/37=n@33",
		"y@30/37=mo@37",
		"x@31/38=nq@38",
		"y@31/38=o@37",
		"y@32/39=ors@39",
		"x@34/41=q@38",
		"x@37/44=qu@44",
		"y@38/45=rs@39",
		"x@39/46=u@44",
		"x@42/49=uv@49",
		"x@45/52=v@49",
		"x@47/54=vw@54",
		"x@48/55=vwy@55",
		"x@50/57=wy@55",
		"y@50/57=x@57",
		"x@55/62=y@55",
		"x@58/65=z@65",
		"y@58/65=c@65",
		"x@72/79=d@79",
		"x@74/81=df@81",
		"y@74/81=e@81",
		"x@75/82=dfg@82",
		"x@77/84=dfgh@84",
		"x@78/85=dfghi@85",
		"x@80/87=fghi@85",
		"x@82/89=ghij@89",
		"x@83/90=hij@89",
		"x@84/91=hijk@91",
		"x@85/92=ijk@91",
		"x@86/93=jk@91",
		"x@87/94=jkl@94",
		"x@90/97=kl@94",
		"y@90/97=n@97",
		"x@92/99=l@94",
		"x@94/101=lo@101",
		"x@95/102=o@101",
		"y@95/102=n@97",
		"y@100/107=q@107",
		"y@101/108=qrt@108",
		"x@105/112=u@112",
		"y@108/115=rt@108",
		"x@110/117=uv@117",
		"x@112/119=uvw@119",
		"x@113/120=vw@119",
		"x@114/121=vwx@121",
		"y@116/123=zb@123",
		"x@118/125=wx@121",
		"x@120/127=x@121",
		"y@120/127=z@123",
		"x@123/130=ce@130",
		"y@124/131=f@131",
		"dropped=20",
	},
	"reduce-main-close": {
		"a@0/10=ABE@7",
		"b@0/10=C@5",
		"a@2/12=ABEH@12",
		"a@3/13=ABH@12",
		"a@4/14=BH@12",
		"a@5/15=BDH@15",
		"a@8/18=DH@15",
		"a@10/20=DFGHM@20",
		"a@11/21=DFGH@20",
		"a@13/23=DFG@20",
		"a@16/26=FGJ@26",
		"b@16/26=I@26",
		"a@21/31=J@26",
		"a@30/40=K@40",
		"a@35/45=KR@45",
		"c@40/50=O@50",
		"a@41/51=R@45",
		"c@60/70=S@70",
		"c@65/75=ST@75",
		"a@90/100=U@100",
		"dropped=9",
	},
	"count-edge-update": {
		"a@15/25=1@25",
		"b@35/45=1@45",
		"c@60/70=1@70",
		"dropped=0",
	},
	"count-edge-close": {
		"a@15/25=1@25",
		"dropped=0",
	},
}
