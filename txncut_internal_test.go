package kstream

import (
	"testing"

	"github.com/kstream-go/kstream/internal/runtime"
)

// A task's commit saves the state of its Cut, not the state when Committed is called: under
// exactly-once the task goes on processing (for the next transaction) while the cut one
// ends. An abort goes back to the last committed cut; a Cut that never committed is
// forgotten; Committed without a Cut saves nothing.
func TestTaskCommitsTheStateOfItsCut(t *testing.T) {
	wc := newWindowClock()
	jc := newJoinClock()
	tk := &task{streamTime: runtime.UnknownTime, savedStreamTime: runtime.UnknownTime}
	s := &schedule{typ: StreamTime, interval: 10, next: 0}
	tk.scheds = []*schedule{s}
	tk.txnHooks = []txnHook{&wc, &jc}
	set := func(v int64) {
		tk.streamTime, s.next = v, v+10
		wc.observed, wc.lastEmit = v, v-5
		jc.streamTime, jc.minTime, jc.due = v, v-1, v+1
	}
	check := func(what string, v int64) {
		t.Helper()
		if tk.streamTime != v || s.next != v+10 || wc.observed != v || wc.lastEmit != v-5 || jc.streamTime != v || jc.minTime != v-1 || jc.due != v+1 {
			t.Fatalf("%s: stream time %d, schedule %d, window clock %d/%d, join clock %d/%d/%d; want all from %d",
				what, tk.streamTime, s.next, wc.observed, wc.lastEmit, jc.streamTime, jc.minTime, jc.due, v)
		}
	}
	set(100)
	tk.Cut()
	tk.Committed() // a blocking commit: cut and committed at once
	set(200)
	tk.Cut() // the transaction covers 200
	set(300) // processed while it ends
	tk.Committed()
	tk.Aborted() // the next transaction aborts
	check("after the abort of the transaction that followed a committed cut", 200)

	set(400)
	tk.Cut()     // this transaction aborts
	tk.Aborted() // before its Committed
	check("after the abort of a cut transaction", 200)
	set(500)
	tk.Committed() // no Cut since the abort: nothing saved
	tk.Aborted()
	check("after Committed without a Cut", 200)
}
