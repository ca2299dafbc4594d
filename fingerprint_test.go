package kstream_test

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/upgrade"
)

// fingerprintOf builds a topology with build and returns its fingerprint as a file would
// give it back: written to JSON and read again.
func fingerprintOf(t *testing.T, build func(b *kstream.Builder)) upgrade.Fingerprint {
	t.Helper()
	b := kstream.NewBuilder()
	build(b)
	topo, err := b.Build()
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	var buf bytes.Buffer
	if err := topo.Fingerprint().Write(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := upgrade.Read(&buf)
	if err != nil {
		t.Fatalf("reading the fingerprint back: %v", err)
	}
	return f
}

// wantFinding is a finding the check must report: its verdict, subject, and words of its
// reason.
type wantFinding struct {
	verdict upgrade.Verdict
	subject string
	reason  []string
}

// checkUpgrade compares the topologies old and new build and asserts the verdict and that
// every wanted finding is among those reported.
func checkUpgrade(t *testing.T, old, new func(b *kstream.Builder), verdict upgrade.Verdict, want ...wantFinding) upgrade.Report {
	t.Helper()
	r := upgrade.Check(fingerprintOf(t, old), fingerprintOf(t, new))
	t.Logf("report:\n%s", r)
	if r.Verdict != verdict {
		t.Errorf("verdict %s, want %s; report:\n%s", r.Verdict, verdict, r)
	}
	for _, w := range want {
		found := false
		for _, f := range r.Findings {
			if f.Verdict != w.verdict || f.Subject != w.subject {
				continue
			}
			all := true
			for _, s := range w.reason {
				all = all && strings.Contains(f.Reason, s)
			}
			if all {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("no finding %s: %s with %q; report:\n%s", w.verdict, w.subject, w.reason, r)
		}
	}
	return r
}

// orderCounts is a count of orders per key written to "counts", with options for the store
// name and a filter before or after the count.
func orderCounts(store string, filterBefore, filterAfter bool) func(b *kstream.Builder) {
	return func(b *kstream.Builder) {
		s := kstream.Stream(b, "orders", serde.String(), serde.String())
		if filterBefore {
			s = s.Filter(func(_, v string) bool { return v != "" })
		}
		out := kstream.Count(s.GroupByKey(), store).ToStream()
		if filterAfter {
			out = out.Filter(func(_ string, n int64) bool { return n > 0 })
		}
		out.To("counts", nil, nil)
	}
}

// payments joins orders with payments within window, with its stores named storeName (""
// for generated names), optionally filtering the orders first.
func payments(storeName string, window time.Duration, filterOrders bool) func(b *kstream.Builder) {
	return func(b *kstream.Builder) {
		orders := kstream.Stream(b, "orders", serde.String(), serde.String())
		pays := kstream.Stream(b, "payments", serde.String(), serde.Int64())
		if filterOrders {
			orders = orders.Filter(func(_, v string) bool { return v != "" })
		}
		var opts []kstream.Option
		if storeName != "" {
			opts = append(opts, kstream.JoinStoreName(storeName))
		}
		kstream.JoinWindowed(orders, pays, func(_ string, o string, p int64) string { return o }, kstream.JoinWindowsOf(window), opts...).
			To("paid", serde.String(), serde.String())
	}
}

func TestUpgradeSameTopology(t *testing.T) {
	r := checkUpgrade(t, orderCounts("counts", false, false), orderCounts("counts", false, false), upgrade.RollingUpgrade)
	if len(r.Findings) != 0 {
		t.Errorf("findings for the same topology:\n%s", r)
	}
}

func TestUpgradeStatelessFilterAtTheEnd(t *testing.T) {
	checkUpgrade(t, orderCounts("counts", false, false), orderCounts("counts", false, true), upgrade.RollingUpgrade,
		wantFinding{upgrade.RollingUpgrade, "sub-topology 0", []string{"operators added: KSTREAM-FILTER-0000000003", "operators removed: KSTREAM-SINK-0000000003"}})
}

// A named store keeps its state when a stateless operator is inserted before it, though
// the generated operator names after it shift.
func TestUpgradeFilterBeforeNamedStore(t *testing.T) {
	checkUpgrade(t, orderCounts("counts", false, false), orderCounts("counts", true, false), upgrade.RollingUpgrade,
		wantFinding{upgrade.RollingUpgrade, "sub-topology 0", []string{"operators added: KSTREAM-FILTER-0000000001", "operators removed: KSTREAM-AGGREGATE-0000000001"}})
}

func TestUpgradeRenamedStore(t *testing.T) {
	checkUpgrade(t, orderCounts("counts", false, false), orderCounts("order-counts", false, false), upgrade.Reset,
		wantFinding{upgrade.Reset, `store "counts"`, []string{`renamed to "order-counts"`, "KSTREAM-AGGREGATE-0000000001", "starts empty"}})
}

// A stateless operator inserted before a store with a generated name shifts the name: the
// state is abandoned (Kafka Streams' best known upgrade trap).
func TestUpgradeOperatorBeforeGeneratedStore(t *testing.T) {
	checkUpgrade(t, payments("", time.Minute, false), payments("", time.Minute, true), upgrade.Reset,
		wantFinding{upgrade.Reset, `store "KSTREAM-JOINTHIS-0000000004-store"`, []string{`is now "KSTREAM-JOINTHIS-0000000005-store"`, "generated name changed", `"KSTREAM-JOINTHIS-0000000005-store-changelog"`}},
		wantFinding{upgrade.Reset, `store "KSTREAM-JOINOTHER-0000000005-store"`, []string{`is now "KSTREAM-JOINOTHER-0000000006-store"`}})
}

// Naming a store that had a generated name is a rename too.
func TestUpgradeNamedGeneratedStore(t *testing.T) {
	checkUpgrade(t, payments("", time.Minute, false), payments("order-payments", time.Minute, false), upgrade.Reset,
		wantFinding{upgrade.Reset, `store "KSTREAM-JOINTHIS-0000000004-store"`, []string{`renamed to "order-payments-this-join-store"`, "KSTREAM-WINDOWED-0000000002"}},
		wantFinding{upgrade.Reset, `store "KSTREAM-JOINOTHER-0000000005-store"`, []string{`renamed to "order-payments-other-join-store"`, "KSTREAM-WINDOWED-0000000003"}})
}

// Named join stores keep their state when an operator is inserted before them.
func TestUpgradeOperatorBeforeNamedJoinStores(t *testing.T) {
	checkUpgrade(t, payments("op", time.Minute, false), payments("op", time.Minute, true), upgrade.RollingUpgrade)
}

func TestUpgradeChangedJoinWindow(t *testing.T) {
	checkUpgrade(t, payments("op", time.Minute, false), payments("op", 2*time.Minute, false), upgrade.Reset,
		wantFinding{upgrade.Reset, `store "op-this-join-store"`, []string{"join window changed from before 60000ms, after 60000ms to before 120000ms, after 120000ms"}},
		wantFinding{upgrade.Reset, `store "op-other-join-store"`, []string{"join window changed", "another window size and retention"}})
}

func windowedCounts(w kstream.TimeWindows) func(b *kstream.Builder) {
	return func(b *kstream.Builder) {
		s := kstream.Stream(b, "views", serde.String(), serde.String())
		kstream.WindowedCount(s.GroupByKey().WindowedBy(w), "views-per-window").ToStream().
			To("view-counts", serde.TimeWindowed(serde.String(), w.Size()), serde.Int64())
	}
}

func TestUpgradeChangedWindowSize(t *testing.T) {
	checkUpgrade(t, windowedCounts(kstream.TimeWindowsOf(time.Minute)), windowedCounts(kstream.TimeWindowsOf(2*time.Minute)), upgrade.Reset,
		wantFinding{upgrade.Reset, `store "views-per-window"`, []string{"window size changed from 60000ms to 120000ms", "belong to the old size"}})
}

func TestUpgradeChangedWindowAdvance(t *testing.T) {
	hour := kstream.TimeWindowsOf(time.Hour)
	checkUpgrade(t, windowedCounts(hour.AdvanceBy(10*time.Minute)), windowedCounts(hour.AdvanceBy(15*time.Minute)), upgrade.Reset,
		wantFinding{upgrade.Reset, `store "views-per-window"`, []string{"window advance changed from 600000ms to 900000ms"}})
}

// A longer grace period lengthens the store's default retention (size plus grace).
func TestUpgradeChangedGrace(t *testing.T) {
	m := kstream.TimeWindowsOf(time.Minute)
	checkUpgrade(t, windowedCounts(m.WithGrace(time.Minute)), windowedCounts(m.WithGrace(2*time.Minute)), upgrade.Reset,
		wantFinding{upgrade.Reset, `store "views-per-window"`, []string{"retention changed from 120000ms to 180000ms (the grace period changed from 60000ms to 120000ms)"}})
}

// Under an explicit retention that stays the same, a changed grace period keeps the state.
func TestUpgradeChangedGraceSameRetention(t *testing.T) {
	counts := func(grace time.Duration) func(b *kstream.Builder) {
		return func(b *kstream.Builder) {
			s := kstream.Stream(b, "views", serde.String(), serde.String())
			kstream.WindowedCount(s.GroupByKey().WindowedBy(kstream.TimeWindowsOf(time.Minute).WithGrace(grace)), "views-per-window", kstream.WithRetention(time.Hour))
		}
	}
	checkUpgrade(t, counts(time.Minute), counts(2*time.Minute), upgrade.RollingUpgrade,
		wantFinding{upgrade.RollingUpgrade, `store "views-per-window"`, []string{"grace period changed from 60000ms to 120000ms (retention unchanged)"}})
}

func totals(vs serde.Serde[int64]) func(b *kstream.Builder) {
	return func(b *kstream.Builder) {
		s := kstream.Stream(b, "orders", serde.String(), serde.Int64())
		kstream.Aggregate(s.GroupByKey(), func() int64 { return 0 }, func(_ string, v, acc int64) int64 { return acc + v }, vs, "totals").
			ToStream().To("totals", nil, nil)
	}
}

func TestUpgradeChangedStoreSerde(t *testing.T) {
	checkUpgrade(t, totals(serde.Int64()), totals(serde.JSON[int64]()), upgrade.Reset,
		wantFinding{upgrade.Reset, `store "totals"`, []string{"value serde changed from serde.int64Serde to serde.jsonSerde[int64]", "may not decode"}})
}

// A serde with its own identity is compared by it: the same identity is the same format.
func TestUpgradeSerdeIdentity(t *testing.T) {
	checkUpgrade(t, totals(identified{serde.Int64(), "amount-v1"}), totals(identified{serde.JSON[int64](), "amount-v1"}), upgrade.RollingUpgrade)
	checkUpgrade(t, totals(identified{serde.Int64(), "amount-v1"}), totals(identified{serde.Int64(), "amount-v2"}), upgrade.Reset,
		wantFinding{upgrade.Reset, `store "totals"`, []string{"value serde changed from amount-v1 to amount-v2"}})
}

type identified struct {
	serde.Serde[int64]
	id string
}

func (s identified) SerdeIdentity() string { return s.id }

func TestUpgradeAddedSource(t *testing.T) {
	checkUpgrade(t, orderCounts("counts", false, false), func(b *kstream.Builder) {
		orderCounts("counts", false, false)(b)
		kstream.Stream(b, "refunds", serde.String(), serde.String()).To("audit", nil, nil)
	}, upgrade.RollingUpgrade,
		wantFinding{upgrade.RollingUpgrade, `source topic "refunds"`, []string{"new"}},
		wantFinding{upgrade.RollingUpgrade, `sink topic "audit"`, []string{"new"}})
}

// A pattern source is fingerprinted by its pattern: a changed pattern is a source read no
// longer and a new one.
func TestUpgradeChangedPattern(t *testing.T) {
	patterned := func(re string) func(b *kstream.Builder) {
		return func(b *kstream.Builder) {
			kstream.StreamPattern(b, regexp.MustCompile(re), serde.String(), serde.String()).To("audit", nil, nil)
		}
	}
	checkUpgrade(t, patterned(`orders-.*`), patterned(`orders-(eu|us)`), upgrade.RollingUpgrade,
		wantFinding{upgrade.RollingUpgrade, `source topic "pattern:orders-(eu|us)"`, []string{"new"}},
		wantFinding{upgrade.RollingUpgrade, `source topic "pattern:orders-.*"`, []string{"no longer read"}})
}

// A source added before the stateful part of the topology takes sub-topology 0: the stateful
// tasks get new ids, so old and new instances must not run together.
func TestUpgradeRenumberedSubtopology(t *testing.T) {
	checkUpgrade(t, orderCounts("counts", false, false), func(b *kstream.Builder) {
		kstream.Stream(b, "refunds", serde.String(), serde.String()).To("audit", nil, nil)
		orderCounts("counts", false, false)(b)
	}, upgrade.StopAll,
		wantFinding{upgrade.StopAll, `store "counts"`, []string{"tasks were 0_<partition> and are 1_<partition>", "stop every old instance"}})
}

func repartitionedCounts(topic string, partitions int32) func(b *kstream.Builder) {
	return func(b *kstream.Builder) {
		s := kstream.Stream(b, "clicks", serde.String(), serde.String())
		kstream.Count(s.Repartition(topic, kstream.NumPartitions(partitions)).GroupByKey(), "clicks-per-user").ToStream().To("click-counts", nil, nil)
	}
}

func TestUpgradeChangedPartitionCount(t *testing.T) {
	checkUpgrade(t, repartitionedCounts("by-user", 4), repartitionedCounts("by-user", 8), upgrade.Reset,
		wantFinding{upgrade.Reset, `internal topic "by-user-repartition"`, []string{"partition count changed from 4 to 8"}})
}

// A renamed repartition topic whose downstream store is kept loses the records in flight.
func TestUpgradeRenamedRepartitionTopic(t *testing.T) {
	checkUpgrade(t, repartitionedCounts("by-user", 4), repartitionedCounts("clicks-by-user", 4), upgrade.Reset,
		wantFinding{upgrade.Reset, `internal topic "by-user-repartition"`, []string{"records the old one wrote to it and did not read yet are lost", "clicks-per-user"}},
		wantFinding{upgrade.RollingUpgrade, `internal topic "clicks-by-user-repartition"`, []string{"new"}})
}

func TestUpgradeRemovedStore(t *testing.T) {
	both := func(b *kstream.Builder) {
		s := kstream.Stream(b, "orders", serde.String(), serde.String())
		kstream.Count(s.GroupByKey(), "counts").ToStream().To("counts", nil, nil)
		kstream.Reduce(s.GroupByKey(), func(a, v string) string { return v }, "latest").ToStream().To("latest", nil, nil)
	}
	one := func(b *kstream.Builder) {
		s := kstream.Stream(b, "orders", serde.String(), serde.String())
		kstream.Count(s.GroupByKey(), "counts").ToStream().To("counts", nil, nil)
	}
	checkUpgrade(t, both, one, upgrade.RollingUpgrade,
		wantFinding{upgrade.RollingUpgrade, `store "latest"`, []string{`removed: its changelog "latest-changelog" and local data are left behind`}},
		wantFinding{upgrade.RollingUpgrade, `sink topic "latest"`, []string{"no longer written"}})
	// The other way round, the new store starts empty.
	checkUpgrade(t, one, both, upgrade.RollingUpgrade,
		wantFinding{upgrade.RollingUpgrade, `store "latest"`, []string{"new (key-value", "starts empty"}})
}

func TestUpgradeChangedStoreKind(t *testing.T) {
	checkUpgrade(t, func(b *kstream.Builder) {
		s := kstream.Stream(b, "views", serde.String(), serde.String())
		kstream.Count(s.GroupByKey(), "views")
	}, func(b *kstream.Builder) {
		s := kstream.Stream(b, "views", serde.String(), serde.String())
		kstream.WindowedCount(s.GroupByKey().WindowedBy(kstream.TimeWindowsOf(time.Hour)), "views")
	}, upgrade.Reset,
		wantFinding{upgrade.Reset, `store "views"`, []string{"kind changed from key-value to window"}})
}

func TestUpgradeVersionedHistory(t *testing.T) {
	prices := func(history time.Duration) func(b *kstream.Builder) {
		return func(b *kstream.Builder) {
			kstream.Table(b, "prices", serde.String(), serde.Int64(), "prices", kstream.Versioned(history))
		}
	}
	checkUpgrade(t, prices(time.Hour), prices(2*time.Hour), upgrade.Reset,
		wantFinding{upgrade.Reset, `store "prices"`, []string{"history retention changed from 3600000ms to 7200000ms"}})
}

func TestUpgradeApplicationID(t *testing.T) {
	old, new := fingerprintOf(t, orderCounts("counts", false, false)), fingerprintOf(t, orderCounts("counts", false, false))
	old.ApplicationID, new.ApplicationID = "orders", "orders-v2"
	r := upgrade.Check(old, new)
	if r.Verdict != upgrade.NewApplicationID || len(r.Findings) != 1 || !strings.Contains(r.Findings[0].Reason, `changed from "orders" to "orders-v2"`) {
		t.Errorf("report:\n%s", r)
	}
}

// The fingerprint describes what decides compatibility.
func TestFingerprintContents(t *testing.T) {
	f := fingerprintOf(t, func(b *kstream.Builder) {
		windowedCounts(kstream.TimeWindowsOf(time.Minute).AdvanceBy(30 * time.Second).WithGrace(10 * time.Second))(b)
		repartitionedCounts("by-user", 4)(b)
	})
	if len(f.Stores) != 2 || len(f.Subtopologies) != 3 {
		t.Fatalf("fingerprint: %+v", f)
	}
	w := f.Stores[1]
	if w.Name != "views-per-window" || w.Kind != upgrade.Window || w.Window == nil ||
		*w.Window != (upgrade.WindowDef{Type: "time", SizeMs: 60000, AdvanceMs: 30000, GraceMs: 10000}) ||
		w.WindowSizeMs != 60000 || w.RetentionMs != 70000 || w.Changelog != "views-per-window-changelog" ||
		w.KeySerde != "serde.stringSerde" || w.ValueSerde != "serde.int64Serde" || !w.Timestamped || w.Subtopology != 0 {
		t.Errorf("window store: %+v", w)
	}
	if got := f.InternalTopics; len(got) != 1 || got[0].Name != "by-user-repartition" || got[0].Partitions != 4 ||
		got[0].Writer != 1 || got[0].Reader != 2 || got[0].KeySerde != "serde.stringSerde" {
		t.Errorf("internal topics: %+v", got)
	}
	if strings.Join(f.SourceTopics, ",") != "clicks,views" || strings.Join(f.SinkTopics, ",") != "click-counts,view-counts" {
		t.Errorf("sources %v, sinks %v", f.SourceTopics, f.SinkTopics)
	}
	if !strings.HasPrefix(f.Describe, "Topologies:") {
		t.Errorf("describe: %q", f.Describe)
	}
}

func TestFingerprintReadRejects(t *testing.T) {
	for _, in := range []string{"", "{", `{"format": 2}`, `{"format": 1, "nodes": []}`} {
		if _, err := upgrade.Read(strings.NewReader(in)); err == nil {
			t.Errorf("Read(%q) accepted it", in)
		}
	}
}
