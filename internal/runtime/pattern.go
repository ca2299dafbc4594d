package runtime

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// PatternMarker is the name that stands for the topics of a pattern source in
// Topology.CopartitionGroups, until the runtime knows them. It cannot be a topic name
// (a topic name has no '/').
func PatternMarker(pattern string) string { return "/" + pattern + "/" }

// AnchoredPattern returns re matching whole topic names only, as Java's
// Pattern.matcher(topic).matches() does.
func AnchoredPattern(re *regexp.Regexp) *regexp.Regexp {
	return regexp.MustCompile(`^(?:` + re.String() + `)$`)
}

// hasPatterns reports whether the topology has a pattern source.
func (t *Topology) hasPatterns() bool {
	for _, st := range t.SubTopologies {
		for _, src := range st.Sources {
			if src.Pattern != nil {
				return true
			}
		}
	}
	return false
}

// ResolvePatterns replaces every pattern source of topo with a source per topic of topics
// that it matches (sorted), leaving out the topics in skip (the application's internal
// topics) and those read by another source; the markers in CopartitionGroups become those
// topics. It returns the error of a pattern that matches no topic.
func ResolvePatterns(topo *Topology, topics []string, skip func(string) bool) error {
	if !topo.hasPatterns() {
		return nil
	}
	slices.Sort(topics)
	named := map[string]bool{}
	for _, st := range topo.SubTopologies {
		for _, src := range st.Sources {
			if src.Pattern == nil {
				named[src.Topic] = true
			}
		}
	}
	matched := map[string][]string{}
	for i := range topo.SubTopologies {
		st := &topo.SubTopologies[i]
		var out []Source
		for _, src := range st.Sources {
			if src.Pattern == nil {
				out = append(out, src)
				continue
			}
			re := AnchoredPattern(src.Pattern)
			var ts []string
			for _, t := range topics {
				if re.MatchString(t) && !named[t] && (skip == nil || !skip(t)) {
					ts = append(ts, t)
					out = append(out, Source{Topic: t, Reset: src.Reset, ResetDuration: src.ResetDuration})
				}
			}
			if len(ts) == 0 {
				return fmt.Errorf("kstream: no topic matches the pattern %q of a source of sub-topology %d; create a matching topic before starting the application", src.Pattern.String(), st.ID)
			}
			matched[PatternMarker(src.Pattern.String())] = ts
		}
		st.Sources = out
	}
	for i, g := range topo.CopartitionGroups {
		var out []string
		for _, t := range g {
			if ts, ok := matched[t]; ok {
				out = append(out, ts...)
			} else if !strings.HasPrefix(t, "/") {
				out = append(out, t)
			}
		}
		topo.CopartitionGroups[i] = out
	}
	return nil
}

// patternSource is a pattern source of the topology, as the runtime follows it.
type patternSource struct {
	re   *regexp.Regexp // anchored (AnchoredPattern)
	text string         // the pattern as written
	sub  int            // its sub-topology
	src  Source         // its reset policy (Topic, Pattern empty)
	// groups are the indexes of the co-partition groups it belongs to, in
	// Topology.CopartitionGroups.
	groups []int
}

// resolvePatterns lists the cluster's topics and resolves the pattern sources with them
// (ResolvePatterns), before the topics are checked and the consumer subscribes.
func (r *Runtime) resolvePatterns(ctx context.Context) error {
	if !r.topo.hasPatterns() {
		return nil
	}
	var topics []string
	err := r.retry(ctx, "listing the topics for the pattern sources", func(ctx context.Context) error {
		details, err := r.admin.ListTopics(ctx)
		if err != nil {
			return fmt.Errorf("kstream: listing the topics for the pattern sources: %w", err)
		}
		topics = details.Names()
		return nil
	})
	if err != nil {
		return err
	}
	for _, st := range r.topo.SubTopologies {
		for _, src := range st.Sources {
			if src.Pattern == nil {
				continue
			}
			ps := patternSource{re: AnchoredPattern(src.Pattern), text: src.Pattern.String(), sub: st.ID, src: Source{Reset: src.Reset, ResetDuration: src.ResetDuration}}
			marker := PatternMarker(src.Pattern.String())
			for i, g := range r.topo.CopartitionGroups {
				if slices.Contains(g, marker) && len(g) > 1 {
					ps.groups = append(ps.groups, i)
				}
			}
			r.patterns = append(r.patterns, ps)
		}
	}
	if err := ResolvePatterns(r.topo, topics, func(t string) bool { return r.internal[t] }); err != nil {
		return err
	}
	if err := sourcesOnce(r.topo); err != nil {
		return err
	}
	r.src.Store(newSourceIndex(r.topo, nil))
	return nil
}

// pickUpPatternTopics reads the topics created since the start that a pattern source
// matches, as Kafka Streams does when its consumer's metadata shows one: each becomes a
// source of the pattern's sub-topology (sourceIndex.with), the consumer subscribes to it,
// and the group rebalances, which gives partition p of it to the owner of task <sub>_p (a
// new task if the topic has more partitions than the sub-topology had). Every instance
// finds the topic by itself; the leader assigns its partitions only to members that
// subscribe to it (taskBalancer.Balance). A new topic that must be co-partitioned with
// others (a pattern source in a join) and has another partition count, that has more
// partitions than a sub-topology with stores has tasks (its changelogs cannot grow), or that
// patterns of two sub-topologies match, is a fatal error naming it, as Kafka Streams fails
// on them. Under the streams
// protocol the broker holds the topology, which cannot change: the instance only logs the
// topic, and reads it after a restart.
func (w *topicWatch) pickUpPatternTopics(ctx context.Context) error {
	r := w.r
	if len(r.patterns) == 0 {
		return nil
	}
	details, err := r.admin.ListTopics(ctx)
	if err != nil {
		return nil // the next check retries
	}
	_, streams := r.member.(*streamsMembership)
	ix := r.sources()
	var added []string
	for _, t := range details.Names() { // sorted
		if _, known := ix.topicSub[t]; known || r.internal[t] || w.newPattern[t] {
			continue
		}
		var match *patternSource
		for i := range r.patterns {
			p := &r.patterns[i]
			if !p.re.MatchString(t) {
				continue
			}
			if match != nil && match.sub != p.sub {
				return fmt.Errorf("kstream: topic %q, created since the start, matches the pattern %q of sub-topology %d and the pattern %q of sub-topology %d; a topic can be the source of one sub-topology only", t, match.text, match.sub, p.text, p.sub)
			}
			if match == nil {
				match = p
			}
		}
		if match == nil {
			continue
		}
		d := details[t]
		if d.Err != nil || len(d.Partitions) == 0 {
			continue // being created: the next check sees it whole
		}
		if streams {
			if w.newPattern == nil {
				w.newPattern = map[string]bool{}
			}
			w.newPattern[t] = true
			r.log.Warn("kstream: a topic created since the start matches a pattern source; under the streams protocol the broker holds the topology, so restart the instances to read it", "topic", t, "pattern", match.text)
			continue
		}
		n := int32(len(d.Partitions))
		for _, gi := range match.groups {
			for _, other := range r.topo.CopartitionGroups[gi] {
				if c := ix.counts[other]; c > 0 && c != n {
					return fmt.Errorf("kstream: topic %q, created since the start, matches the pattern %q of sub-topology %d and must be co-partitioned with %v, but has %d partitions where %q has %d: recreate it with %d partitions", t, match.text, match.sub, r.topo.CopartitionGroups[gi], n, other, c, c)
				}
			}
		}
		var tasks int32
		for _, src := range ix.subs[match.sub] {
			tasks = max(tasks, ix.counts[src.Topic])
		}
		if st := r.topo.SubTopologies[match.sub]; n > tasks && len(st.Stores) > 0 {
			return fmt.Errorf("kstream: topic %q, created since the start, matches the pattern %q of sub-topology %d, but has %d partitions where the sub-topology has %d tasks: its stores' changelogs have %d partitions, so its tasks cannot grow; recreate the topic with at most %d partitions, or reset the application", t, match.text, match.sub, n, tasks, tasks, tasks)
		}
		src := match.src
		src.Topic = t
		ix = ix.with(match.sub, src, n, len(match.groups) > 0)
		added = append(added, t)
		w.sources = append(w.sources, t)
		w.counts[t] = n
		r.log.Info("kstream: reading a topic created since the start that a pattern source matches", "topic", t, "pattern", match.text, "sub_topology", match.sub, "partitions", n)
		if n != tasks && r.keyed(match.sub, t) {
			r.log.Warn("kstream: a new topic of a pattern source of keyed state has another partition count than the sub-topology's other sources: a key of it goes to the task of its own partition, whose store may not hold the key's state from the other topics", "topic", t, "partitions", n, "sub_topology", match.sub, "tasks", tasks)
		}
	}
	if len(added) > 0 {
		slices.Sort(w.sources)
		r.src.Store(ix)
	}
	if !streams {
		// Every check, not only after a topic was added: a consumer made again after a
		// fence may have been made from the sources as they were just before.
		r.subscribeSources()
	}
	return nil
}

// subscribeSources adds to the consumer's subscription the source topics it lacks (the
// topics pattern sources picked up since the consumer was made); kgo then rejoins the group.
func (r *Runtime) subscribeSources() {
	r.mu.Lock()
	cl := r.consumer // replaced under mu after a fence (fence.go)
	r.mu.Unlock()
	if cl == nil {
		return
	}
	have := map[string]bool{}
	for _, t := range cl.GetConsumeTopics() {
		have[t] = true
	}
	var missing []string
	for _, t := range r.sourceTopics() {
		if !have[t] {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		cl.AddConsumeTopics(missing...)
	}
}
