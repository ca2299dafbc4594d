package kstream_test

import (
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
)

// explicitNamesErr builds b with Config.EnsureExplicitInternalResourceNaming and returns
// the error, after checking that the same topology builds without the switch.
func explicitNamesErr(t *testing.T, topology func() *kstream.Builder) error {
	t.Helper()
	d, err := kstreamtest.New(topology(), kstream.Config{ApplicationID: "names"})
	if err != nil {
		t.Fatalf("without the switch: %v", err)
	}
	d.Close()
	d, err = kstreamtest.New(topology(), kstream.Config{ApplicationID: "names", EnsureExplicitInternalResourceNaming: true})
	if err == nil {
		d.Close()
	}
	return err
}

// wantNamingErrors checks that err lists exactly the generated names in want (each an
// excerpt of its line: the resource, its operator, the option that names it).
func wantNamingErrors(t *testing.T, err error, want ...[]string) {
	t.Helper()
	if err == nil {
		t.Fatal("built with generated names")
	}
	lines := strings.Split(err.Error(), "\n")
	if !strings.Contains(lines[0], "Config.EnsureExplicitInternalResourceNaming") {
		t.Errorf("first line %q does not name the switch", lines[0])
	}
	if got := len(lines) - 1; got != len(want) {
		t.Fatalf("%d generated names reported, want %d:\n%v", got, len(want), err)
	}
	for i, w := range want {
		for _, part := range w {
			if !strings.Contains(lines[i+1], part) {
				t.Errorf("line %q lacks %q", lines[i+1], part)
			}
		}
	}
}

func rekeyed(b *kstream.Builder, opts ...kstream.Option) kstream.KStream[string, string] {
	in := kstream.Stream(b, "in", serde.String(), serde.String())
	return kstream.SelectKey(in, func(_, v string) string { return v }, opts...)
}

// A stream read as a table after a key change is repartitioned through a topic named after
// the ToTable operator, generated unless Named.
func TestExplicitNamesRepartition(t *testing.T) {
	err := explicitNamesErr(t, func() *kstream.Builder {
		b := kstream.NewBuilder()
		rekeyed(b).ToTable("latest")
		return b
	})
	wantNamingErrors(t, err, []string{`repartition topic "names-KSTREAM-TOTABLE-0000000002-repartition"`,
		"read by operator KSTREAM-TOTABLE-0000000002", `ToTable "latest"`, "Named(name)"})

	// A stream-table join after a key change: the topic is named after the key-changing
	// operator, or the join's Named name.
	err = explicitNamesErr(t, func() *kstream.Builder {
		b := kstream.NewBuilder()
		tab := kstream.Table(b, "tab", serde.String(), serde.String(), "tab-store")
		kstream.Join(rekeyed(b), tab, func(_, v, w string) string { return v + w }).To("out", nil, serde.String())
		return b
	})
	wantNamingErrors(t, err, []string{`repartition topic "names-KSTREAM-KEY-SELECT-0000000003-repartition"`, "give Join the option Named(name)"})
}

// An unnamed suppression has a generated store and changelog.
func TestExplicitNamesStoreAndChangelog(t *testing.T) {
	topology := func(s kstream.Suppressed) func() *kstream.Builder {
		return func() *kstream.Builder {
			b := kstream.NewBuilder()
			w := kstream.Stream(b, "in", serde.String(), serde.String()).GroupByKey().WindowedBy(kstream.TimeWindowsOf(time.Minute))
			kstream.WindowedCount(w, "counts").Suppress(s).ToStream().To("out", nil, nil)
			return b
		}
	}
	err := explicitNamesErr(t, topology(kstream.UntilWindowCloses(kstream.Unbounded())))
	store := `"KTABLE-SUPPRESS-STATE-STORE-0000000003"`
	wantNamingErrors(t, err,
		[]string{"state store " + store, "operator KTABLE-SUPPRESS-0000000002", "Suppressed.WithName(name)"},
		[]string{`changelog topic "names-KTABLE-SUPPRESS-STATE-STORE-0000000003-changelog"`, "store " + store, "Suppressed.WithName(name)"})
	if err := explicitNamesErr(t, topology(kstream.UntilWindowCloses(kstream.Unbounded()).WithName("finals"))); err != nil {
		t.Fatalf("named suppression: %v", err)
	}
}

// A stream-stream join keeps two window stores named after generated names unless
// JoinStoreName names them; Named names its operators only, as in Java.
func TestExplicitNamesJoinStores(t *testing.T) {
	topology := func(opts ...kstream.Option) func() *kstream.Builder {
		return func() *kstream.Builder {
			b := kstream.NewBuilder()
			l := kstream.Stream(b, "left", serde.String(), serde.String())
			r := kstream.Stream(b, "right", serde.String(), serde.String())
			kstream.JoinWindowed(l, r, func(_, a, c string) string { return a + c }, kstream.JoinWindowsOf(time.Minute), opts...).To("out", nil, serde.String())
			return b
		}
	}
	for _, opts := range [][]kstream.Option{nil, {kstream.Named("pairs")}} {
		err := explicitNamesErr(t, topology(opts...))
		this, other := "KSTREAM-JOINTHIS-0000000004-store", "KSTREAM-JOINOTHER-0000000005-store"
		wantNamingErrors(t, err,
			[]string{`state store "` + this + `"`, "JoinStoreName(name)"},
			[]string{`changelog topic "names-` + this + `-changelog"`, "JoinStoreName(name)"},
			[]string{`state store "` + other + `"`, "JoinStoreName(name)"},
			[]string{`changelog topic "names-` + other + `-changelog"`, "JoinStoreName(name)"})
	}
	if err := explicitNamesErr(t, topology(kstream.Named("pairs"), kstream.JoinStoreName("pairs"))); err != nil {
		t.Fatalf("join with JoinStoreName: %v", err)
	}
}

// A foreign-key join's subscription store and topics are generated unless it is Named.
func TestExplicitNamesForeignKeyJoin(t *testing.T) {
	err := explicitNamesErr(t, func() *kstream.Builder {
		b := kstream.NewBuilder()
		orders := kstream.Table(b, "orders", serde.String(), serde.String(), "orders-store")
		customers := kstream.Table(b, "customers", serde.String(), serde.String(), "customers-store")
		kstream.TableJoinOn(orders, customers, func(_, v string) string { return v }, func(o, c string) string { return o + c }).
			ToStream().To("out", nil, nil)
		return b
	})
	wantNamingErrors(t, err,
		[]string{`state store "KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-`, "foreign-key join the option Named(name)"},
		[]string{`changelog topic "names-KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-`, "Named(name)"},
		[]string{`internal topic "names-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-`, "Named(name)"},
		[]string{`internal topic "names-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-`, "Named(name)"})
}

// A topology whose every store and internal topic is named passes, and so does kstream.New.
func TestExplicitNamesAllNamed(t *testing.T) {
	topology := func() *kstream.Builder {
		b := kstream.NewBuilder()
		byValue := rekeyed(b, kstream.Named("by-value"))
		kstream.Count(byValue.GroupByKey(), "counts").ToStream().To("counts-out", nil, serde.Int64())
		byValue.ToTable("latest", kstream.Named("latest-table"))
		tab := kstream.Table(b, "tab", serde.String(), serde.String(), "tab-store")
		kstream.Join(byValue, tab, func(_, v, w string) string { return v + w }, kstream.Named("enrich")).To("enriched", nil, serde.String())
		l := kstream.Stream(b, "left", serde.String(), serde.String())
		kstream.JoinWindowed(l, byValue, func(_, a, c string) string { return a + c }, kstream.JoinWindowsOf(time.Minute),
			kstream.Named("pairs"), kstream.JoinStoreName("pairs")).To("pairs-out", nil, serde.String())
		w := l.GroupByKey().WindowedBy(kstream.TimeWindowsOf(time.Minute))
		kstream.WindowedCount(w, "per-minute").Suppress(kstream.UntilWindowCloses(kstream.Unbounded()).WithName("finals")).
			ToStream().To("finals-out", nil, nil)
		customers := kstream.Table(b, "customers", serde.String(), serde.String(), "customers-store")
		kstream.TableJoinOn(tab, customers, func(_, v string) string { return v }, func(o, c string) string { return o + c }, kstream.Named("fk")).
			ToStream().To("fk-out", nil, nil)
		return b
	}
	if err := explicitNamesErr(t, topology); err != nil {
		t.Fatalf("a fully named topology: %v", err)
	}
	app, err := kstream.New(topology(), kstream.Config{ApplicationID: "names", Brokers: []string{"127.0.0.1:1"}, EnsureExplicitInternalResourceNaming: true})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	_ = app
	b := kstream.NewBuilder()
	rekeyed(b).ToTable("latest")
	if _, err := kstream.New(b, kstream.Config{ApplicationID: "names", Brokers: []string{"127.0.0.1:1"}, EnsureExplicitInternalResourceNaming: true}); err == nil || !strings.Contains(err.Error(), "KSTREAM-TOTABLE-0000000002-repartition") {
		t.Fatalf("New with a generated name: %v", err)
	}
}

// Each way the hints name resolves the error: Named on the join, Named on the operator
// before it, Named on ToTable, or a Repartition of one's own.
func TestExplicitNamesHintsWork(t *testing.T) {
	for name, topology := range map[string]func() *kstream.Builder{
		"Named on the join": func() *kstream.Builder {
			b := kstream.NewBuilder()
			tab := kstream.Table(b, "tab", serde.String(), serde.String(), "tab-store")
			kstream.Join(rekeyed(b), tab, func(_, v, w string) string { return v + w }, kstream.Named("enrich")).To("out", nil, serde.String())
			return b
		},
		"Named before the join": func() *kstream.Builder {
			b := kstream.NewBuilder()
			tab := kstream.Table(b, "tab", serde.String(), serde.String(), "tab-store")
			kstream.Join(rekeyed(b, kstream.Named("by-value")), tab, func(_, v, w string) string { return v + w }).To("out", nil, serde.String())
			return b
		},
		"Repartition before the join": func() *kstream.Builder {
			b := kstream.NewBuilder()
			tab := kstream.Table(b, "tab", serde.String(), serde.String(), "tab-store")
			kstream.Join(rekeyed(b).Repartition("by-value"), tab, func(_, v, w string) string { return v + w }).To("out", nil, serde.String())
			return b
		},
		"Named on ToTable": func() *kstream.Builder {
			b := kstream.NewBuilder()
			rekeyed(b).ToTable("latest", kstream.Named("latest"))
			return b
		},
		"Repartition before ToTable": func() *kstream.Builder {
			b := kstream.NewBuilder()
			rekeyed(b).Repartition("by-value").ToTable("latest")
			return b
		},
	} {
		if err := explicitNamesErr(t, topology); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
