package kstreamtest_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
)

// sjDriver builds a stream-stream join of topics l and r written to out by build, and
// returns a driver and a function that pipes (topic, key, value, ms) records (value "" with
// null true for a Kafka null) and returns the output as "key|value|ms" lines.
func sjDriver(t *testing.T, build func(l, r kstream.KStream[string, string]) kstream.KStream[string, string]) (*kstreamtest.Driver, func(recs ...sjIn) []string) {
	t.Helper()
	b := kstream.NewBuilder()
	build(kstream.Stream(b, "l", serde.String(), serde.String()), kstream.Stream(b, "r", serde.String(), serde.String())).
		To("out", serde.String(), serde.String())
	d := driverWith(t, b, kstream.Config{ApplicationID: "sj"})
	ins := map[string]*kstreamtest.InputTopic[string, string]{
		"l": kstreamtest.CreateInputTopic(d, "l", serde.String(), serde.String()),
		"r": kstreamtest.CreateInputTopic(d, "r", serde.String(), serde.String()),
	}
	out := kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.String())
	return d, func(recs ...sjIn) []string {
		t.Helper()
		for _, r := range recs {
			var kb, vb []byte
			if r.key != "" {
				kb = []byte(r.key)
			}
			if r.value != "" {
				vb = []byte(r.value)
			}
			if err := ins[r.topic].PipeRaw(kb, vb, time.UnixMilli(r.ms)); err != nil {
				t.Fatal(err)
			}
		}
		got, err := out.ReadRecords()
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, r := range got {
			lines = append(lines, fmt.Sprintf("%s|%s|%d", r.Key, r.Value, r.Timestamp.UnixMilli()))
		}
		return lines
	}
}

// sjIn is an input record of sjDriver: an empty key or value is a Kafka null.
type sjIn struct {
	topic, key, value string
	ms                int64
}

func sjOuter(_ string, l string, lok bool, r string, rok bool) string {
	if !lok {
		l = "-"
	}
	if !rok {
		r = "-"
	}
	return l + "+" + r
}

func sjCheck(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s: got %q, want %q", what, got, want)
	}
}

// Records with a null key or value are dropped by an inner join and counted; so is a
// record too late for its window store (its segment has expired), which still joins the
// other side's records that are kept.
func TestStreamJoinDroppedRecords(t *testing.T) {
	d, pipe := sjDriver(t, func(l, r kstream.KStream[string, string]) kstream.KStream[string, string] {
		return kstream.JoinWindowed(l, r, func(_ string, a, b string) string { return a + "+" + b }, kstream.JoinWindowsOf(time.Second))
	})
	sjCheck(t, "nulls", pipe(sjIn{"l", "", "L0", 1000}, sjIn{"l", "a", "", 1000}, sjIn{"r", "a", "", 1000}, sjIn{"r", "", "R0", 1000}))
	if n := d.DroppedRecords(); n != 4 {
		t.Errorf("dropped %d records with a null key or value, want 4", n)
	}
	// Stream time of the left store moves 10 minutes on (segments of one minute: the
	// retention of 2s is below Kafka Streams' minimum segment interval).
	sjCheck(t, "on time", pipe(sjIn{"r", "a", "R1", 600_500}, sjIn{"l", "a", "L1", 600_000}), "a|L1+R1|600500")
	sjCheck(t, "late", pipe(sjIn{"l", "a", "L2", 1_000}))
	if n := d.DroppedRecords(); n != 5 {
		t.Errorf("dropped %d records, want 5 (the late one)", n)
	}
	ls, err := kstreamtest.WindowStore(d, "KSTREAM-JOINTHIS-0000000004-store", 0, serde.String(), serde.String())
	if err != nil {
		t.Fatal(err)
	}
	it, err := ls.All()
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var kept []string
	for it.Next() {
		kept = append(kept, fmt.Sprintf("%s@%d=%s", it.Key().Key, it.Key().StartMs(), it.Value()))
	}
	sjCheck(t, "left store", kept, "a@600000=L1")
}

// The window stores keep duplicates: two records with the same key and timestamp both
// join, and each join of the other side sees both.
func TestStreamJoinDuplicates(t *testing.T) {
	_, pipe := sjDriver(t, func(l, r kstream.KStream[string, string]) kstream.KStream[string, string] {
		return kstream.JoinWindowed(l, r, func(_ string, a, b string) string { return a + "+" + b }, kstream.JoinWindowsOf(time.Second))
	})
	sjCheck(t, "duplicates", pipe(sjIn{"l", "a", "L1", 5000}, sjIn{"l", "a", "L2", 5000}, sjIn{"r", "a", "R1", 5000}, sjIn{"r", "a", "R2", 5500}),
		"a|L1+R1|5000", "a|L2+R1|5000", "a|L1+R2|5500", "a|L2+R2|5500")
}

// Asymmetric windows with a negative before: a left record at t joins right records in
// [t+1s, t+3s] only, and a right record at t left records in [t-3s, t-1s].
func TestStreamJoinNegativeBefore(t *testing.T) {
	w := kstream.JoinWindowsOf(0).Before(-time.Second).After(3 * time.Second).WithGrace(10 * time.Second)
	_, pipe := sjDriver(t, func(l, r kstream.KStream[string, string]) kstream.KStream[string, string] {
		return kstream.JoinWindowed(l, r, func(_ string, a, b string) string { return a + "+" + b }, w)
	})
	sjCheck(t, "negative before", pipe(
		sjIn{"l", "a", "L10", 10_000},
		sjIn{"r", "a", "R10", 10_000}, // same time: outside [11s, 13s]
		sjIn{"r", "a", "R11", 11_000},
		sjIn{"r", "a", "R13", 13_000},
		sjIn{"r", "a", "R14", 14_000},
		sjIn{"l", "a", "L12", 12_000}, // joins R13 and R14 (in [13s, 15s])
	), "a|L10+R11|11000", "a|L10+R13|13000", "a|L12+R13|13000", "a|L12+R14|14000")
}

// An outer join emits a pending non-match once stream time has passed its timestamp plus
// after (left records; before for right ones) plus grace, not before; the non-match keeps
// its own timestamp and key and has the headers of the record in hand. A match within the
// window removes it: no non-match then.
func TestStreamOuterJoinWindowClose(t *testing.T) {
	w := kstream.JoinWindowsOf(2 * time.Second).After(5 * time.Second).WithGrace(time.Second)
	_, pipe := sjDriver(t, func(l, r kstream.KStream[string, string]) kstream.KStream[string, string] {
		return kstream.OuterJoinWindowed(l, r, sjOuter, w)
	})
	// The left record at 1s closes after 1 + 5 + 1 = 7s.
	sjCheck(t, "pending", pipe(sjIn{"l", "a", "L1", 1000}))
	sjCheck(t, "at 7s", pipe(sjIn{"l", "x", "X", 7000}))
	sjCheck(t, "at 7.001s", pipe(sjIn{"l", "y", "Y", 7001}), "a|L1+-|1000")
	sjCheck(t, "c matched", pipe(sjIn{"l", "c", "L3", 8000}, sjIn{"r", "c", "R4", 9000}), "c|L3+R4|9000")
	// Later, every pending record closes, in the store's order (timestamp, the right side
	// before the left, key); L3 was matched and is not among them.
	sjCheck(t, "far later", pipe(sjIn{"r", "z", "Z", 60_000}), "x|X+-|7000", "y|Y+-|7001")
	sjCheck(t, "right closes", pipe(sjIn{"r", "b", "B", 120_000}), "z|-+Z|60000")
}

// A left join's null-key left records are non-matches at once (KIP-962); null-key right
// records and null values are dropped.
func TestStreamLeftJoinNullKeys(t *testing.T) {
	d, pipe := sjDriver(t, func(l, r kstream.KStream[string, string]) kstream.KStream[string, string] {
		return kstream.LeftJoinWindowed(l, r, func(_ string, a, b string, found bool) string { return fmt.Sprintf("%s+%s/%v", a, b, found) }, kstream.JoinWindowsOf(time.Second))
	})
	sjCheck(t, "null keys", pipe(sjIn{"l", "", "L0", 1000}, sjIn{"r", "", "R0", 1000}, sjIn{"l", "a", "", 1000}),
		"|L0+/false|1000")
	if n := d.DroppedRecords(); n != 2 {
		t.Errorf("dropped %d records, want 2", n)
	}
}

// A self-join of a stream with a stream derived from it is not a self-join: two stores.
func TestStreamJoinSelfDescribe(t *testing.T) {
	b := kstream.NewBuilder()
	s := kstream.Stream(b, "s", serde.String(), serde.String())
	f := s.Filter(func(string, string) bool { return true })
	kstream.JoinWindowed(s, f, func(_ string, a, b string) string { return a + b }, kstream.JoinWindowsOf(time.Second)).To("out", serde.String(), serde.String())
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	got := topo.Describe()
	for _, want := range []string{
		"Processor: KSTREAM-JOINTHIS-0000000004 (stores: [KSTREAM-JOINOTHER-0000000005-store])",
		"Processor: KSTREAM-JOINOTHER-0000000005 (stores: [KSTREAM-JOINTHIS-0000000004-store])",
		"<-- KSTREAM-JOINTHIS-0000000004, KSTREAM-JOINOTHER-0000000005",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("describe lacks %q:\n%s", want, got)
		}
	}
}
