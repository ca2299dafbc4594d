package kstream

import (
	"context"
	"testing"

	"github.com/kstream-go/kstream/internal/runtime"
)

// BenchmarkOperatorLabels measures what Config.ProfileOperators adds to one operator
// call: the labeled wrapper (two pprof.SetGoroutineLabels) against the bare input.
func BenchmarkOperatorLabels(b *testing.B) {
	n := &node{name: "KSTREAM-MAPVALUES-0000000001"}
	var sum int
	in := func(r Record[string, int]) { sum += r.Value }
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			t := &task{} // as newTask makes it, without what the operator does not use
			if on {
				t.labels = runtime.TaskLabels(context.Background(), runtime.TaskID{SubTopology: 0, Partition: 1})
				t.labelCur = t.labels
			}
			f := labeled(t, n, in)
			r := Record[string, int]{Key: "k", Value: 1}
			b.ReportAllocs()
			for b.Loop() {
				f(r)
			}
		})
	}
	if sum == 0 {
		b.Fatal("the operator never ran")
	}
}
