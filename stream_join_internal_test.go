package kstream

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream/serde"
)

// A left join's three stores get changelogs named as Kafka Streams names them: the two
// window stores' with cleanup.policy delete (StreamJoinedStoreFactory) and the retention of
// the store (before + after + grace) plus a day, the non-match store's compacted.
func TestStreamJoinChangelogs(t *testing.T) {
	b := NewBuilder()
	l := Stream(b, "l", serde.String(), serde.String())
	r := Stream(b, "r", serde.String(), serde.Int64())
	LeftJoinWindowed(l, r, func(_ string, lv string, rv int64, found bool) string { return lv }, JoinWindowsOf(5*time.Second).WithGrace(3*time.Second)).
		To("out", serde.String(), serde.String())
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	rt := topo.compile("app", nil, nil)
	got := map[string]string{}
	for _, it := range rt.InternalTopics {
		var cfg []string
		for _, k := range []string{"cleanup.policy", "retention.ms"} {
			if v := it.Configs[k]; v != nil {
				cfg = append(cfg, k+"="+*v)
			}
		}
		got[it.Name] = strings.Join(cfg, ",")
	}
	want := map[string]string{
		"app-KSTREAM-JOINTHIS-0000000004-store-changelog":    "cleanup.policy=delete,retention.ms=86413000",
		"app-KSTREAM-OUTEROTHER-0000000005-store-changelog":  "cleanup.policy=delete,retention.ms=86413000",
		"app-KSTREAM-OUTERSHARED-0000000004-store-changelog": "cleanup.policy=compact",
	}
	if len(got) != len(want) {
		t.Fatalf("internal topics %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("topic %s: configs %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	// In Java's HashSet order: "r" hashes to bucket 2, "l" to 12.
	if len(rt.CopartitionGroups) != 1 || strings.Join(rt.CopartitionGroups[0], ",") != "r,l" {
		t.Errorf("co-partition groups %v, want [[r l]]", rt.CopartitionGroups)
	}
}

// Invalid join windows and options are reported by Build, naming the operator.
func TestStreamJoinBuildErrors(t *testing.T) {
	join := func(w JoinWindows, opts ...Option) error {
		b := NewBuilder()
		l := Stream(b, "l", serde.String(), serde.String())
		r := Stream(b, "r", serde.String(), serde.String())
		OuterJoinWindowed(l, r, func(string, string, bool, string, bool) string { return "" }, w, opts...).To("out", serde.String(), serde.String())
		_, err := b.Build()
		return err
	}
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"negative grace", join(JoinWindowsOf(time.Second).WithGrace(-time.Second)), "OuterJoinWindowed: the grace period must not be negative"},
		{"negative interval", join(JoinWindowsOf(time.Second).Before(-2 * time.Second)), "OuterJoinWindowed: the join windows' interval (before + after = -2000ms + 1000ms) must not be negative"},
		{"fraction", join(JoinWindowsOf(1500 * time.Microsecond)), "OuterJoinWindowed: the join windows' time difference must be a whole number of milliseconds"},
		{"serdes of other types", join(JoinWindowsOf(time.Second), JoinSerdes(serde.String(), serde.Int64(), serde.String())), "OuterJoinWindowed: JoinSerdes has the types of another join"},
		{"misplaced option", join(JoinWindowsOf(time.Second), WithOffsetReset(ResetEarliest)), "option WithOffsetReset does not apply to OuterJoinWindowed"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, c.err, c.want)
		}
	}
	// Negative before or after is fine while before + after is not negative.
	if err := join(JoinWindowsOf(time.Second).Before(-time.Second).After(3 * time.Second)); err != nil {
		t.Errorf("before -1s, after 3s: %v", err)
	}

	// A side without serdes (a mapped stream) needs JoinSerdes.
	b := NewBuilder()
	l := MapValues(Stream(b, "l", serde.String(), serde.String()), func(v string) int { return len(v) })
	r := Stream(b, "r", serde.String(), serde.String())
	JoinWindowed(l, r, func(_ string, a int, b string) string { return b }, JoinWindowsOf(time.Second)).To("out", serde.String(), serde.String())
	if _, err := b.Build(); !errors.Is(err, ErrNoSerde) || !strings.Contains(err.Error(), "JoinWindowed") {
		t.Errorf("join without value serde: error %v, want ErrNoSerde naming JoinWindowed", err)
	}
	b = NewBuilder()
	l = MapValues(Stream(b, "l", serde.String(), serde.String()), func(v string) int { return len(v) })
	r = Stream(b, "r", serde.String(), serde.String())
	JoinWindowed(l, r, func(_ string, a int, b string) string { return b }, JoinWindowsOf(time.Second),
		JoinSerdes[string, int, string](nil, serde.Funcs(func(int) ([]byte, error) { return nil, nil }, func([]byte) (int, error) { return 0, nil }), nil)).To("out", serde.String(), serde.String())
	if _, err := b.Build(); err != nil {
		t.Errorf("join with JoinSerdes: %v", err)
	}
}

func TestJoinWindowsAccessors(t *testing.T) {
	w := JoinWindowsOf(5 * time.Second).WithGrace(time.Second).Before(2 * time.Second)
	if w.BeforeDuration() != 2*time.Second || w.AfterDuration() != 5*time.Second || w.Size() != 7*time.Second || w.Grace() != time.Second {
		t.Errorf("windows %v", w)
	}
	if s := w.String(); s != "JoinWindows{beforeMs=2000, afterMs=5000, graceMs=1000}" {
		t.Errorf("String() = %q", s)
	}
}

// JoinWithoutChangelog leaves the join's stores without changelogs; JoinStoreName names
// them (an inner join: -this-join and -other-join).
func TestStreamJoinStoreOptions(t *testing.T) {
	for _, noLog := range []bool{false, true} {
		b := NewBuilder()
		l := Stream(b, "l", serde.String(), serde.String())
		r := Stream(b, "r", serde.String(), serde.String())
		opts := []Option{JoinStoreName("st")}
		if noLog {
			opts = append(opts, JoinWithoutChangelog())
		}
		JoinWindowed(l, r, func(_ string, a, b string) string { return a + b }, JoinWindowsOf(time.Second), opts...).To("out", serde.String(), serde.String())
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, it := range topo.compile("app", nil, nil).InternalTopics {
			names = append(names, it.Name)
		}
		want := "app-st-this-join-store-changelog,app-st-other-join-store-changelog"
		if noLog {
			want = ""
		}
		if got := strings.Join(names, ","); got != want {
			t.Errorf("without changelog %v: internal topics %q, want %q", noLog, got, want)
		}
	}
}
