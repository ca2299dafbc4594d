package runtime

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// probeCheck is how often a member holding warm-up replicas looks at their lags.
const probeCheck = 500 * time.Millisecond

// watchWarmups starts the goroutine that asks the group for probing rebalances while this
// member holds warm-up replicas (KIP-441): once as soon as every warm-up of the last
// assignment is within the acceptable recovery lag, so that the leader moves their tasks
// here without waiting; and every ProbingInterval while it holds any, as Kafka Streams'
// probing rebalances, so that warm-ups that cannot catch up by themselves (their changelog
// grows as fast as they restore it) are still looked at. The rebalance happens because the
// member's join metadata changed: it reports its warm-ups' new lags.
func (r *Runtime) watchWarmups(ctx context.Context) {
	r.bg.Go(func() {
		t := time.NewTicker(probeCheck)
		defer t.Stop()
		var last time.Time // last probe
		// early is the warm-up set of the last early probe: if the leader gave the same
		// warm-ups again, caught up as they were, asking again at once could loop; the
		// probing interval looks at them again.
		var early string
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			r.wantMu.Lock()
			warm, at, probed := slices.Clone(r.warmups), r.assignedAt, r.probed
			r.wantMu.Unlock()
			if len(warm) == 0 {
				continue
			}
			caught, worst := true, int64(0)
			for _, id := range warm {
				l, ok := r.standby.lag(id)
				if !ok || l > r.cfg.AcceptableRecoveryLag {
					caught = false
				}
				if ok {
					worst = max(worst, l)
				}
			}
			since := at
			if last.After(since) {
				since = last
			}
			var why string
			switch {
			case caught && !probed && fmt.Sprint(warm) != early:
				early = fmt.Sprint(warm)
				why = fmt.Sprintf("%d warm-up replicas caught up (largest lag %d records)", len(warm), worst)
			case time.Since(since) >= r.cfg.ProbingInterval:
				why = fmt.Sprintf("probing interval %s passed with %d warm-up replicas", r.cfg.ProbingInterval, len(warm))
			default:
				continue
			}
			r.mu.Lock()
			cl := r.consumer // replaced under mu after a fence (fence.go)
			r.mu.Unlock()
			if cl == nil {
				continue
			}
			r.wantMu.Lock()
			if r.assignedAt.Equal(at) {
				r.probed = true
			}
			r.wantMu.Unlock()
			last = time.Now()
			r.member.probe(cl, why)
		}
	})
}
