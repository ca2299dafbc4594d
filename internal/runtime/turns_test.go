package runtime

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// punctTask is a task whose only work is one wall-clock punctuation, which runs fn.
type punctTask struct {
	Task // not called: the turns of these tests only punctuate
	due  time.Time
	fn   func()
}

func (p *punctTask) NextPunctuation() time.Time { return p.due }

func (p *punctTask) Punctuate(time.Time) (bool, error) {
	p.due = time.Time{}
	p.fn()
	return true, nil
}

// punctTaskRun is an idle task of no partition whose punctuation is due at now.
func punctTaskRun(now time.Time, fn func()) *taskRun {
	return &taskRun{task: &punctTask{due: now, fn: fn}, labels: context.Background(), base: context.Background()}
}

// TestTurnsLaunchedTogetherRunInOrder: turns launched together run one after the other, in
// the order of the batch, and leave their tasks idle.
func TestTurnsLaunchedTogetherRunInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &Runtime{}
		now := time.Now()
		var mu sync.Mutex
		var order []int
		var batch []*taskRun
		for i := range 4 {
			batch = append(batch, punctTaskRun(now, func() {
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
			}))
		}
		r.mu.Lock()
		r.launchLocked(batch, now, time.Second)
		r.mu.Unlock()
		r.turns.Wait() // not quiesceLocked, which would stop them before they punctuate
		if len(order) != 4 || order[0] != 0 || order[1] != 1 || order[2] != 2 || order[3] != 3 {
			t.Fatalf("turns ran in the order %v, want [0 1 2 3]", order)
		}
		for i, tr := range batch {
			if tr.busy.Load() {
				t.Fatalf("task %d still busy after its turn", i)
			}
		}
	})
}

// TestTurnsShareAfterSlowTurn: a turn that does not end holds the turns launched with it
// only turnShareAfter: they then run on goroutines of their own while it still runs.
func TestTurnsShareAfterSlowTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &Runtime{}
		now := time.Now()
		release := make(chan struct{})
		slowBegan := make(chan struct{})
		slow := punctTaskRun(now, func() {
			close(slowBegan)
			<-release // a slow operator, until the test lets it go
		})
		ran := make([]chan struct{}, 3)
		batch := []*taskRun{slow}
		for i := range ran {
			ran[i] = make(chan struct{})
			batch = append(batch, punctTaskRun(now, func() { close(ran[i]) }))
		}
		r.mu.Lock()
		r.launchLocked(batch, now, time.Second)
		r.mu.Unlock()
		<-slowBegan
		for i, c := range ran {
			// Without the share, this waits for ever: synctest reports the deadlock. The
			// bubble's clock only moves when every goroutine waits, so it reads exactly when
			// the share happened.
			<-c
			if d := time.Since(now); d != turnShareAfter {
				t.Fatalf("turn %d, launched with a slow turn, ran %v after the launch, want %v (turnShareAfter)", i+1, d, turnShareAfter)
			}
		}
		if !slow.busy.Load() {
			t.Fatal("the slow task is idle while its turn runs")
		}
		close(release)
		r.mu.Lock()
		r.quiesceLocked()
		r.mu.Unlock()
		if slow.busy.Load() {
			t.Fatal("the slow task is busy after its turn ended")
		}
	})
}
