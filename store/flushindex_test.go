package store

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestFlushIndexBound checks that a flushIndex's bound of a key is never below the
// timestamp of a put of it that a flush has written (a put is flushed once the flush count
// has moved past the count it was made at), nor its pending bound below that of a put not
// flushed yet, through the generations it drops to bound its memory, and that a key it
// never saw is bounded by the stream time it started at.
func TestFlushIndexBound(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var idx flushIndex
	idx.start(50, 0) // the entries written before the index: timestamps up to 50
	idx.keys = 8
	type put struct {
		ts  int64
		gen uint64
	}
	puts := map[string][]put{}
	gen := uint64(0)
	now := int64(50)
	tight := 0
	for step := range 20_000 {
		k := fmt.Sprintf("k%d", r.IntN(40))
		flushOdds := 10 // percent
		if step >= 10_000 {
			flushOdds = 1 // keys dropped and put again before a flush
		}
		switch op := r.IntN(100); {
		case op < 50:
			now += r.Int64N(5)
			at := max(0, now-r.Int64N(30)) // out of order too
			puts[k] = append(puts[k], put{at, gen})
			idx.note([]byte(k), at, gen)
		case op < 50+flushOdds:
			gen++ // a flush (or a discard: the index cannot tell)
		default:
			want := int64(50)
			for _, p := range puts[k] {
				if p.gen < gen {
					want = max(want, p.ts)
				}
			}
			got, _ := idx.bounds([]byte(k), gen)
			if got < want {
				t.Fatalf("step %d: bound(%s) = %d; a flushed put has %d", step, k, got, want)
			}
			if got == want {
				tight++
			}
			pending := NoTimestamp
			for _, p := range puts[k] {
				if p.gen == gen {
					pending = max(pending, p.ts)
				}
			}
			if _, got := idx.bounds([]byte(k), gen); got < pending {
				t.Fatalf("step %d: pendingBound(%s) = %d; a pending put has %d", step, k, got, pending)
			}
		}
	}
	if got, _ := idx.bounds([]byte("never"), gen); got != idx.floor {
		t.Errorf("bound of an unseen key = %d; want the floor %d", got, idx.floor)
	}
	if idx.floor <= 50 {
		t.Errorf("floor = %d: no generation was dropped", idx.floor)
	}
	if tight == 0 {
		t.Error("no bound was exact")
	}
}
