package kstreamtest_test

import (
	"strconv"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/serde"
)

// The stream-stream join scenarios of the conformance test (issue 12 item 1), mirrored one
// for one, in the same order and with the same names, by
// testing/conformance/src/main/java/conformance/StreamJoinScenarios.java. They join topic
// sleft with sright (or sleft with itself) and write "l+r" to out, "-" standing for the
// missing side of a non-match. Every key is a, b or k, all in partition 0 of 4, so that the
// run with 4 partitions has one stream time, as Java's with one.

func init() {
	confSetFamilyInput("streamjoin", confStreamJoinInput)
	confScenarios = append(confScenarios, confStreamJoinScenarios(kstream.JoinJavaNonMatchTiming())...)
}

func confSLeft(b *kstream.Builder) kstream.KStream[string, string] {
	return kstream.Stream(b, "sleft", serde.String(), serde.String())
}

func confSRight(b *kstream.Builder) kstream.KStream[string, string] {
	return kstream.Stream(b, "sright", serde.String(), serde.String())
}

func confSJInner(_ string, l, r string) string { return l + "+" + r }

func confSJLeft(_ string, l, r string, found bool) string {
	if !found {
		r = "-"
	}
	return l + "+" + r
}

func confSJOuter(_ string, l string, lok bool, r string, rok bool) string {
	if !lok {
		l = "-"
	}
	if !rok {
		r = "-"
	}
	return l + "+" + r
}

var (
	confSJGrace   = kstream.JoinWindowsOf(5 * time.Second).WithGrace(3 * time.Second)
	confSJNoGrace = kstream.JoinWindowsOf(5 * time.Second)
	confSJAsym    = kstream.JoinWindowsOf(5 * time.Second).WithGrace(time.Second).Before(2 * time.Second).After(6 * time.Second)
)

var (
	confShopNoGrace = kstream.JoinWindowsOf(5 * time.Minute)
	confShopGrace   = kstream.JoinWindowsOf(5 * time.Minute).WithGrace(time.Minute)
)

func confShopOrders(b *kstream.Builder) kstream.KStream[string, string] {
	return kstream.Stream(b, "shop-orders", serde.String(), serde.String())
}

func confShopPayments(b *kstream.Builder) kstream.KStream[string, string] {
	return kstream.Stream(b, "shop-payments", serde.String(), serde.String())
}

// confSJRekey is a key-changing operator that keeps the key (a null key, "" here, becomes a).
func confSJRekey(s kstream.KStream[string, string]) kstream.KStream[string, string] {
	return kstream.SelectKey(s, func(k, _ string) string {
		if k == "" {
			return "a"
		}
		return k
	})
}

// confScenario is an element of confScenarios.
type confScenario = struct {
	name  string
	build func(b *kstream.Builder)
}

// confStreamJoinScenarios returns the scenarios, each left and outer join with the option
// timing: kstream.JoinJavaNonMatchTiming() in the conformance test, so that they emit their
// non-matches when Java does, nil in TestStreamJoinNonMatchesOnTimeVersusJava.
func confStreamJoinScenarios(timing kstream.Option) []confScenario {
	return []confScenario{
		{"sj-inner", func(b *kstream.Builder) {
			confOut(kstream.JoinWindowed(confSLeft(b), confSRight(b), confSJInner, confSJGrace))
		}},
		{"sj-inner-nograce", func(b *kstream.Builder) {
			confOut(kstream.JoinWindowed(confSLeft(b), confSRight(b), confSJInner, confSJNoGrace))
		}},
		{"sj-left", func(b *kstream.Builder) {
			confOut(kstream.LeftJoinWindowed(confSLeft(b), confSRight(b), confSJLeft, confSJGrace, timing))
		}},
		{"sj-left-nograce", func(b *kstream.Builder) {
			confOut(kstream.LeftJoinWindowed(confSLeft(b), confSRight(b), confSJLeft, confSJNoGrace, timing))
		}},
		{"sj-outer", func(b *kstream.Builder) {
			confOut(kstream.OuterJoinWindowed(confSLeft(b), confSRight(b), confSJOuter, confSJGrace, timing))
		}},
		{"sj-outer-nograce", func(b *kstream.Builder) {
			confOut(kstream.OuterJoinWindowed(confSLeft(b), confSRight(b), confSJOuter, confSJNoGrace, timing))
		}},
		{"sj-left-asym", func(b *kstream.Builder) {
			confOut(kstream.LeftJoinWindowed(confSLeft(b), confSRight(b), confSJLeft, confSJAsym, timing))
		}},
		{"sj-outer-asym", func(b *kstream.Builder) {
			confOut(kstream.OuterJoinWindowed(confSLeft(b), confSRight(b), confSJOuter, confSJAsym, timing))
		}},
		{"sj-named", func(b *kstream.Builder) {
			confOut(kstream.LeftJoinWindowed(confSLeft(b), confSRight(b), confSJLeft, confSJGrace,
				kstream.Named("pay"), kstream.JoinStoreName("paystore"), kstream.JoinSerdes(serde.String(), serde.String(), serde.String()), timing))
		}},
		{"sj-named-outer", func(b *kstream.Builder) {
			confOut(kstream.OuterJoinWindowed(confSLeft(b), confSRight(b), confSJOuter, confSJGrace, kstream.Named("both"), timing))
		}},
		{"sj-rekeyed", func(b *kstream.Builder) {
			l := confSJRekey(confSLeft(b))
			confOut(kstream.JoinWindowed(l, confSJRekey(confSRight(b)), confSJInner, confSJGrace))
		}},
		{"sj-rekeyed-named", func(b *kstream.Builder) {
			l := confSJRekey(confSLeft(b))
			confOut(kstream.LeftJoinWindowed(l, confSRight(b), confSJLeft, confSJGrace, kstream.Named("rk"), timing))
		}},
		{"sj-self", func(b *kstream.Builder) {
			s := confSLeft(b)
			confOut(kstream.JoinWindowed(s, s, confSJInner, confSJGrace))
		}},
		{"sj-self-nograce", func(b *kstream.Builder) {
			s := confSLeft(b)
			confOut(kstream.JoinWindowed(s, s, confSJInner, confSJNoGrace))
		}},
		// Java's self-join rewrite takes any join of a stream with itself: a left self-join
		// joins as the inner one (no non-matches, null keys dropped), and so does kstream's.
		{"sj-self-left", func(b *kstream.Builder) {
			s := confSLeft(b)
			confOut(kstream.LeftJoinWindowed(s, s, confSJLeft, confSJGrace, timing))
		}},
		// A re-keyed stream joined with itself: one repartition (a named join's -left and -right
		// merge, as Java's optimizer merges them) and a self-join.
		{"sj-self-rekeyed", func(b *kstream.Builder) {
			s := confSJRekey(confSLeft(b))
			confOut(kstream.JoinWindowed(s, s, confSJInner, confSJGrace))
		}},
		{"sj-self-rekeyed-named", func(b *kstream.Builder) {
			s := confSJRekey(confSLeft(b))
			confOut(kstream.JoinWindowed(s, s, confSJInner, confSJGrace, kstream.Named("sr")))
		}},
		// The shop (issue 25 item 5): orders left-joined with their payments within 5 minutes,
		// over topics shop-orders and shop-payments (confShopRecords): when Java emits each
		// unpaid order, which is later than its window's close for several of them.
		{"sj-shop-left", func(b *kstream.Builder) {
			confOut(kstream.LeftJoinWindowed(confShopOrders(b), confShopPayments(b), confSJLeft, confShopNoGrace, timing))
		}},
		{"sj-shop-left-grace", func(b *kstream.Builder) {
			confOut(kstream.LeftJoinWindowed(confShopOrders(b), confShopPayments(b), confSJLeft, confShopGrace, timing))
		}},
		{"sj-shop-outer", func(b *kstream.Builder) {
			confOut(kstream.OuterJoinWindowed(confShopOrders(b), confShopPayments(b), confSJOuter, confShopGrace, timing))
		}},
	}
}

// confStreamJoinInput is StreamJoinScenarios.input: topics sleft and sright, record i with
// header i, timestamps T0 + offset.
func confStreamJoinInput() []confRecord {
	type in struct {
		topic  string
		key    *string
		value  *string
		offset int64
	}
	a, b, k := confPtr("a"), confPtr("b"), confPtr("k")
	v := confPtr
	ins := []in{
		{"sleft", a, v("L0"), 1_000},
		{"sright", a, v("R1"), 2_000},
		{"sleft", b, v("L2"), 3_000},
		{"sright", k, v("R3"), 4_000},
		{"sleft", a, v("L4"), 9_000},
		{"sright", a, v("R5"), 12_000},
		{"sright", b, v("R6"), 7_000},
		{"sleft", nil, v("L7"), 8_000},
		{"sright", nil, v("R8"), 8_500},
		{"sleft", a, nil, 9_500},
		{"sright", b, nil, 10_000},
		{"sleft", k, v("L11"), 16_000},
		{"sleft", b, v("L12"), 21_000},
		{"sright", a, v("R13"), 14_000},
		{"sright", k, v("R14"), 30_000},
		{"sleft", k, v("L15"), 33_000},
		{"sleft", a, v("L16"), 24_000},
		{"sleft", a, v("L17"), 26_500},
		{"sright", a, v("R18"), 27_000},
		{"sleft", b, v("L19"), 100_000},
		{"sright", b, v("R20"), 101_000},
		{"sright", b, v("R21"), 5_000},
		{"sleft", a, v("L22"), 2_000},
		{"sleft", k, v("L23"), 102_000},
		{"sright", k, v("R24"), 103_500},
		{"sleft", k, v("L25"), 103_500},
		{"sright", a, v("R26"), 104_000},
		{"sleft", a, v("L27"), 110_000},
		{"sright", b, v("R28"), 111_000},
		{"sleft", b, v("L29"), 200_000},
	}
	recs := make([]confRecord, len(ins))
	for i, r := range ins {
		recs[i] = confRecord{topic: r.topic, key: r.key, value: r.value, ts: time.UnixMilli(confT0 + r.offset),
			headers: []kstream.Header{{Key: "i", Value: []byte(strconv.Itoa(i))}}}
	}
	for i, r := range confShopRecords {
		recs = append(recs, confRecord{topic: r.topic, key: confPtr(r.key), value: confPtr(r.value), ts: confShopTime(r.at),
			headers: []kstream.Header{{Key: "i", Value: []byte(strconv.Itoa(i))}}})
	}
	return recs
}

// confShopTime is a time of the shop's day ("10:01:05") as a timestamp: T0 stands for
// 10:00:00.
func confShopTime(hms string) time.Time {
	t, err := time.Parse(time.TimeOnly, hms)
	if err != nil {
		panic(err)
	}
	return time.UnixMilli(confT0).Add(t.Sub(time.Date(0, 1, 1, 10, 0, 0, 0, time.UTC)))
}

// confShopRecords are the shop's orders and payments, piped after the records above
// (StreamJoinScenarios.shop); record i of this list has header i. The keys are order ids
// chosen to go to partition 0 of 4, as a, b and k do. The comments say when each unpaid
// order's window closes with the 5 minutes of sj-shop-left (no grace).
var confShopRecords = []struct{ topic, key, value, at string }{
	{"shop-orders", "o4", "o4:book", "09:56:30"},    // 0: unpaid; its window closes at 10:01:30
	{"shop-orders", "o9", "o9:pen", "10:01:05"},     // 1: unpaid: due once stream time passes 10:06:05
	{"shop-orders", "o11", "o11:lamp", "10:01:20"},  // 2: paid at 10:02:00
	{"shop-orders", "o17", "o17:cup", "10:01:40"},   // 3: unpaid; closes o4's window
	{"shop-payments", "o11", "card", "10:02:00"},    // 4
	{"shop-orders", "o29", "o29:desk", "10:03:30"},  // 5
	{"shop-payments", "o29", "cash", "10:04:10"},    // 6
	{"shop-orders", "o31", "o31:mug", "10:05:50"},   // 7: paid at 10:08:00
	{"shop-orders", "o36", "o36:chair", "10:06:10"}, // 8: stream time passes o9's 10:06:05
	{"shop-payments", "o40", "card", "10:06:15"},    // 9: paid before its order came
	{"shop-orders", "o40", "o40:rug", "10:06:25"},   // 10
	{"shop-orders", "o42", "o42:vase", "10:06:50"},  // 11: passes o17's 10:06:40
	{"shop-payments", "o17", "card", "10:06:00"},    // 12: o17's payment, late without grace
	{"shop-payments", "o77", "refund", "10:07:30"},  // 13: a payment of no order
	{"shop-payments", "o31", "card", "10:08:00"},    // 14
	{"shop-orders", "o44", "o44:fork", "10:09:00"},  // 15
	{"shop-orders", "o49", "o49:bowl", "10:11:00"},  // 16
	{"shop-orders", "o54", "o54:sofa", "10:11:30"},  // 17: passes o36's 10:11:10
	{"shop-orders", "o55", "o55:bed", "10:12:00"},   // 18: passes o42's 10:11:50
	{"shop-orders", "o29", "o29:shelf", "10:12:30"}, // 19: a second order o29, unpaid
	{"shop-orders", "o66", "o66:tray", "10:14:30"},  // 20: passes o44's 10:14:00
	{"shop-orders", "o67", "o67:jar", "10:16:30"},   // 21: passes o49's 10:16:00
	{"shop-orders", "o70", "o70:clock", "10:30:00"}, // 22: closes every window above
}
