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
	confScenarios = append(confScenarios, confStreamJoinScenarios...)
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

// confSJRekey is a key-changing operator that keeps the key (a null key, "" here, becomes a).
func confSJRekey(s kstream.KStream[string, string]) kstream.KStream[string, string] {
	return kstream.SelectKey(s, func(k, _ string) string {
		if k == "" {
			return "a"
		}
		return k
	})
}

var confStreamJoinScenarios = []struct {
	name  string
	build func(b *kstream.Builder)
}{
	{"sj-inner", func(b *kstream.Builder) {
		confOut(kstream.JoinWindowed(confSLeft(b), confSRight(b), confSJInner, confSJGrace))
	}},
	{"sj-inner-nograce", func(b *kstream.Builder) {
		confOut(kstream.JoinWindowed(confSLeft(b), confSRight(b), confSJInner, confSJNoGrace))
	}},
	{"sj-left", func(b *kstream.Builder) {
		confOut(kstream.LeftJoinWindowed(confSLeft(b), confSRight(b), confSJLeft, confSJGrace))
	}},
	{"sj-left-nograce", func(b *kstream.Builder) {
		confOut(kstream.LeftJoinWindowed(confSLeft(b), confSRight(b), confSJLeft, confSJNoGrace))
	}},
	{"sj-outer", func(b *kstream.Builder) {
		confOut(kstream.OuterJoinWindowed(confSLeft(b), confSRight(b), confSJOuter, confSJGrace))
	}},
	{"sj-outer-nograce", func(b *kstream.Builder) {
		confOut(kstream.OuterJoinWindowed(confSLeft(b), confSRight(b), confSJOuter, confSJNoGrace))
	}},
	{"sj-left-asym", func(b *kstream.Builder) {
		confOut(kstream.LeftJoinWindowed(confSLeft(b), confSRight(b), confSJLeft, confSJAsym))
	}},
	{"sj-outer-asym", func(b *kstream.Builder) {
		confOut(kstream.OuterJoinWindowed(confSLeft(b), confSRight(b), confSJOuter, confSJAsym))
	}},
	{"sj-named", func(b *kstream.Builder) {
		confOut(kstream.LeftJoinWindowed(confSLeft(b), confSRight(b), confSJLeft, confSJGrace,
			kstream.Named("pay"), kstream.JoinStoreName("paystore"), kstream.JoinSerdes(serde.String(), serde.String(), serde.String())))
	}},
	{"sj-named-outer", func(b *kstream.Builder) {
		confOut(kstream.OuterJoinWindowed(confSLeft(b), confSRight(b), confSJOuter, confSJGrace, kstream.Named("both")))
	}},
	{"sj-rekeyed", func(b *kstream.Builder) {
		l := confSJRekey(confSLeft(b))
		confOut(kstream.JoinWindowed(l, confSJRekey(confSRight(b)), confSJInner, confSJGrace))
	}},
	{"sj-rekeyed-named", func(b *kstream.Builder) {
		l := confSJRekey(confSLeft(b))
		confOut(kstream.LeftJoinWindowed(l, confSRight(b), confSJLeft, confSJGrace, kstream.Named("rk")))
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
		confOut(kstream.LeftJoinWindowed(s, s, confSJLeft, confSJGrace))
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
	return recs
}
