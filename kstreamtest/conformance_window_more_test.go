package kstreamtest_test

import (
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/serde"
)

// The builds of the windowed conformance scenarios over session windows and Suppress, which
// fill the nil builds of confWindowScenarios (conformance_window_test.go).
var _ = func() bool {
	session := func() kstream.SessionWindows {
		return kstream.SessionWindowsOf(5 * time.Second).WithGrace(5 * time.Second)
	}
	tumbling := func() kstream.TimeWindows { return kstream.TimeWindowsOf(10 * time.Second).WithGrace(5 * time.Second) }
	for name, build := range map[string]func(b *kstream.Builder){
		"win-session-count": func(b *kstream.Builder) {
			w := confWin(b).GroupByKey().WindowedBySession(session())
			confWinOut(kstream.SessionCount(w, "win-session-counts"))
		},
		"win-session-aggregate": func(b *kstream.Builder) {
			w := confWin(b).GroupByKey().WindowedBySession(session())
			confWinOut(kstream.SessionAggregate(w, func() string { return "" }, confAppend,
				func(_, a, c string) string { return a + "|" + c }, serde.String(), "win-session-agg"))
		},
		"win-session-emit-final": func(b *kstream.Builder) {
			w := confWin(b).GroupByKey().WindowedBySession(session()).EmitOnWindowClose()
			confWinOut(kstream.SessionCount(w, "win-session-final-counts"))
		},
		"win-suppress-final": func(b *kstream.Builder) {
			w := confWin(b).GroupByKey().WindowedBy(tumbling())
			confWinOut(kstream.WindowedCount(w, "win-sup-counts").Suppress(kstream.UntilWindowCloses(kstream.Unbounded())))
		},
		"win-suppress-final-hopping": func(b *kstream.Builder) {
			w := confWin(b).GroupByKey().WindowedBy(kstream.TimeWindowsOf(10 * time.Second).AdvanceBy(5 * time.Second).WithGrace(3 * time.Second))
			confWinOut(kstream.WindowedCount(w, "win-sup-hop-counts").Suppress(kstream.UntilWindowCloses(kstream.Unbounded())))
		},
		"win-suppress-session": func(b *kstream.Builder) {
			w := confWin(b).GroupByKey().WindowedBySession(session())
			confWinOut(kstream.SessionCount(w, "win-sup-session-counts").Suppress(kstream.UntilWindowCloses(kstream.Unbounded())))
		},
		"win-suppress-timelimit": func(b *kstream.Builder) {
			t := kstream.Count(confWin(b).GroupByKey(), "win-tl-counts").
				Suppress(kstream.UntilTimeLimit(7*time.Second, kstream.Unbounded()))
			confOut(kstream.MapValues(t.ToStream(), confN))
		},
		"win-suppress-timelimit-emit-early": func(b *kstream.Builder) {
			t := kstream.Count(confWin(b).GroupByKey(), "win-tle-counts").
				Suppress(kstream.UntilTimeLimit(7*time.Second, kstream.MaxRecords(2).EmitEarlyWhenFull()))
			confOut(kstream.MapValues(t.ToStream(), confN))
		},
		"win-suppress-named": func(b *kstream.Builder) {
			w := confWin(b).GroupByKey().WindowedBy(tumbling())
			confWinOut(kstream.WindowedCount(w, "win-named-counts").Suppress(kstream.UntilWindowCloses(kstream.Unbounded()).WithName("final")))
		},
	} {
		confWindowLater[name] = build
	}
	return true
}()
