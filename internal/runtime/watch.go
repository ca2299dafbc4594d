package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// topicCheckInterval is how often the source topics are checked for deletion and for a
// changed partition count.
const topicCheckInterval = 5 * time.Second

// topicGone is how many checks in a row must miss a topic before it counts as deleted (a
// cluster may briefly answer UNKNOWN_TOPIC_OR_PARTITION while a leader moves).
const topicGone = 2

// watchTopics starts the goroutine that checks the source topics: every
// topicCheckInterval, and at once when a fetch reports an unknown topic. A source topic that
// was deleted (or deleted and created again) stops the application with an error naming it;
// so does a partition count that changed under keyed state, since keys would then hash to
// other partitions than the ones whose stores hold them. A stateless topology goes on with
// the new partitions, after a warning, and picks them up at once.
func (r *Runtime) watchTopics(ctx context.Context) {
	sources := r.sourceTopics()
	if len(sources) == 0 {
		return
	}
	r.topicCheck = make(chan struct{}, 1)
	w := &topicWatch{r: r, sources: sources, counts: map[string]int32{}, ids: map[string]kadm.TopicID{}, missing: map[string]int{}}
	for t, n := range r.sources().counts {
		w.counts[t] = n
	}
	r.bg.Go(func() {
		t := time.NewTicker(topicCheckInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-r.topicCheck:
			}
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := w.check(cctx)
			if err == nil {
				err = w.pickUpPatternTopics(cctx)
			}
			cancel()
			if err != nil {
				r.fail(err)
				return
			}
			if w.suspect() {
				// Confirm soon rather than at the next tick.
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Second):
				}
				r.checkTopicsSoon()
			}
		}
	})
}

// checkTopicsSoon wakes the topic watcher.
func (r *Runtime) checkTopicsSoon() {
	if r.topicCheck == nil {
		return
	}
	select {
	case r.topicCheck <- struct{}{}:
	default:
	}
}

// topicWatch is the state of the topic watcher; only its goroutine uses it.
type topicWatch struct {
	r       *Runtime
	sources []string
	counts  map[string]int32
	ids     map[string]kadm.TopicID
	missing map[string]int // consecutive checks that did not find the topic
	// newPattern are the topics created since the start that a pattern source matches,
	// already logged (under the streams protocol: pickUpPatternTopics).
	newPattern map[string]bool
}

// suspect reports whether a topic is missing but not yet confirmed gone.
func (w *topicWatch) suspect() bool {
	for _, n := range w.missing {
		if n > 0 {
			return true
		}
	}
	return false
}

// check compares the source topics' metadata with what it saw before; it returns a fatal
// error, or nil (a metadata request that failed is only logged: the next check retries).
func (w *topicWatch) check(ctx context.Context) error {
	r := w.r
	details, err := r.admin.ListTopics(ctx, w.sources...)
	if err != nil {
		if ctx.Err() == nil {
			r.warnEvery("topic-check", "kstream: cannot read the metadata of the source topics; retrying", "err", err)
		}
		return nil
	}
	for _, t := range w.sources {
		d, ok := details[t]
		if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			w.missing[t]++
			if w.missing[t] >= topicGone {
				return fmt.Errorf("kstream: source topic %q (sub-topology %d) was deleted while the application was running", t, r.sources().topicSub[t])
			}
			continue
		}
		if d.Err != nil {
			if authError(d.Err) {
				return fmt.Errorf("kstream: reading the metadata of source topic %q: not authorized: %w", t, d.Err)
			}
			continue
		}
		w.missing[t] = 0
		if id, seen := w.ids[t]; !seen {
			w.ids[t] = d.ID
		} else if id != d.ID && d.ID != (kadm.TopicID{}) {
			return fmt.Errorf("kstream: source topic %q (sub-topology %d) was deleted and created again while the application was running (topic id %s, now %s); its offsets and the state built from it no longer match", t, r.sources().topicSub[t], id, d.ID)
		}
		n := int32(len(d.Partitions))
		was, seen := w.counts[t]
		if !seen {
			w.counts[t] = n
			continue
		}
		if n == was || n == 0 {
			continue
		}
		sub := r.sources().topicSub[t]
		if r.keyed(sub, t) {
			return fmt.Errorf("kstream: the partition count of source topic %q changed from %d to %d; sub-topology %d keeps keyed state by partition (or joins co-partitioned topics), so keys would move to tasks whose stores do not hold them: restore the partition count, or reset the application", t, was, n, sub)
		}
		r.log.Warn("kstream: the partition count of a source topic changed; the stateless sub-topology reading it goes on with the new partitions", "topic", t, "from", was, "to", n, "sub_topology", sub)
		w.counts[t] = n
		r.mu.Lock()
		cl := r.consumer // replaced under mu after a fence (fence.go)
		r.mu.Unlock()
		cl.ForceMetadataRefresh()
	}
	return nil
}

// keyed reports whether sub-topology sub depends on how topic's keys map to partitions: it
// has stores, or topic must be co-partitioned with others.
func (r *Runtime) keyed(sub int, topic string) bool {
	if sub >= 0 && sub < len(r.topo.SubTopologies) && len(r.topo.SubTopologies[sub].Stores) > 0 {
		return true
	}
	return r.sources().copartitioned[topic]
}

// fixedCount returns the partition count that source topic had when the application
// started, if it feeds keyed state (see keyed): a count the application cannot follow.
func (r *Runtime) fixedCount(topic string) (int32, bool) {
	ix := r.sources()
	sub, ok := ix.topicSub[topic]
	if !ok || !r.keyed(sub, topic) {
		return 0, false
	}
	n, ok := ix.counts[topic]
	return n, ok && n > 0
}
