// Package upgrade tells whether a changed kstream topology can be rolled out over the state
// of the running one: a rolling upgrade, a stop of every instance first, a reset of the
// application, or a new application id.
//
// A topology's [Fingerprint] holds what decides that: its sub-topologies, its stores (name,
// kind, serdes, windows, retention, changelog), its internal topics (repartition and
// foreign-key join topics, with their partition counts and serdes), and its source and sink
// topics. Save the running version's fingerprint (kstream.Topology.Fingerprint, written with
// [Fingerprint.Write]) next to its release, and compare it with the new version's by
// [Check] or "kstream upgrade-check old.json new.json" in CI. The rules are those of Kafka
// Streams' upgrade guidance; docs/operations-guide.md ("Upgrading a topology") lists them.
//
// The package has no dependency on the rest of kstream, so that tools reading fingerprint
// files need not link the runtime.
package upgrade

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// FormatVersion is the version of the fingerprint's JSON format that this package writes
// and reads.
const FormatVersion = 1

// Fingerprint is what decides whether a topology's state and internal topics fit another
// topology's. Create one with kstream's Topology.Fingerprint; it is plain data that
// round-trips through JSON.
type Fingerprint struct {
	// Format is [FormatVersion].
	Format int `json:"format"`
	// ApplicationID is the application id the topology runs under, if known: Topology
	// does not know it (it is in kstream.Config); set it before writing the file so that
	// Check notices a changed id.
	ApplicationID string `json:"application_id,omitempty"`
	// Subtopologies are in their numbering order; their tasks are "<ID>_<partition>".
	Subtopologies []Subtopology `json:"subtopologies"`
	// Stores are sorted by name.
	Stores []Store `json:"stores"`
	// InternalTopics are the repartition and foreign-key join topics, by their names
	// without the "<application.id>-" prefix, sorted. Changelog topics are with their
	// stores.
	InternalTopics []InternalTopic `json:"internal_topics"`
	// SourceTopics and SinkTopics are the user topics read and written (a sink choosing its
	// topic per record is not listed), sorted. A global table's topic is a source topic.
	SourceTopics []string `json:"source_topics"`
	SinkTopics   []string `json:"sink_topics"`
	// Describe is the topology's Describe text, for people (Check does not read it).
	Describe string `json:"describe,omitempty"`
}

// Subtopology is one sub-topology of a [Fingerprint].
type Subtopology struct {
	ID int `json:"id"`
	// Global marks a global table's sub-topology, which has no tasks.
	Global bool `json:"global,omitempty"`
	// SourceTopics are the topics its sources read (internal topics by short name), sorted.
	SourceTopics []string `json:"source_topics"`
	// Stores are the names of its stores, sorted.
	Stores []string `json:"stores,omitempty"`
	// Nodes are the names of its operators, in the order the topology was built.
	Nodes []string `json:"nodes"`
}

// StoreKind is the kind of a state store.
type StoreKind string

// The kinds of stores.
const (
	KeyValue  StoreKind = "key-value"
	Window    StoreKind = "window"
	Session   StoreKind = "session"
	Versioned StoreKind = "versioned"
)

// Store is one state store of a [Fingerprint].
type Store struct {
	Name string    `json:"name"`
	Kind StoreKind `json:"kind"`
	// Timestamped stores keep a timestamp with each value (the stores of tables and
	// windowed aggregations).
	Timestamped bool `json:"timestamped,omitempty"`
	// Persistent stores are kept on disk (Pebble); others in memory.
	Persistent bool `json:"persistent,omitempty"`
	// Changelog is the topic the store is restored from: "<name>-changelog" (without the
	// application id), the topic of a table read from a topic (ChangelogIsSource), or ""
	// for a store without a changelog.
	Changelog         string `json:"changelog,omitempty"`
	ChangelogIsSource bool   `json:"changelog_is_source,omitempty"`
	// Global marks a global table's store.
	Global bool `json:"global,omitempty"`
	// KeySerde and ValueSerde identify the serdes of the stored keys and values: their Go
	// types (which name the type of the data, as in "serde.jsonSerde[main.Order]"), or
	// the serde's own identity (kstream documents how a serde gives one). "" when the
	// store keeps bytes it does not decode.
	KeySerde   string `json:"key_serde,omitempty"`
	ValueSerde string `json:"value_serde,omitempty"`
	// Window is the window definition of a windowed aggregation's or a join's store.
	Window *WindowDef `json:"window,omitempty"`
	// WindowSizeMs and RetentionMs are a window or session store's (RetentionMs: how long
	// a window is kept after its start, or a session after its end).
	WindowSizeMs int64 `json:"window_size_ms,omitempty"`
	RetentionMs  int64 `json:"retention_ms,omitempty"`
	// RetainDuplicates marks a window store keeping every value of a key and window.
	RetainDuplicates bool `json:"retain_duplicates,omitempty"`
	// HistoryRetentionMs is a versioned store's history retention.
	HistoryRetentionMs int64 `json:"history_retention_ms,omitempty"`
	// Subtopology is the sub-topology whose tasks hold the store.
	Subtopology int `json:"subtopology"`
	// Operators are the names of the operators that use the store, in build order.
	Operators []string `json:"operators"`
}

// WindowDef is a window definition, in milliseconds.
type WindowDef struct {
	// Type is "time" (tumbling or hopping), "sliding", "session" or "join".
	Type string `json:"type"`
	// SizeMs is the window size (sliding: the time difference; session: the inactivity
	// gap; join: before plus after).
	SizeMs int64 `json:"size_ms"`
	// AdvanceMs is a time window's advance (its size for tumbling windows).
	AdvanceMs int64 `json:"advance_ms,omitempty"`
	// BeforeMs and AfterMs are a join window's.
	BeforeMs int64 `json:"before_ms,omitempty"`
	AfterMs  int64 `json:"after_ms,omitempty"`
	GraceMs  int64 `json:"grace_ms"`
}

// InternalTopic is a repartition or foreign-key join topic of a [Fingerprint].
type InternalTopic struct {
	// Name is the topic's name without the "<application.id>-" prefix.
	Name string `json:"name"`
	// Partitions is the partition count given to the topic (NumPartitions); 0 when it
	// takes the count of the topics in PartitionsOf, or of its writer's source topics.
	Partitions   int32    `json:"partitions,omitempty"`
	PartitionsOf []string `json:"partitions_of,omitempty"`
	// KeySerde and ValueSerde identify the serdes its records are written with, as
	// [Store.KeySerde]; "" when not known.
	KeySerde   string `json:"key_serde,omitempty"`
	ValueSerde string `json:"value_serde,omitempty"`
	// Writer and Reader are the sub-topologies writing and reading it (-1: none).
	Writer int `json:"writer"`
	Reader int `json:"reader"`
}

// Write writes f as indented JSON to w.
func (f Fingerprint) Write(w io.Writer) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("upgrade: encoding the fingerprint: %w", err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("upgrade: writing the fingerprint: %w", err)
	}
	return nil
}

// WriteFile writes f as indented JSON to the file named path.
func (f Fingerprint) WriteFile(path string) error {
	file, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("upgrade: %w", err)
	}
	err = f.Write(file)
	if cerr := file.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("upgrade: %w", cerr)
	}
	return err
}

// ErrFormat is wrapped by the errors of [Read] and [ReadFile] for input that is not a
// fingerprint this package can read.
var ErrFormat = errors.New("not a kstream topology fingerprint")

// Read reads a fingerprint written by [Fingerprint.Write].
func Read(r io.Reader) (Fingerprint, error) {
	var f Fingerprint
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return Fingerprint{}, fmt.Errorf("upgrade: %w: %w", ErrFormat, err)
	}
	if f.Format != FormatVersion {
		return Fingerprint{}, fmt.Errorf("upgrade: %w: format %d, this version reads format %d", ErrFormat, f.Format, FormatVersion)
	}
	return f, nil
}

// ReadFile reads the fingerprint in the file named path.
func ReadFile(path string) (Fingerprint, error) {
	file, err := os.Open(path)
	if err != nil {
		return Fingerprint{}, fmt.Errorf("upgrade: %w", err)
	}
	defer file.Close()
	f, err := Read(file)
	if err != nil {
		return Fingerprint{}, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}
