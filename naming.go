package kstream

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// generatedPart matches a name Kafka Streams (and kstream) generates, or one built on it:
// an upper-case kind and a 10-digit number from the builder's counter, such as
// "KSTREAM-AGGREGATE-STATE-STORE-0000000003" or
// "KSTREAM-JOINTHIS-0000000004-store".
var generatedPart = regexp.MustCompile(`(^|-)[A-Z][A-Z-]*-[0-9]{10}(-|$)`)

// isGeneratedName reports whether a store or topic name holds a generated name.
func isGeneratedName(name string) bool { return generatedPart.MatchString(name) }

// storeNamingHint is how to name the store name of operator, by the kind of generated
// name it has.
func storeNamingHint(name string) string {
	switch {
	case strings.Contains(name, "KSTREAM-JOINTHIS-"), strings.Contains(name, "KSTREAM-JOINOTHER-"),
		strings.Contains(name, "KSTREAM-OUTERTHIS-"), strings.Contains(name, "KSTREAM-OUTEROTHER-"),
		strings.Contains(name, "KSTREAM-OUTERSHARED-"):
		return "give the stream-stream join the option JoinStoreName(name) (Java's StreamJoined.withStoreName; Named names its operators, not its stores)"
	case strings.HasPrefix(name, "KTABLE-SUPPRESS-STATE-STORE-"):
		return "name the suppression with Suppressed.WithName(name)"
	case strings.HasPrefix(name, "KTABLE-FK-JOIN-"):
		return "give the foreign-key join the option Named(name) (its result store: Materialized(name, serde))"
	case strings.HasPrefix(name, "COGROUPKSTREAM-"):
		return "give the cogroup's Aggregate a store name"
	}
	return "give the operator a store name (its store name argument, or Materialized(name, serde))"
}

// checkExplicitNames is Config.EnsureExplicitInternalResourceNaming: it returns an error
// listing every store, changelog topic and internal topic of t whose name was generated,
// each with the operator it belongs to and how to name it; nil if there is none.
func (t *Topology) checkExplicitNames(b *Builder, appID string) error {
	var errs []error
	for _, d := range t.stores {
		if !isGeneratedName(d.name) {
			continue
		}
		var ops []string
		for _, u := range d.users {
			ops = append(ops, u.name)
		}
		hint := storeNamingHint(d.name)
		errs = append(errs, fmt.Errorf("state store %q of operator %s has a generated name: %s", d.name, strings.Join(ops, ", "), hint))
		if d.logged && d.sourceTopic == "" {
			errs = append(errs, fmt.Errorf("changelog topic %q of store %q (operator %s) has a generated name: %s", appID+"-"+d.name+"-changelog", d.name, ops[0], hint))
		}
	}
	for _, it := range t.internal {
		if !isGeneratedName(it.Name) {
			continue
		}
		var readers []string
		for _, n := range t.nodes {
			if n.kind == kindSource && n.internal && slices.Contains(n.topics, it.Name) {
				for _, c := range n.children {
					readers = append(readers, c.name)
				}
			}
		}
		// A ToTable's topic is named after the ToTable operator; a join's after the join if
		// it is named, else after the operator before it (Java's repartitionForJoin).
		kind, hint := "repartition topic", "give the operator that repartitions the option Named(name) (a join or ToTable), or name the operator before it with Named(name), or repartition the stream yourself before it with Repartition(name)"
		if op := b.internalOps[it.Name]; strings.HasPrefix(op, "ToTable") {
			hint = "give " + op + " the option Named(name), or repartition the stream yourself before it with Repartition(name)"
		} else if op != "" {
			hint = "give " + op + " the option Named(name), or name the operator before it with Named(name), or repartition the stream yourself before it with Repartition(name)"
		}
		if !strings.HasSuffix(it.Name, "-repartition") {
			kind, hint = "internal topic", "give the foreign-key join the option Named(name)"
		}
		errs = append(errs, fmt.Errorf("%s %q (read by operator %s) has a generated name: %s", kind, appID+"-"+it.Name, strings.Join(readers, ", "), hint))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("kstream: Config.EnsureExplicitInternalResourceNaming is set, and %d internal resource name(s) were generated; a generated name changes when the topology changes, which loses state on an upgrade:\n%w",
		len(errs), errors.Join(errs...))
}
