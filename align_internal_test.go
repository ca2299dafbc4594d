package kstream

import (
	"testing"

	"github.com/kstream-go/kstream/internal/runtime"
)

// The aligned time: a caught-up upstream task whose word is fresh by the writers' clocks
// holds it at the downstream task's stream time when its last report was read (so that a
// task that dies while caught up holds it there until its successor reports); one whose
// word is stale (a report of another task written more than caughtUpFor after its last one
// was read, also when both are read at once from a backlog) and one not caught up hold it
// at their own stream time.
func TestAlignedTime(t *testing.T) {
	u, v := runtime.TaskID{SubTopology: 0, Partition: 0}, runtime.TaskID{SubTopology: 0, Partition: 1}
	ms := caughtUpFor.Milliseconds()
	for _, c := range []struct {
		name   string
		marks  []upstreamMark // u's, then v's (in reading order)
		want   int64
		reason string
	}{
		{"one not heard of yet", []upstreamMark{{time: 100, caughtUp: true, written: 1000, readAt: 150}},
			runtime.UnknownTime, "unknown until every upstream task reported"},
		{"both caught up, fresh", []upstreamMark{{time: 100, caughtUp: true, written: 1000, readAt: 150}, {time: 900, caughtUp: true, written: 1000 + ms, readAt: 950}},
			150, "the downstream task's stream time when it read u's last word"},
		{"u's word is stale", []upstreamMark{{time: 100, caughtUp: true, written: 1000, readAt: 150}, {time: 900, caughtUp: true, written: 1001 + ms, readAt: 950}},
			100, "u counts with its stream time"},
		{"v is behind", []upstreamMark{{time: 100, caughtUp: true, written: 1000, readAt: 150}, {time: 50, written: 1000, readAt: 150}},
			50, "v, not caught up, sets it"},
		{"neither caught up", []upstreamMark{{time: 100, written: 1000, readAt: 950}, {time: 900, written: 1000, readAt: 950}},
			100, "the slowest sets it"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := &alignment{upstreams: 2, marks: map[runtime.TaskID]upstreamMark{}}
			for i, m := range c.marks {
				a.marks[[]runtime.TaskID{u, v}[i]] = m
				a.latest = max(a.latest, m.written)
			}
			if got := a.compute(); got != c.want {
				t.Errorf("aligned time %d, want %d (%s)", got, c.want, c.reason)
			}
		})
	}
}

// A downstream task that started again from its stores (it moved to another instance, or
// restarted) after reading its partition's last record: its own stream time starts again
// from the older records it reads now, and stays below that record's. A caught-up upstream
// task's report holds the aligned time at what the task had read, the stream time its
// windowed stores had, so that the windows that last record closed do close (before the
// fix, the aligned time stayed at the task's new stream time, and the last windows of the
// partition were never emitted: TestAlignedEventTimeReprocessingOnBroker/2-instances lost
// 2 of its 50 windows whenever its windowed tasks moved).
func TestAlignedTimeAfterARestart(t *testing.T) {
	u, v := runtime.TaskID{SubTopology: 0, Partition: 0}, runtime.TaskID{SubTopology: 0, Partition: 1}
	tk := &task{streamTime: 575_000}
	tk.align = &alignment{upstreams: 2, marks: map[runtime.TaskID]upstreamMark{}, restored: 610_000, aligned: runtime.UnknownTime}
	for _, id := range []runtime.TaskID{u, v} {
		if err := tk.noteWatermark(id, upstreamMark{time: 610_000, caughtUp: true, written: 1000}); err != nil {
			t.Fatal(err)
		}
	}
	if got := tk.align.aligned; got != 610_000 {
		t.Errorf("aligned time %d, want 610000: the stream time the task's stores had", got)
	}
	tk.streamTime = 620_000 // a later record read since
	if err := tk.noteWatermark(u, upstreamMark{time: 620_000, caughtUp: true, written: 1100}); err != nil {
		t.Fatal(err)
	}
	if err := tk.noteWatermark(v, upstreamMark{time: 620_000, caughtUp: true, written: 1100}); err != nil {
		t.Fatal(err)
	}
	if got := tk.align.aligned; got != 620_000 {
		t.Errorf("aligned time %d, want 620000: the task's own stream time once later", got)
	}
}
