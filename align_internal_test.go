package kstream

import (
	"math"
	"testing"

	"github.com/kstream-go/kstream/internal/runtime"
)

// The aligned time believes an upstream task that said it was caught up only while its
// word is fresh by the writers' clocks: a report of another upstream task written more
// than caughtUpFor after its last one makes it count with its stream time, also when the
// downstream task reads both at once (a backlog after a restart, where the dead task's last
// report is old but read now).
func TestAlignedTimeBelievesCaughtUpOnlyWhileFresh(t *testing.T) {
	u, v := runtime.TaskID{SubTopology: 0, Partition: 0}, runtime.TaskID{SubTopology: 0, Partition: 1}
	ms := caughtUpFor.Milliseconds()
	for _, c := range []struct {
		name       string
		marks      []upstreamMark // u's, then v's (in reading order)
		want       int64
		wantReason string
	}{
		{"one not heard of yet", []upstreamMark{{time: 100, caughtUp: true, written: 1000}}, runtime.UnknownTime, "unknown until every upstream task reported"},
		{"both caught up, fresh", []upstreamMark{{time: 100, caughtUp: true, written: 1000}, {time: 900, caughtUp: true, written: 1000 + ms}}, math.MaxInt64, "no aligned time: both believed"},
		{"u's word is stale", []upstreamMark{{time: 100, caughtUp: true, written: 1000}, {time: 900, caughtUp: true, written: 1001 + ms}}, 100, "u counts with its stream time"},
		{"v is behind", []upstreamMark{{time: 100, caughtUp: true, written: 1000}, {time: 50, caughtUp: false, written: 1000}}, 50, "v, not caught up, sets it"},
		{"neither caught up", []upstreamMark{{time: 100, written: 1000}, {time: 900, written: 1000}}, 100, "the slowest sets it"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := &alignment{upstreams: 2, marks: map[runtime.TaskID]upstreamMark{}}
			for i, m := range c.marks {
				a.marks[[]runtime.TaskID{u, v}[i]] = m
				a.latest = max(a.latest, m.written)
			}
			if got := a.compute(); got != c.want {
				t.Errorf("aligned time %d, want %d (%s)", got, c.want, c.wantReason)
			}
		})
	}
}
