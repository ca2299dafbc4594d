package kstreamtest_test

import (
	"strconv"
	"strings"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/store"
)

// The versioned family of the conformance test (issue 12 item 4): versioned table sources
// and stream-table joins against versioned tables, with and without a grace period. They
// are mirrored one for one, in the same order and with the same names, in
// testing/conformance/src/main/java/conformance/VersionedScenarios.java.

const (
	confVHistory = 10 * time.Second
	confVGrace   = 5 * time.Second
)

func confVTable(b *kstream.Builder) kstream.KTable[string, string] {
	return kstream.Table(b, "vtable", serde.String(), serde.String(), "vtable-store", kstream.Versioned(confVHistory))
}

func confVStream(b *kstream.Builder) kstream.KStream[string, string] {
	return kstream.Stream(b, "vstream", serde.String(), serde.String())
}

func confVOut(s kstream.KStream[string, string]) { s.To("out", serde.String(), serde.String()) }

// confVProc reads the versioned store vproc-store as of just before each record, puts the
// record at its time, and forwards what it saw and put's return code (VProc in Java).
func confVProc(ctx kstream.ProcessorContext[string, string], r kstream.Record[string, string]) error {
	out := r
	if r.HasNullKey() {
		out.Value = "nokey"
		ctx.Forward(out)
		return nil
	}
	st, err := kstream.GetVersionedKeyValueStore[string, string](ctx, "vproc-store")
	if err != nil {
		return err
	}
	ts := r.Timestamp.UnixMilli()
	prev, found, err := st.GetAsOf(r.Key, ts-1)
	if err != nil {
		return err
	}
	var code int64
	if r.IsTombstone() {
		code, err = st.PutTombstone(r.Key, ts)
	} else {
		code, err = st.Put(r.Key, r.Value, ts)
	}
	if err != nil {
		return err
	}
	seen := "-"
	if found {
		// (Not prev.ValidTo: Java's typed store drops it; see VProc.)
		seen = prev.Value + "@" + strconv.FormatInt(prev.Timestamp-confT0, 10)
	}
	put := "until" + strconv.FormatInt(code-confT0, 10)
	switch code {
	case store.PutNotPut:
		put = "notput"
	case store.PutValidToUndefined:
		put = "latest"
	}
	out.Value = r.Value + "|" + seen + "|" + put
	ctx.Forward(out)
	return nil
}

// confVMat materializes a table operator's result in a versioned store named name.
func confVMat(name string) kstream.Option {
	return kstream.Materialized[string](name, nil, kstream.Versioned(confVHistory))
}

func confVJoin(_ string, v, vt string) string { return v + "+" + vt }

func confVLeft(_ string, v, vt string, found bool) string {
	if !found {
		return v + "+null"
	}
	return v + "+" + vt
}

func init() {
	confScenarios = append(confScenarios, []struct {
		name  string
		build func(b *kstream.Builder)
	}{
		{"versioned-table-tostream", func(b *kstream.Builder) { confVOut(confVTable(b).ToStream()) }},
		{"versioned-filter-tostream", func(b *kstream.Builder) {
			confVOut(confVTable(b).Filter(func(_, v string) bool { return !strings.HasPrefix(v, "A1") }).ToStream())
		}},
		{"versioned-totable-tostream", func(b *kstream.Builder) {
			confVOut(confVStream(b).ToTable("vstream-store", kstream.Versioned(confVHistory)).ToStream())
		}},
		{"versioned-join", func(b *kstream.Builder) { confVOut(kstream.Join(confVStream(b), confVTable(b), confVJoin)) }},
		{"versioned-leftjoin", func(b *kstream.Builder) { confVOut(kstream.LeftJoin(confVStream(b), confVTable(b), confVLeft)) }},
		{"versioned-join-grace", func(b *kstream.Builder) {
			confVOut(kstream.Join(confVStream(b), confVTable(b), confVJoin, kstream.JoinGrace(confVGrace)))
		}},
		{"versioned-leftjoin-grace", func(b *kstream.Builder) {
			// (A null key reads as "" with the string serde.)
			s := confVStream(b).Filter(func(k, _ string) bool { return k != "" })
			confVOut(kstream.LeftJoin(s, confVTable(b), confVLeft, kstream.JoinGrace(confVGrace)))
		}},
		{"versioned-filter-join", func(b *kstream.Builder) {
			s := confVStream(b)
			t := confVTable(b).Filter(func(_, v string) bool { return !strings.HasPrefix(v, "A1") })
			confVOut(kstream.Join(s, t, confVJoin))
		}},
		{"versioned-mapvalues-join-grace", func(b *kstream.Builder) {
			s := confVStream(b)
			t := kstream.TableMapValues(confVTable(b), strings.ToLower)
			confVOut(kstream.Join(s, t, confVJoin, kstream.JoinGrace(confVGrace)))
		}},
		{"versioned-table-table-join", func(b *kstream.Builder) {
			t := confVTable(b)
			st := confVStream(b).ToTable("vstream-store", kstream.Versioned(confVHistory))
			confVOut(kstream.TableJoin(t, st, func(_, a, s string) string { return a + "*" + s }).ToStream())
		}},
		{"versioned-filter-materialized", func(b *kstream.Builder) {
			s := confVStream(b)
			t := confVTable(b).Filter(func(_, v string) bool { return !strings.HasPrefix(v, "A1") }, confVMat("vfilter-store"))
			confVOut(kstream.Join(s, t, confVJoin))
		}},
		{"versioned-mapvalues-materialized-tostream", func(b *kstream.Builder) {
			confVOut(kstream.TableMapValues(confVTable(b), strings.ToLower, confVMat("vmap-store")).ToStream())
		}},
		{"versioned-filter-timestamped-groupby", func(b *kstream.Builder) {
			f := confVTable(b).Filter(func(_, v string) bool { return !strings.HasPrefix(v, "A1") }, kstream.Materialized[string]("tfilter-store", nil))
			g := kstream.TableGroupBy(f, func(_, v string) kstream.KeyValue[string, string] { return kstream.KV(v[:1], v) }, nil, nil)
			confVOut(kstream.MapValues(kstream.TableCount(g, "tletter-counts").ToStream(), func(n int64) string { return "n" + confN(n) }))
		}},
		{"versioned-table-join-materialized", func(b *kstream.Builder) {
			t := confVTable(b)
			st := confVStream(b).ToTable("vstream-store", kstream.Versioned(confVHistory))
			confVOut(kstream.TableJoin(t, st, func(_, a, s string) string { return a + "*" + s }, confVMat("vjoin-store")).ToStream())
		}},
		{"versioned-stream-count-join", func(b *kstream.Builder) {
			s := confVStream(b)
			c := kstream.Count(s.GroupByKey(), "vcounts", kstream.Versioned(confVHistory))
			confVOut(kstream.Join(s, c, func(_, v string, n int64) string { return v + "#" + confN(n) }))
		}},
		{"versioned-table-reduce", func(b *kstream.Builder) {
			g := kstream.TableGroupBy(confVTable(b), func(_, v string) kstream.KeyValue[string, string] { return kstream.KV(v[:1], v) }, nil, nil)
			confVOut(kstream.TableReduce(g, func(a, v string) string { return a + "+" + v }, func(a, v string) string { return a + "-" + v },
				"vreduce-store", kstream.Versioned(confVHistory)).ToStream())
		}},
		{"versioned-process-store", func(b *kstream.Builder) {
			p := kstream.Process(confVStream(b), func() kstream.Processor[string, string, string, string] {
				return kstream.ProcessorFunc[string, string, string, string](confVProc)
			}, kstream.WithStores(kstream.VersionedKeyValueStore("vproc-store", serde.String(), serde.String(), confVHistory)))
			confVOut(p)
		}},
		{"versioned-groupby-count", func(b *kstream.Builder) {
			g := kstream.TableGroupBy(confVTable(b), func(_, v string) kstream.KeyValue[string, string] { return kstream.KV(v[:1], v) }, nil, nil)
			confVOut(kstream.MapValues(kstream.TableCount(g, "vletter-counts").ToStream(), func(n int64) string { return "n" + confN(n) }))
		}},
	}...)
	confSetFamilyInput("versioned", confVersionedInput)
}

// confVersionedInput is topics vstream's and vtable's input, as VersionedScenarios.input:
// the keys a, b and k all go to partition 0 of 4, so that the run with 4 partitions has
// one stream time for them, as Java's with one.
func confVersionedInput() []confRecord {
	var recs []confRecord
	add := func(topic string, key, value *string, seconds int64, header string) {
		r := confRecord{topic: topic, key: key, value: value, ts: time.UnixMilli(confT0 + seconds*1000)}
		if header != "" {
			r.headers = []kstream.Header{{Key: "i", Value: []byte(header)}}
		}
		recs = append(recs, r)
	}
	p := confPtr
	add("vtable", p("a"), p("A1"), 10, "0")
	add("vtable", p("b"), p("B1"), 10, "")
	add("vstream", p("a"), p("s1"), 12, "2")
	add("vtable", p("a"), p("A2"), 20, "")
	add("vstream", p("a"), p("s2"), 15, "")
	add("vtable", p("a"), p("A15"), 14, "5")
	add("vtable", p("a"), p("A0"), 5, "")
	add("vstream", p("a"), p("s3"), 14, "")
	add("vstream", p("b"), p("s4"), 22, "8")
	add("vtable", p("b"), nil, 23, "")
	add("vstream", p("b"), p("s5"), 24, "")
	add("vstream", p("b"), p("s6"), 21, "")
	add("vstream", p("k"), p("s7"), 25, "")
	add("vstream", nil, p("s8"), 25, "13")
	add("vstream", p("a"), nil, 25, "")
	add("vtable", nil, p("X"), 25, "")
	add("vtable", p("k"), p("K1"), 26, "")
	add("vstream", p("k"), p("s9"), 24, "")
	add("vtable", p("z"), nil, 27, "")
	add("vstream", p("a"), p("s10"), 30, "19")
	add("vtable", p("a"), p("A29"), 29, "")
	add("vstream", p("a"), p("s11"), 40, "")
	add("vstream", p("a"), p("s12"), 8, "")
	add("vtable", p("b"), p("B2"), 33, "")
	add("vstream", p("b"), p("s13"), 34, "")
	add("vtable", p("b"), p("B3"), 31, "")
	add("vstream", p("b"), p("s14"), 32, "")
	add("vstream", p("a"), p("s15"), 60, "")
	add("vtable", p("a"), p("A5"), 55, "")
	add("vstream", p("a"), p("s16"), 70, "")
	return recs
}
