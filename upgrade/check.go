package upgrade

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Verdict is what an upgrade from one topology to another needs, from the least to the most
// disruptive.
type Verdict int

const (
	// RollingUpgrade: restart the instances one at a time on the new version; old and new
	// run side by side meanwhile, and every store keeps its state.
	RollingUpgrade Verdict = iota
	// StopAll: stores and offsets stay valid, but old and new instances must not run side
	// by side (their task ids differ): stop every instance of the old version, then start
	// the new one. No reset.
	StopAll
	// Reset: some state or internal topic of the old version does not fit the new one.
	// Stop every instance and reset the application (kstream reset, or Kafka's
	// StreamsResetter, with its local state), so that it recomputes its state from its
	// inputs; or deploy the new version under a new application id.
	Reset
	// NewApplicationID: the new version runs under another application id, so it shares no
	// state, offsets or internal topics with the old one.
	NewApplicationID
)

// String returns the verdict's name as the CLI prints it: "rolling-upgrade", "stop-all",
// "reset" or "new-application-id".
func (v Verdict) String() string {
	switch v {
	case RollingUpgrade:
		return "rolling-upgrade"
	case StopAll:
		return "stop-all"
	case Reset:
		return "reset"
	case NewApplicationID:
		return "new-application-id"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// Advice says what to do for the verdict, in one sentence.
func (v Verdict) Advice() string {
	switch v {
	case RollingUpgrade:
		return "safe for a rolling upgrade: restart the instances one at a time on the new version"
	case StopAll:
		return "stop every instance of the old version, then start the new one; state and offsets are kept, no reset is needed"
	case Reset:
		return "the old state does not fit the new topology: stop every instance and reset the application (kstream reset, with its local state), or deploy the new version under a new application id"
	case NewApplicationID:
		return "the new version is a new application: it starts with no state and reads its inputs from its offset reset policy"
	}
	return v.String()
}

// Finding is one difference between two topologies and what it needs.
type Finding struct {
	Verdict Verdict `json:"verdict"`
	// Subject is what changed: `store "counts"`, `internal topic "x-repartition"`,
	// `source topic "orders"`, `sub-topology 1`, `application id`.
	Subject string `json:"subject"`
	// Reason says what changed and why that needs Verdict.
	Reason string `json:"reason"`
}

// String is "<verdict>: <subject>: <reason>".
func (f Finding) String() string { return f.Verdict.String() + ": " + f.Subject + ": " + f.Reason }

// Report is the result of [Check].
type Report struct {
	// Verdict is the most disruptive verdict of the findings (RollingUpgrade without any).
	Verdict Verdict `json:"verdict"`
	// Findings are the differences found, the most disruptive first, each with its reason;
	// findings that need nothing (RollingUpgrade) say what an operator should know.
	Findings []Finding `json:"findings"`
}

// String returns the verdict, its advice and the findings, one a line.
func (r Report) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "verdict: %s (%s)\n", r.Verdict, r.Verdict.Advice())
	for _, f := range r.Findings {
		fmt.Fprintf(&sb, "  %s\n", f)
	}
	return sb.String()
}

// Check compares the fingerprint of the running topology (old) with that of the new one and
// says what deploying the new one over the old one's state needs, with one finding per
// difference. The rules are documented in docs/operations-guide.md ("Upgrading a
// topology").
func Check(old, new Fingerprint) Report {
	c := &checker{old: old, new: new}
	c.applicationID()
	c.stores()
	c.internalTopics()
	c.userTopics()
	c.subtopologies()
	slices.SortStableFunc(c.findings, func(a, b Finding) int { return int(b.Verdict) - int(a.Verdict) })
	r := Report{Findings: c.findings}
	for _, f := range c.findings {
		r.Verdict = max(r.Verdict, f.Verdict)
	}
	return r
}

type checker struct {
	old, new Fingerprint
	findings []Finding
}

func (c *checker) add(v Verdict, subject, format string, args ...any) {
	c.findings = append(c.findings, Finding{Verdict: v, Subject: subject, Reason: fmt.Sprintf(format, args...)})
}

func (c *checker) applicationID() {
	o, n := c.old.ApplicationID, c.new.ApplicationID
	if o != "" && n != "" && o != n {
		c.add(NewApplicationID, "application id", "changed from %q to %q: the new version uses none of the old one's state, committed offsets or internal topics", o, n)
	}
}

func storeSubject(name string) string { return fmt.Sprintf("store %q", name) }

// generatedNumber matches the number in a name Kafka Streams generates
// ("KSTREAM-AGGREGATE-STATE-STORE-0000000003", "KSTREAM-JOINTHIS-0000000004-store").
var generatedNumber = regexp.MustCompile(`-[0-9]{10}(-|$)`)

// generatedBase is name with its generated number blanked, or "" if name is not generated.
func generatedBase(name string) string {
	if !generatedNumber.MatchString(name) {
		return ""
	}
	return generatedNumber.ReplaceAllString(name, "-#$1")
}

func (c *checker) stores() {
	oldBy := map[string]Store{}
	for _, s := range c.old.Stores {
		oldBy[s.Name] = s
	}
	newBy := map[string]Store{}
	for _, s := range c.new.Stores {
		newBy[s.Name] = s
	}
	var removed, added []Store
	for _, o := range c.old.Stores {
		if n, ok := newBy[o.Name]; ok {
			c.compareStore(o, n)
		} else {
			removed = append(removed, o)
		}
	}
	for _, n := range c.new.Stores {
		if _, ok := oldBy[n.Name]; !ok {
			added = append(added, n)
		}
	}
	paired := map[string]bool{}
	// A removed store and an added one are the same store when both have generated names
	// that differ by their number only (operators added or removed before the store
	// shifted it).
	for _, o := range removed {
		base := generatedBase(o.Name)
		if paired[o.Name] || base == "" {
			continue
		}
		for _, n := range added {
			if paired[n.Name] || generatedBase(n.Name) != base || n.Kind != o.Kind {
				continue
			}
			paired[o.Name], paired[n.Name] = true, true
			c.add(Reset, storeSubject(o.Name), "is now %q: its generated name changed because operators were added or removed before it, so it starts empty with a new changelog (%s) and its state is abandoned; name it %q explicitly (Materialized, or the operator's store-name option) to keep its state, or reset",
				n.Name, changelogOrNone(n), o.Name)
			break
		}
	}
	// Else a removed store and an added one are the same store renamed when the operator
	// that made them has the same name.
	for _, o := range removed {
		for _, n := range added {
			if paired[o.Name] || paired[n.Name] || len(o.Operators) == 0 || len(n.Operators) == 0 || o.Operators[0] != n.Operators[0] {
				continue
			}
			paired[o.Name], paired[n.Name] = true, true
			c.add(Reset, storeSubject(o.Name), "renamed to %q (operator %s): the new store starts empty, with a new changelog, while the input offsets are past the records that built the old one; keep the old name to keep its state, or reset",
				n.Name, n.Operators[0])
			break
		}
	}
	// Else a removed store and an added one of the same shape (kind, serdes, windows) fed
	// by the same source topics, one of each: a store renamed, or given a name where it had
	// a generated one.
	for _, o := range removed {
		if paired[o.Name] {
			continue
		}
		var match []Store
		for _, n := range added {
			if !paired[n.Name] && c.shape(c.old, o) == c.shape(c.new, n) {
				match = append(match, n)
			}
		}
		if len(match) != 1 {
			continue
		}
		n := match[0]
		paired[o.Name], paired[n.Name] = true, true
		c.add(Reset, storeSubject(o.Name), "is gone and %q, of the same kind, serdes and inputs, is new: a renamed store starts empty, with a new changelog (%s), while the input offsets are past the records that built the old one; keep the old name to keep its state, or reset",
			n.Name, changelogOrNone(n))
	}
	for _, o := range removed {
		if paired[o.Name] {
			continue
		}
		what := "its local data is left behind"
		if o.Changelog != "" && !o.ChangelogIsSource {
			what = fmt.Sprintf("its changelog %q and local data are left behind (delete the topic once no rollback to the old version is needed)", o.Changelog)
		}
		c.add(RollingUpgrade, storeSubject(o.Name), "removed: %s", what)
	}
	for _, n := range added {
		if paired[n.Name] {
			continue
		}
		c.add(RollingUpgrade, storeSubject(n.Name), "new (%s, operator %s): it starts empty and sees the records that arrive from now on, none from before", n.Kind, strings.Join(n.Operators, ", "))
	}
}

// shape is what a renamed store keeps: kind, serdes, windows and the user topics of its
// sub-topology.
func (c *checker) shape(f Fingerprint, s Store) string {
	var sources []string
	if s.Subtopology >= 0 && s.Subtopology < len(f.Subtopologies) {
		for _, t := range f.Subtopologies[s.Subtopology].SourceTopics {
			if slices.Contains(f.SourceTopics, t) {
				sources = append(sources, t)
			}
		}
	}
	w := ""
	if s.Window != nil {
		w = fmt.Sprintf("%+v", *s.Window)
	}
	return fmt.Sprintf("%s|%t|%s|%s|%s|%d|%d|%t|%s", s.Kind, s.Timestamped, s.KeySerde, s.ValueSerde, w, s.WindowSizeMs, s.RetentionMs, s.Global, strings.Join(sources, ","))
}

func changelogOrNone(s Store) string {
	if s.Changelog == "" {
		return "none"
	}
	return fmt.Sprintf("%q", s.Changelog)
}

func (c *checker) compareStore(o, n Store) {
	subj := storeSubject(o.Name)
	resets := 0
	reset := func(format string, args ...any) {
		resets++
		c.add(Reset, subj, format, args...)
	}
	// A changed kind or value format makes every other layout difference moot.
	if o.Kind != n.Kind {
		reset("kind changed from %s to %s: the data in its changelog and local state has the old kind's layout", o.Kind, n.Kind)
		return
	}
	if o.Timestamped != n.Timestamped {
		reset("changed from %s to %s values: the stored values have the old format", timestamped(o.Timestamped), timestamped(n.Timestamped))
		return
	}
	if o.Global != n.Global {
		reset("changed from %s to %s", globalText(o.Global), globalText(n.Global))
	}
	for _, s := range []struct{ what, o, n string }{{"key", o.KeySerde, n.KeySerde}, {"value", o.ValueSerde, n.ValueSerde}} {
		if s.o == s.n {
			continue
		}
		extra := ""
		if s.what == "key" {
			extra = ", and keys may hash to other partitions"
		}
		if o.ChangelogIsSource {
			extra += fmt.Sprintf("; the new serde must also read the records already in topic %q", o.Changelog)
		}
		reset("%s serde changed from %s to %s: the %ss in its changelog and local state were written by the old one and may not decode%s",
			s.what, serdeText(s.o), serdeText(s.n), s.what, extra)
	}
	c.compareWindows(subj, o, n, reset)
	if o.RetainDuplicates != n.RetainDuplicates {
		reset("retain-duplicates changed from %t to %t: the stored keys have the old layout", o.RetainDuplicates, n.RetainDuplicates)
	}
	if o.HistoryRetentionMs != n.HistoryRetentionMs {
		reset("history retention changed from %dms to %dms: the versioned store's segments depend on it", o.HistoryRetentionMs, n.HistoryRetentionMs)
	}
	switch {
	case o.Changelog == n.Changelog:
	case o.Changelog != "" && n.Changelog != "":
		reset("changelog changed from %q to %q: the new one does not hold the store's state", o.Changelog, n.Changelog)
	case o.Changelog == "":
		reset("gets a changelog (%q): it starts empty while the local state holds data, so a task that moves to another instance restores only what was written since", n.Changelog)
	default:
		c.add(RollingUpgrade, subj, "no longer has a changelog: %q is left behind, and a task that moves to another instance starts this store empty", o.Changelog)
	}
	if o.Persistent != n.Persistent {
		switch {
		case n.Changelog != "":
			c.add(RollingUpgrade, subj, "changed from %s to %s: it is restored from its changelog %q", storage(o.Persistent), storage(n.Persistent), n.Changelog)
		case o.Persistent:
			reset("changed from persistent to in-memory without a changelog: the data on disk is not read and nothing restores it")
		default:
			c.add(RollingUpgrade, subj, "changed from in-memory to persistent (no changelog): it starts empty, as an in-memory store does after a restart")
		}
	}
	if !o.Global && !n.Global && o.Subtopology != n.Subtopology && resets == 0 {
		c.add(StopAll, subj, "its tasks were %d_<partition> and are %d_<partition> now (sub-topologies renumbered): an old and a new instance would assign tasks to each other under different ids; stop every old instance before starting the new version (local state is kept by store name and partition)",
			o.Subtopology, n.Subtopology)
	}
}

// compareWindows reports the window changes of a store.
func (c *checker) compareWindows(subj string, o, n Store, resetStore func(string, ...any)) {
	ow, nw := o.Window, n.Window
	resets := 0
	reset := func(format string, args ...any) {
		resets++
		resetStore(format, args...)
	}
	switch {
	case ow != nil && nw != nil:
		switch {
		case ow.Type != nw.Type:
			reset("windows changed from %s to %s windows: the stored windows are the old ones", ow.Type, nw.Type)
		case ow.Type == "join" && (ow.BeforeMs != nw.BeforeMs || ow.AfterMs != nw.AfterMs):
			reset("join window changed from before %dms, after %dms to before %dms, after %dms: the join's window store has another window size and retention", ow.BeforeMs, ow.AfterMs, nw.BeforeMs, nw.AfterMs)
		case ow.SizeMs != nw.SizeMs:
			reset("%s changed from %dms to %dms: the stored windows (their starts and ends) belong to the old size", windowSizeText(ow.Type), ow.SizeMs, nw.SizeMs)
		case ow.AdvanceMs != nw.AdvanceMs:
			reset("window advance changed from %dms to %dms: the stored windows start at multiples of the old advance", ow.AdvanceMs, nw.AdvanceMs)
		}
		if ow.GraceMs != nw.GraceMs && o.RetentionMs == n.RetentionMs {
			c.add(RollingUpgrade, subj, "grace period changed from %dms to %dms (retention unchanged): the state is kept; records arriving between the two graces are treated by the new one", ow.GraceMs, nw.GraceMs)
		}
	case ow != nil || nw != nil:
		reset("changed from %s to %s: the stored data has the old layout", windowText(ow), windowText(nw))
	}
	if resets > 0 {
		return // the store's size and retention follow from its windows
	}
	if o.WindowSizeMs != n.WindowSizeMs {
		reset("window size changed from %dms to %dms: the stored windows belong to the old size", o.WindowSizeMs, n.WindowSizeMs)
	}
	if o.RetentionMs != n.RetentionMs {
		why := ""
		if ow != nil && nw != nil && ow.GraceMs != nw.GraceMs {
			why = fmt.Sprintf(" (the grace period changed from %dms to %dms)", ow.GraceMs, nw.GraceMs)
		}
		reset("retention changed from %dms to %dms%s: the store's segments and the expiry of what it holds depend on it", o.RetentionMs, n.RetentionMs, why)
	}
}

func windowSizeText(typ string) string {
	switch typ {
	case "session":
		return "session inactivity gap"
	case "sliding":
		return "sliding windows' time difference"
	}
	return "window size"
}

func windowText(w *WindowDef) string {
	if w == nil {
		return "no windows"
	}
	return w.Type + " windows"
}

func timestamped(b bool) string {
	if b {
		return "timestamped"
	}
	return "plain"
}

func globalText(b bool) string {
	if b {
		return "a global store"
	}
	return "a store of tasks"
}

func storage(persistent bool) string {
	if persistent {
		return "persistent"
	}
	return "in-memory"
}

func serdeText(s string) string {
	if s == "" {
		return "none (bytes)"
	}
	return s
}

func (c *checker) internalTopics() {
	newBy := map[string]InternalTopic{}
	for _, t := range c.new.InternalTopics {
		newBy[t.Name] = t
	}
	oldBy := map[string]InternalTopic{}
	newStores := map[string]bool{}
	for _, s := range c.new.Stores {
		newStores[s.Name] = true
	}
	for _, o := range c.old.InternalTopics {
		oldBy[o.Name] = o
		subj := fmt.Sprintf("internal topic %q", o.Name)
		n, ok := newBy[o.Name]
		if !ok {
			// Records the old version wrote to it and did not read yet are lost. That
			// matters when state downstream of it survives the upgrade.
			var kept []string
			for _, s := range c.old.Stores {
				if s.Subtopology == o.Reader && newStores[s.Name] {
					kept = append(kept, s.Name)
				}
			}
			if len(kept) > 0 {
				c.add(Reset, subj, "removed: the new version does not read it, so the records the old one wrote to it and did not read yet are lost to the stores it fed (%s), which are kept; reset, or accept that loss", strings.Join(kept, ", "))
			} else {
				c.add(RollingUpgrade, subj, "removed: no longer used (delete it once no rollback to the old version is needed)")
			}
			continue
		}
		if o.Partitions != n.Partitions {
			c.add(Reset, subj, "partition count changed from %s to %s: the topic exists with the old count (the application refuses to start on it), and the state downstream is partitioned by it",
				partitionsText(o), partitionsText(n))
		}
		for _, s := range []struct{ what, o, n string }{{"key", o.KeySerde, n.KeySerde}, {"value", o.ValueSerde, n.ValueSerde}} {
			if s.o != s.n {
				c.add(Reset, subj, "%s serde changed from %s to %s: the records already in it were written by the old one and may not decode", s.what, serdeText(s.o), serdeText(s.n))
			}
		}
	}
	for _, n := range c.new.InternalTopics {
		if _, ok := oldBy[n.Name]; !ok {
			c.add(RollingUpgrade, fmt.Sprintf("internal topic %q", n.Name), "new: created at start")
		}
	}
}

func partitionsText(t InternalTopic) string {
	if t.Partitions > 0 {
		return fmt.Sprint(t.Partitions)
	}
	return "that of its input"
}

func (c *checker) userTopics() {
	for _, t := range minus(c.new.SourceTopics, c.old.SourceTopics) {
		c.add(RollingUpgrade, fmt.Sprintf("source topic %q", t), "new: read from the group's committed offsets if any, else from the source's offset reset policy; while old instances run, its partitions may sit with one that ignores them")
	}
	for _, t := range minus(c.old.SourceTopics, c.new.SourceTopics) {
		c.add(RollingUpgrade, fmt.Sprintf("source topic %q", t), "no longer read (the group's committed offsets for it remain)")
	}
	for _, t := range minus(c.new.SinkTopics, c.old.SinkTopics) {
		c.add(RollingUpgrade, fmt.Sprintf("sink topic %q", t), "new: written from now on")
	}
	for _, t := range minus(c.old.SinkTopics, c.new.SinkTopics) {
		c.add(RollingUpgrade, fmt.Sprintf("sink topic %q", t), "no longer written")
	}
}

// subtopologies reports stateless sub-topologies that moved and operators added or removed
// (stateful moves are reported with their stores).
func (c *checker) subtopologies() {
	key := func(s Subtopology) string { return strings.Join(s.SourceTopics, ",") }
	newBy := map[string]Subtopology{}
	for _, s := range c.new.Subtopologies {
		newBy[key(s)] = s
	}
	for _, o := range c.old.Subtopologies {
		n, ok := newBy[key(o)]
		if !ok || o.Global != n.Global {
			continue
		}
		subj := fmt.Sprintf("sub-topology %d", o.ID)
		if o.ID != n.ID {
			subj = fmt.Sprintf("sub-topology %d (%d now)", o.ID, n.ID)
			if len(o.Stores) == 0 && len(n.Stores) == 0 && !o.Global {
				c.add(RollingUpgrade, subj, "renumbered (sources %s); it has no state, and tasks are assigned by their source partitions, so that is harmless", strings.Join(o.SourceTopics, ", "))
			}
		}
		added, removed := minus(n.Nodes, o.Nodes), minus(o.Nodes, n.Nodes)
		if len(added)+len(removed) == 0 {
			continue
		}
		var parts []string
		if len(added) > 0 {
			parts = append(parts, "operators added: "+strings.Join(added, ", "))
		}
		if len(removed) > 0 {
			parts = append(parts, "operators removed: "+strings.Join(removed, ", "))
		}
		c.add(RollingUpgrade, subj, "%s", strings.Join(parts, "; "))
	}
}

// minus returns the elements of a not in b, in a's order.
func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}
