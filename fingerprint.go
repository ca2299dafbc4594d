package kstream

import (
	"reflect"
	"slices"
	"strings"

	"github.com/kstream-go/kstream/store"
	"github.com/kstream-go/kstream/upgrade"
)

// SerdeIdentity is implemented by serdes that name their wire format for a topology's
// fingerprint ([Topology.Fingerprint]). Without it a serde is identified by its Go type,
// which names the type of its data ("serde.jsonSerde[main.Order]"): enough to notice a
// changed serde, but a [serde.Funcs] serde looks like any other of its type, and a renamed
// data type looks like a new format. Wrap such a serde in a type with this method, and keep
// the identity while the format stays readable by both versions (a schema evolved
// compatibly), to tell the upgrade check what it cannot see.
type SerdeIdentity interface {
	SerdeIdentity() string
}

// serdeUnwrapper is a serde wrapping another one whose identity it has (lateBound).
type serdeUnwrapper interface {
	unwrapSerde() any
}

func (l *lateBound[T]) unwrapSerde() any { return l.base }

// serdeID identifies serde s (a serde.Serde[T]) for the fingerprint: its SerdeIdentity, or
// its Go type; "" for nil.
func serdeID(s any) string {
	for {
		if id, ok := s.(SerdeIdentity); ok {
			return id.SerdeIdentity()
		}
		u, ok := s.(serdeUnwrapper)
		if !ok {
			break
		}
		s = u.unwrapSerde()
	}
	if s == nil {
		return ""
	}
	v := reflect.ValueOf(s)
	if v.Kind() == reflect.Pointer && v.IsNil() {
		return ""
	}
	return v.Type().String()
}

// def is the window definition of w for the fingerprint.
func (w windowSpec) def() *upgrade.WindowDef {
	d := &upgrade.WindowDef{SizeMs: w.size, GraceMs: w.grace}
	switch w.kind {
	case timeWindowKind:
		d.Type, d.AdvanceMs = "time", w.advance
	case slidingWindowKind:
		d.Type = "sliding"
	case sessionWindowKind:
		d.Type = "session"
	}
	return d
}

// def is the window definition of w for the fingerprint.
func (w JoinWindows) def() *upgrade.WindowDef {
	return &upgrade.WindowDef{Type: "join", SizeMs: w.size(), BeforeMs: w.before, AfterMs: w.after, GraceMs: w.grace}
}

// Fingerprint returns what decides whether another topology can take over this one's state:
// its sub-topologies, stores (kinds, serdes, windows, retention, changelogs), internal
// topics (partition counts, serdes), source and sink topics, and its Describe text. Write
// it to a file from the version you run (upgrade.Fingerprint.WriteFile), and compare it
// with the next version's with [upgrade.Check] or "kstream upgrade-check old.json
// new.json" before deploying; docs/operations-guide.md ("Upgrading a topology") has the
// rules. The application id is not part of a topology: set ApplicationID in the result to
// have it compared too.
//
// Serdes are identified by their Go types, or by [SerdeIdentity].
func (t *Topology) Fingerprint() upgrade.Fingerprint {
	f := upgrade.Fingerprint{Format: upgrade.FormatVersion, Describe: t.Describe()}
	sources, sinks := map[string]bool{}, map[string]bool{}
	for i, sub := range t.subs {
		s := upgrade.Subtopology{ID: i, SourceTopics: []string{}, Nodes: []string{}}
		if d := globalStoreOf(sub); d != nil {
			s.Global = true
		}
		for _, n := range sub {
			s.Nodes = append(s.Nodes, n.name)
			switch n.kind {
			case kindSource:
				topics := n.topics
				if n.pattern != nil {
					// A pattern source reads whatever topics match: its pattern stands for
					// them, so that a changed pattern shows as a changed source.
					topics = []string{"pattern:" + n.pattern.String()}
				}
				s.SourceTopics = append(s.SourceTopics, topics...)
				if !n.internal {
					for _, topic := range topics {
						sources[topic] = true
					}
				}
			case kindSink:
				if !n.internal && n.sinkTopic != "" {
					sinks[n.sinkTopic] = true
				}
			}
		}
		slices.Sort(s.SourceTopics)
		f.Subtopologies = append(f.Subtopologies, s)
	}
	for _, d := range t.stores {
		st := t.storeFingerprint(d)
		f.Stores = append(f.Stores, st)
		if sub := &f.Subtopologies[st.Subtopology]; !slices.Contains(sub.Stores, d.name) {
			sub.Stores = append(sub.Stores, d.name)
			slices.Sort(sub.Stores)
		}
	}
	slices.SortFunc(f.Stores, func(a, b upgrade.Store) int { return strings.Compare(a.Name, b.Name) })
	f.InternalTopics = []upgrade.InternalTopic{}
	for _, it := range t.internal {
		ft := upgrade.InternalTopic{Name: it.Name, Partitions: it.Partitions, PartitionsOf: slices.Clone(it.PartitionsOf), Writer: -1, Reader: -1}
		for _, n := range t.nodes {
			switch {
			case n.kind == kindSink && n.internal && n.sinkTopic == it.Name:
				ft.Writer = t.subOf(n)
				if n.serdeIDs != nil {
					ft.KeySerde, ft.ValueSerde = n.serdeIDs()
				}
			case n.kind == kindSource && n.internal && slices.Contains(n.topics, it.Name):
				ft.Reader = t.subOf(n)
			}
		}
		f.InternalTopics = append(f.InternalTopics, ft)
	}
	slices.SortFunc(f.InternalTopics, func(a, b upgrade.InternalTopic) int { return strings.Compare(a.Name, b.Name) })
	f.SourceTopics, f.SinkTopics = sortedKeys(sources), sortedKeys(sinks)
	return f
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// windowOptioned and sessionOptioned are the changelog codecs of window and session stores.
type windowOptioned interface{ WindowOptions() store.WindowOptions }
type sessionOptioned interface{ SessionOptions() store.SessionOptions }

// storeFingerprint describes store d.
func (t *Topology) storeFingerprint(d *storeDef) upgrade.Store {
	s := upgrade.Store{
		Name: d.name, Kind: upgrade.KeyValue, Timestamped: d.timestamped, Persistent: d.persistent, Global: d.global,
		KeySerde: d.keyID, ValueSerde: d.valueID, Window: d.window, Subtopology: t.subOf(d.users[0]),
	}
	if s.KeySerde == "" {
		s.KeySerde = serdeID(d.key)
	}
	if s.ValueSerde == "" {
		s.ValueSerde = serdeID(d.value)
	}
	switch {
	case d.sourceTopic != "":
		s.Changelog, s.ChangelogIsSource = d.sourceTopic, true
	case d.logged:
		s.Changelog = d.name + "-changelog"
	}
	codec := d.codec
	if j, ok := codec.(joinChangelogCodec); ok {
		codec = j.ChangelogCodec
	}
	switch c := codec.(type) {
	case windowOptioned:
		o := c.WindowOptions()
		s.Kind, s.WindowSizeMs, s.RetentionMs, s.RetainDuplicates = upgrade.Window, o.WindowSize.Milliseconds(), o.Retention.Milliseconds(), o.RetainDuplicates
	case sessionOptioned:
		s.Kind, s.RetentionMs = upgrade.Session, c.SessionOptions().Retention.Milliseconds()
	}
	if d.versioned {
		s.Kind, s.HistoryRetentionMs = upgrade.Versioned, d.historyRetention.Milliseconds()
	}
	seen := map[string]bool{}
	for _, u := range d.users {
		if !seen[u.name] {
			seen[u.name] = true
			s.Operators = append(s.Operators, u.name)
		}
	}
	return s
}
