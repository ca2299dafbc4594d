package kstreamtest_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
)

// When the non-matches of left and outer stream-stream joins are emitted (issue 25 item 5):
// each as soon as stream time passes the end of its own window plus the grace, unless
// kstream.JoinJavaNonMatchTiming asks for Kafka Streams' timing.

// shopJoin builds a join of topics orders and payments, written to out, and returns a
// function that pipes records (topic "o" for orders, "p" for payments) at times of day
// "hh:mm:ss" and returns the output since the last call as "key value @hh:mm:ss" lines.
func shopJoin(t *testing.T, build func(o, p kstream.KStream[string, string]) kstream.KStream[string, string]) func(recs ...[4]string) []string {
	t.Helper()
	b := kstream.NewBuilder()
	build(kstream.Stream(b, "orders", serde.String(), serde.String()), kstream.Stream(b, "payments", serde.String(), serde.String())).
		To("out", serde.String(), serde.String())
	d := driverWith(t, b, kstream.Config{ApplicationID: "shop"})
	ins := map[string]*kstreamtest.InputTopic[string, string]{
		"o": kstreamtest.CreateInputTopic(d, "orders", serde.String(), serde.String()),
		"p": kstreamtest.CreateInputTopic(d, "payments", serde.String(), serde.String()),
	}
	out := kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.String())
	return func(recs ...[4]string) []string {
		t.Helper()
		for _, r := range recs {
			if err := ins[r[0]].PipeAt(r[1], r[2], confShopTime(r[3])); err != nil {
				t.Fatal(err)
			}
		}
		got, err := out.ReadRecords()
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, r := range got {
			day := r.Timestamp.Sub(time.UnixMilli(confT0))
			lines = append(lines, fmt.Sprintf("%s %s @%s", r.Key, r.Value, time.Date(0, 1, 1, 10, 0, 0, 0, time.UTC).Add(day).Format(time.TimeOnly)))
		}
		return lines
	}
}

// The shop's left join of orders with their payments within 5 minutes: an unpaid order is
// emitted by the first record that moves stream time past its time + 5 minutes (+ grace),
// even while later orders wait. The record at 10:01:40 closes o4's window and reads the
// non-match store while o9 (10:01:05) and o11 (10:01:20) wait; Kafka Streams then keeps
// 10:01:20, the last timestamp it read, as its minTime, and does not look again before
// stream time passes 10:06:20, so that o9 waited (as issue 25 reported) until then.
func TestStreamLeftJoinNonMatchOnTime(t *testing.T) {
	for _, tc := range []struct {
		name  string
		grace time.Duration
		opts  []kstream.Option
		o4    string // the first order, whose window closes at 10:01:30
		// o9's and o17's non-matches: the last record that leaves each waiting, then
		// the one that emits it.
		o9, o17 [2]string
	}{
		{"no grace", 0, nil, "09:56:30", [2]string{"10:06:05", "10:06:06"}, [2]string{"10:06:40", "10:06:41"}},
		{"grace 30s", 30 * time.Second, nil, "09:56:00", [2]string{"10:06:35", "10:06:36"}, [2]string{"10:07:10", "10:07:11"}},
		// Kafka Streams' timing: o9 waits for o11's 10:01:20 + 5 minutes, and o17 for the
		// order at 10:06:20, the last record read at 10:06:21.
		{"as Java", 0, []kstream.Option{kstream.JoinJavaNonMatchTiming()}, "09:56:30", [2]string{"10:06:20", "10:06:21"}, [2]string{"10:11:20", "10:11:21"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pipe := shopJoin(t, func(o, p kstream.KStream[string, string]) kstream.KStream[string, string] {
				return kstream.LeftJoinWindowed(o, p, confSJLeft, kstream.JoinWindowsOf(5*time.Minute).WithGrace(tc.grace), tc.opts...)
			})
			sjCheck(t, "first orders", pipe([4]string{"o", "o4", "book", tc.o4}, [4]string{"o", "o9", "pen", "10:01:05"}, [4]string{"o", "o11", "lamp", "10:01:20"}))
			sjCheck(t, "o4's window closes", pipe([4]string{"o", "o17", "cup", "10:01:40"}), "o4 book+- @"+tc.o4)
			sjCheck(t, "o11 paid", pipe([4]string{"p", "o11", "card", "10:02:00"}), "o11 lamp+card @10:02:00")
			sjCheck(t, "traffic", pipe([4]string{"o", "o29", "desk", "10:03:30"}, [4]string{"o", "o36", "chair", "10:06:00"}))
			// Orders with no payment, one second of stream time after another.
			order := func(at string) []string { return pipe([4]string{"o", "x" + strings.ReplaceAll(at, ":", ""), "x", at}) }
			sjCheck(t, "o9 waits at "+tc.o9[0], order(tc.o9[0]))
			sjCheck(t, "o9 due at "+tc.o9[1], order(tc.o9[1]), "o9 pen+- @10:01:05")
			sjCheck(t, "o17 waits at "+tc.o17[0], order(tc.o17[0]))
			got := order(tc.o17[1])
			if len(got) == 0 || got[0] != "o17 cup+- @10:01:40" {
				t.Errorf("o17 due at %s: got %q, want o17's non-match first", tc.o17[1], got)
			}
		})
	}
}

// An outer join emits the non-matches of both sides on time, with asymmetric windows too:
// a payment (right record) at t joins orders in [t - after, t + before], so its window
// closes at t + before + grace, an order's at t + after + grace. The payment p2 waits in the
// store behind the order o1, whose window is longer and still open; Kafka Streams' order
// side (the left one) looks at the store only once stream time is past its minTime (o1's
// time) + after + grace, 10:05:30, so with only orders coming p2 waits until then.
func TestStreamOuterJoinNonMatchesOnTime(t *testing.T) {
	w := kstream.JoinWindowsOf(0).Before(time.Minute).After(5 * time.Minute).WithGrace(30 * time.Second)
	for _, java := range []bool{false, true} {
		t.Run(fmt.Sprintf("java=%v", java), func(t *testing.T) {
			var opts []kstream.Option
			if java {
				opts = append(opts, kstream.JoinJavaNonMatchTiming())
			}
			pipe := shopJoin(t, func(o, p kstream.KStream[string, string]) kstream.KStream[string, string] {
				return kstream.OuterJoinWindowed(o, p, confSJOuter, w, opts...)
			})
			// o1 closes at 10:05:30; p2 at 10:01:20 + 1m30s = 10:02:50.
			sjCheck(t, "waiting", pipe([4]string{"o", "o1", "vase", "10:00:00"}, [4]string{"p", "p2", "refund", "10:01:20"}))
			sjCheck(t, "o3", pipe([4]string{"o", "o3", "cup", "10:02:00"}))
			sjCheck(t, "p2 waits at 10:02:50", pipe([4]string{"o", "o4", "jar", "10:02:50"}))
			got := pipe([4]string{"o", "o5", "rug", "10:02:51"})
			if java {
				sjCheck(t, "Java: p2 waits for o1's window", got)
				sjCheck(t, "Java: both at 10:05:31", pipe([4]string{"o", "o6", "bed", "10:05:31"}), "o1 vase+- @10:00:00", "p2 -+refund @10:01:20")
				return
			}
			sjCheck(t, "p2 due at 10:02:51", got, "p2 -+refund @10:01:20")
			sjCheck(t, "o1 waits at 10:05:30", pipe([4]string{"o", "o6", "bed", "10:05:30"}))
			sjCheck(t, "o1 due at 10:05:31", pipe([4]string{"p", "p7", "card", "10:05:31"}), "o1 vase+- @10:00:00")
			// o3 closes at 10:07:30, p7 at 10:07:01; o4 (10:02:50) is still open.
			sjCheck(t, "o3 and p7 due at 10:07:31", pipe([4]string{"p", "p8", "card", "10:07:31"}), "o3 cup+- @10:02:00", "p7 -+card @10:05:31")
		})
	}
}

// The record whose time closes a window emits its non-matches even when it is itself
// dropped (a null value) or emitted at once (a null key): Kafka Streams looks for closed
// windows only after it has kept the record, so it emits them at the next record.
func TestStreamLeftJoinNonMatchOnTimeDroppedRecord(t *testing.T) {
	d, pipe := sjDriver(t, func(l, r kstream.KStream[string, string]) kstream.KStream[string, string] {
		return kstream.LeftJoinWindowed(l, r, confSJLeft, kstream.JoinWindowsOf(time.Second))
	})
	sjCheck(t, "pending", pipe(sjIn{"l", "a", "L1", 1000}))
	sjCheck(t, "null value", pipe(sjIn{"l", "b", "", 2001}), "a|L1+-|1000")
	sjCheck(t, "pending", pipe(sjIn{"l", "c", "L3", 3000}))
	sjCheck(t, "null key", pipe(sjIn{"l", "", "L4", 4001}), "c|L3+-|3000", "|L4+-|4001")
	if n := d.DroppedRecords(); n != 1 {
		t.Errorf("dropped %d records, want 1", n)
	}
}

// confSJOnTimeVersusJava are, for the scenarios of the conformance test run without
// kstream.JoinJavaNonMatchTiming, the records they emit earlier than Java does,
// "<record>: i=<Java's trigger> -> i=<kstream's>", the trigger being the input record whose
// processing emitted it (the header i of the output), and those Java does not emit,
// "<record>: only kstream, i=<kstream's trigger>". Every other record of their output is
// Java's, emitted by the same input record.
var confSJOnTimeVersusJava = map[string][]string{
	// R3 (4s, a right record: closes at 4 + 5 + 3 = 12s) is due at L11 (16s); Java's minTime
	// is L4's 9s, read at R5 (12s) before R5 matched L4, so it looks again only past 17s.
	"sj-outer":       {"k|-+R3|1700000004000: i=12 -> i=11"},
	"sj-named-outer": {"k|-+R3|1700000004000: i=12 -> i=11"},
	// Triggers' times: o9 at 10:06:10 instead of 10:06:25, o42 at 10:12:00 instead of
	// 10:16:30, o44 at 10:14:30 instead of 10:16:30. o17's window closes at 10:06:40: its
	// non-match is out at 10:06:50 (record 11) when its late payment comes (record 12,
	// stamped 10:06:00), which Java's o17 still waiting in the store meets: Java emits the
	// match only, kstream the non-match, then the match.
	"sj-shop-left": {
		"o9|o9:pen+-|1700000065000: i=10 -> i=8",
		"o17|o17:cup+-|1700000100000: only kstream, i=11",
		"o42|o42:vase+-|1700000410000: i=21 -> i=18",
		"o44|o44:fork+-|1700000540000: i=21 -> i=20",
	},
	"sj-shop-left-grace": {
		"o9|o9:pen+-|1700000065000: i=14 -> i=13",
		"o36|o36:chair+-|1700000370000: i=20 -> i=19",
		"o44|o44:fork+-|1700000540000: i=22 -> i=21",
	},
	"sj-shop-outer": {
		"o9|o9:pen+-|1700000065000: i=14 -> i=13",
		"o36|o36:chair+-|1700000370000: i=20 -> i=19",
		"o44|o44:fork+-|1700000540000: i=22 -> i=21",
	},
}

// Run without kstream.JoinJavaNonMatchTiming, the stream-join scenarios of the conformance
// test emit the records of Java's goldens, each by the same input record as Java or an
// earlier one, never a later one, and no others, except exactly as confSJOnTimeVersusJava
// lists, with 1 partition and, key by key, with 4.
func TestStreamJoinNonMatchesOnTimeVersusJava(t *testing.T) {
	names := map[string]bool{}
	for _, sc := range confStreamJoinScenarios(nil) {
		names[sc.name] = true
		t.Run(sc.name, func(t *testing.T) {
			want := confGolden(t, filepath.Join("testdata", "conformance", sc.name+".txt"))
			_, got1 := confRun(sc.name, sc.build)
			_, got4 := confRun(sc.name, sc.build, kstreamtest.Partitions(4))
			for _, run := range []struct {
				what string
				got  []string
			}{{"1 partition", got1}, {"4 partitions", got4}} {
				earlier, err := sjTriggerDiff(want, run.got)
				if err != nil {
					t.Errorf("%s: %v", run.what, err)
					continue
				}
				slices.Sort(earlier)
				wantEarlier := slices.Sorted(slices.Values(confSJOnTimeVersusJava[sc.name]))
				if !slices.Equal(earlier, wantEarlier) {
					t.Errorf("%s: emitted earlier than Java:\n got %q\nwant %q", run.what, earlier, wantEarlier)
				}
			}
		})
	}
	for name := range confSJOnTimeVersusJava {
		if !names[name] {
			t.Errorf("confSJOnTimeVersusJava names %s, no scenario", name)
		}
	}
}

// sjTriggerDiff compares an output with Java's (lines "key|value|ts|i=N"): Java's records,
// each emitted by the same input record N or an earlier one, in an order that follows the
// input (N never goes down), and maybe others. It returns the records emitted earlier, as
// "<key|value|ts>: i=<Java's> -> i=<got's>", and those Java did not emit, as
// "<key|value|ts>: only kstream, i=<got's>", or an error.
func sjTriggerDiff(java, got []string) ([]string, error) {
	split := func(l string) (rec string, trigger int, err error) {
		i := strings.LastIndex(l, "|i=")
		if i < 0 {
			return "", 0, fmt.Errorf("no trigger header in %q", l)
		}
		_, err = fmt.Sscan(l[i+3:], &trigger)
		return l[:i], trigger, err
	}
	javaAt := map[string][]int{}
	for _, l := range java {
		rec, n, err := split(l)
		if err != nil {
			return nil, err
		}
		javaAt[rec] = append(javaAt[rec], n)
	}
	var earlier []string
	last := -1
	for _, l := range got {
		rec, n, err := split(l)
		if err != nil {
			return nil, err
		}
		if n < last {
			return nil, fmt.Errorf("%q after a record of input %d", l, last)
		}
		last = n
		at := javaAt[rec]
		if len(at) == 0 {
			earlier = append(earlier, fmt.Sprintf("%s: only kstream, i=%d", rec, n))
			continue
		}
		javaAt[rec] = at[1:]
		switch {
		case n > at[0]:
			return nil, fmt.Errorf("%q: later than Java's (i=%d)", l, at[0])
		case n < at[0]:
			earlier = append(earlier, fmt.Sprintf("%s: i=%d -> i=%d", rec, at[0], n))
		}
	}
	for rec, at := range javaAt {
		if len(at) > 0 {
			return nil, fmt.Errorf("%s: missing (Java emitted it at i=%v)", rec, at)
		}
	}
	return earlier, nil
}

// A record later than the grace can still match a left record whose window has closed (as
// in Kafka Streams). kstream has emitted that record's non-match by then, so that the match
// follows it; with Kafka Streams' timing the left record may still wait in the store, and
// the match removes it: no non-match at all.
func TestStreamLeftJoinMatchAfterNonMatch(t *testing.T) {
	for _, java := range []bool{false, true} {
		t.Run(fmt.Sprintf("java=%v", java), func(t *testing.T) {
			var opts []kstream.Option
			if java {
				opts = append(opts, kstream.JoinJavaNonMatchTiming())
			}
			pipe := shopJoin(t, func(o, p kstream.KStream[string, string]) kstream.KStream[string, string] {
				return kstream.LeftJoinWindowed(o, p, confSJLeft, kstream.JoinWindowsOf(5*time.Minute), opts...)
			})
			sjCheck(t, "orders", pipe([4]string{"o", "o4", "book", "09:56:30"}, [4]string{"o", "o9", "pen", "10:01:05"},
				[4]string{"o", "o11", "lamp", "10:01:20"}, [4]string{"o", "o17", "cup", "10:01:40"}), "o4 book+- @09:56:30")
			got := pipe([4]string{"o", "o36", "chair", "10:06:06"})
			// o9's payment, stamped 10:05:00, comes after stream time has passed 10:06:05.
			got = append(got, pipe([4]string{"p", "o9", "card", "10:05:00"})...)
			if java {
				sjCheck(t, "Java: the late payment removes o9 from the store", got, "o9 pen+card @10:05:00")
			} else {
				sjCheck(t, "the non-match, then the late match", got, "o9 pen+- @10:01:05", "o9 pen+card @10:05:00")
			}
		})
	}
}
