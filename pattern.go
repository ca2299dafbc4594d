package kstream

import "regexp"

// patternSource is a source of [StreamPattern] in a task.
type patternSource struct {
	re        *regexp.Regexp // anchored: the whole topic name must match
	src       sourceFn
	extractor TimestampExtractor
}

// patternSource returns the source of a StreamPattern whose pattern matches topic, and
// remembers it (and its timestamp extractor) for topic.
func (t *task) patternSource(topic string) (sourceFn, bool) {
	if src, ok := t.sources[topic]; ok {
		return src, true
	}
	for _, p := range t.patterns {
		if p.re.MatchString(topic) {
			t.sources[topic] = p.src
			if p.extractor != nil {
				t.extractors[topic] = p.extractor
			}
			return p.src, true
		}
	}
	return nil, false
}
