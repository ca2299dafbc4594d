package kstream

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/kstream-go/kstream/internal/runtime"
	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/store"
	"github.com/kstream-go/kstream/store/memory"
)

// slidingEnv is the task environment of the sliding aggregator under test: it only counts
// dropped records.
type slidingEnv struct {
	runtime.TaskEnv
	dropped int
}

func (e *slidingEnv) RecordDropped() { e.dropped++ }

// Now is the clock of the loss log lines' limit.
func (e *slidingEnv) Now() time.Time { return time.UnixMilli(0) }

// slidingFwd collects what the aggregator under test forwards.
type slidingFwd[K, V any] struct {
	ProcessorContext[K, V]
	out []Record[K, V]
}

func (c *slidingFwd[K, V]) Forward(r Record[K, V]) { c.out = append(c.out, r) }

// After every record of random sequences (early, in-order, out-of-order and late records,
// several keys), an aggregator recovered from the store alone (a restarted task) has the
// live one's stream time and, emitting on close, last emission: recover's reading of the
// store holds whatever the order of the records.
func TestSlidingRecover(t *testing.T) {
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 7))
		td := int64(1 + rng.IntN(20))
		grace := int64(rng.IntN(30))
		onClose := seed%2 == 1
		t.Run(fmt.Sprintf("seed%d-td%d-grace%d-close%v", seed, td, grace, onClose), func(t *testing.T) {
			db := memory.New()
			defer db.Close()
			bk, err := db.Open("counts", 0)
			if err != nil {
				t.Fatal(err)
			}
			o := store.WindowOptions{Retention: time.Duration(2*td+grace) * time.Millisecond, WindowSize: time.Duration(td) * time.Millisecond}
			newStore := func() *windowKV[string, int64] {
				st, err := store.NewWindowStore("counts", bk, serde.String(), tsSerde[int64]{serde.Int64()}, o)
				if err != nil {
					t.Fatal(err)
				}
				return st
			}
			env := &slidingEnv{}
			// Exactly-once: the last emission is derived from the store, which this test checks.
			tk := &task{env: env, log: slog.New(slog.NewTextHandler(io.Discard, nil)), h: &handlers{eos: true}}
			a := &windowAgg[string, string, int64]{w: SlidingWindowsOf(time.Duration(td) * time.Millisecond).WithGrace(time.Duration(grace) * time.Millisecond).spec(),
				onClose: onClose, init: func() int64 { return 0 }, agg: func(_, _ string, n int64, _ bool) int64 { return n + 1 },
				ks: serde.String(), store: "counts", info: storedInfo()}
			n := &node{name: "KSTREAM-AGGREGATE-0000000001"}
			p := &slidingAggregator[string, string, int64]{a: a, t: tk, n: n, st: newStore(), windowClock: newWindowClock()}
			ctx := &slidingFwd[serde.Windowed[string], change[int64]]{}
			var ts int64
			for i := range 300 {
				ts += int64(rng.IntN(4))
				rts := ts
				if rng.IntN(3) == 0 {
					rts = max(0, ts-int64(rng.IntN(int(2*td+grace+10))))
				}
				r := Record[string, string]{Key: string(rune('a' + rng.IntN(3))), Value: "v", Timestamp: time.UnixMilli(rts)}
				if err := p.process(ctx, r); err != nil {
					t.Fatalf("record %d at %d: %v", i, rts, err)
				}
				q := &slidingAggregator[string, string, int64]{a: a, t: tk, n: n, st: newStore(), windowClock: newWindowClock()}
				if err := q.recover(); err != nil {
					t.Fatal(err)
				}
				if q.observed != p.observed || q.lastEmit != p.lastEmit {
					t.Fatalf("after record %d at %d: recovered stream time %d and last emission %d, want %d and %d",
						i, rts, q.observed, q.lastEmit, p.observed, p.lastEmit)
				}
			}
			if len(ctx.out) == 0 || env.dropped == 0 || (onClose && p.lastEmit == -1) {
				t.Fatalf("%d results and %d dropped records: the sequence does not exercise the aggregator", len(ctx.out), env.dropped)
			}
		})
	}
}
