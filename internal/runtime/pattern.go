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
			if src.Pattern != nil {
				r.patterns = append(r.patterns, AnchoredPattern(src.Pattern))
			}
		}
	}
	if err := ResolvePatterns(r.topo, topics, func(t string) bool { return r.internal[t] }); err != nil {
		return err
	}
	for _, st := range r.topo.SubTopologies {
		for _, src := range st.Sources {
			if prev, ok := r.topicSub[src.Topic]; ok && prev != st.ID {
				return fmt.Errorf("kstream: topic %q is a source of sub-topologies %d and %d", src.Topic, prev, st.ID)
			}
			r.topicSub[src.Topic] = st.ID
		}
	}
	if m, ok := r.member.(*classicMembership); ok {
		m.tb.indexTopics()
	}
	return nil
}

// checkNewPatternTopics logs, once per topic, a topic created since the start that a
// pattern source matches: this instance reads the topics that matched at its start only
// (see StreamPattern), so it must be restarted to read the new one.
func (w *topicWatch) checkNewPatternTopics(ctx context.Context) {
	r := w.r
	if len(r.patterns) == 0 {
		return
	}
	details, err := r.admin.ListTopics(ctx)
	if err != nil {
		return // the next check retries
	}
	for _, t := range details.Names() {
		if _, known := r.topicSub[t]; known || r.internal[t] || w.newPattern[t] {
			continue
		}
		for _, re := range r.patterns {
			if re.MatchString(t) {
				if w.newPattern == nil {
					w.newPattern = map[string]bool{}
				}
				w.newPattern[t] = true
				r.log.Warn("kstream: a topic created since the start matches a pattern source; restart the instances to read it", "topic", t, "pattern", re.String())
				break
			}
		}
	}
}
