package runtime

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/kstream-go/kstream/store"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Local state must come from the changelog it is restored from. It does not when:
//
//   - its checkpoint lies beyond the changelog's end offset: the changelog was deleted and
//     recreated (an application reset deletes the internal topics) or truncated;
//   - the changelog's topic id differs from the one recorded when the state was built: the
//     changelog was deleted and recreated, and may since have grown past the checkpoint;
//   - the state directory belongs to another application id (statedir.go).
//
// Restoring such state from its checkpoint would keep keys the changelog no longer has and
// go on counting from them: silently wrong output. The store partition is wiped instead,
// with a warning that says why, and restored from the start of the changelog.

// TopicIDSuffix ends the names of the namespaces that record the topic id of the changelog
// (or, for a global store, of the topic) a store partition was built from: the namespace
// (name+TopicIDSuffix, partition) holds one key, topicIDKey. Like [GlobalOffsetsSuffix], it
// contains '#', which no Kafka topic name can; the builder rejects store names that would
// collide.
const TopicIDSuffix = "#topic-id"

var topicIDKey = []byte("topic-id")

// errTopicMissing marks a topic that does not exist: fatal at once, never retried. Errors
// of [topicMissing] match it.
var errTopicMissing = errors.New("topic does not exist")

// topicMissingError is a missing topic, with a message that names it and what needs it.
type topicMissingError struct{ msg string }

func (e *topicMissingError) Error() string        { return e.msg }
func (e *topicMissingError) Is(target error) bool { return target == errTopicMissing }

// topicMissing returns a [topicMissingError] with the formatted message.
func topicMissing(format string, args ...any) error {
	return &topicMissingError{msg: fmt.Sprintf(format, args...)}
}

// asMissing returns the topicMissingError in err's chain, if any, else err: the retry's
// wrapping adds nothing to a message that names the topic.
func asMissing(err error) error {
	var m *topicMissingError
	if errors.As(err, &m) {
		return m
	}
	return err
}

// topicOffsets is what the cluster says about one partition of a topic.
type topicOffsets struct {
	id  kadm.TopicID // zero if the broker does not report topic ids
	lso int64        // last stable offset: the end of a read_committed restore
	hwm int64        // high watermark; -1 if not read
	// start is the log start offset: offsets before it were deleted (retention of a
	// windowed store's compact,delete changelog, or of a table's source topic).
	start int64
}

// readTopicOffsets reads the topic id and the last stable offset of topic's partition p,
// and its high watermark too if the last stable offset is below atLeast. It
// retries while the cluster is unreachable or the partition has no leader; a missing topic
// or a missing permission fails at once.
func (r *Runtime) readTopicOffsets(ctx context.Context, topic string, p int32, atLeast int64, what string) (topicOffsets, error) {
	var out topicOffsets
	err := r.retry(ctx, fmt.Sprintf("reading the end offset of %s (topic %q partition %d)", what, topic, p), func(ctx context.Context) error {
		out = topicOffsets{hwm: -1}
		details, err := r.admin.ListTopics(ctx, topic)
		if err != nil {
			return fmt.Errorf("reading metadata of topic %q: %w", topic, err)
		}
		d, ok := details[topic]
		if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			return topicMissing("kstream: %s, topic %q, does not exist", what, topic)
		}
		if d.Err != nil {
			return fmt.Errorf("reading metadata of topic %q: %w", topic, d.Err)
		}
		if _, ok := d.Partitions[p]; !ok {
			return fmt.Errorf("topic %q has no partition %d (it has %d)", topic, p, len(d.Partitions))
		}
		out.id = d.ID
		lso, err := listOffset(ctx, r.admin.ListCommittedOffsets, topic, p, "last stable")
		if err != nil {
			return err
		}
		out.lso = lso
		if out.start, err = listOffset(ctx, r.admin.ListStartOffsets, topic, p, "start"); err != nil {
			return err
		}
		if lso < atLeast {
			if out.hwm, err = listOffset(ctx, r.admin.ListEndOffsets, topic, p, "end"); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// listOffset lists one offset of topic's partition p, returning the partition's error.
func listOffset(ctx context.Context, list func(context.Context, ...string) (kadm.ListedOffsets, error), topic string, p int32, what string) (int64, error) {
	los, err := list(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("listing the %s offsets of topic %q: %w", what, topic, err)
	}
	o, ok := los.Lookup(topic, p)
	if !ok {
		return 0, fmt.Errorf("listing the %s offset of topic %q partition %d: %w", what, topic, p, kerr.UnknownTopicOrPartition)
	}
	if o.Err != nil {
		return 0, fmt.Errorf("listing the %s offset of topic %q partition %d: %w", what, topic, p, o.Err)
	}
	return o.Offset, nil
}

// recordedTopicID returns the topic id recorded for the store partition (name, p), and
// the backend that holds it.
func recordedTopicID(db store.DB, name string, p int32) (store.Backend, kadm.TopicID, bool, error) {
	b, err := db.Open(name+TopicIDSuffix, p)
	if err != nil {
		return nil, kadm.TopicID{}, false, fmt.Errorf("kstream: opening the topic id record of store %s partition %d: %w", name, p, err)
	}
	v, ok, err := b.Get(topicIDKey)
	if err != nil {
		return nil, kadm.TopicID{}, false, fmt.Errorf("kstream: reading the topic id record of store %s partition %d: %w", name, p, err)
	}
	var id kadm.TopicID
	if !ok || len(v) != len(id) {
		return b, id, false, nil
	}
	copy(id[:], v)
	return b, id, true, nil
}

// localCheck is the outcome of checkLocal.
type localCheck struct {
	from int64 // the checkpoint to restore from; NoCheckpoint after a wipe
	end  int64 // where restoration ends (see checkLocal)
	// start is the changelog's log start offset: restoration begins at it when the
	// checkpoint is older (the records in between were deleted by retention).
	start int64
}

// checkLocal compares the local state of the store partition (spec, p), whose backend is
// raw, with its changelog, wipes it when it cannot have been built from that changelog (see
// the top of this file), and records the changelog's topic id. role is "active" or
// "standby", for the log.
func (r *Runtime) checkLocal(ctx context.Context, db store.DB, spec StoreSpec, p int32, raw store.Backend, role string) (localCheck, error) {
	topic := spec.Changelog
	cp, err := raw.Checkpoint()
	if err != nil {
		return localCheck{}, fmt.Errorf("kstream: reading the checkpoint of store %s partition %d: %w", spec.Name, p, err)
	}
	what := "the changelog of store " + spec.Name
	if spec.SourceTopic {
		what = "the source topic of table store " + spec.Name
	}
	atLeast := cp
	if !spec.SourceTopic {
		atLeast = math.MaxInt64 // the high watermark is the end of a changelog's restore
	}
	offs, err := r.readTopicOffsets(ctx, topic, p, atLeast, what)
	if err != nil {
		return localCheck{}, asMissing(err)
	}
	idb, recorded, haveID, err := recordedTopicID(db, spec.Name, p)
	if err != nil {
		return localCheck{}, err
	}
	var zero kadm.TopicID
	reason := ""
	switch {
	case cp != store.NoCheckpoint && offs.hwm >= 0 && cp > offs.hwm:
		reason = fmt.Sprintf("the checkpoint %d is beyond the end offset %d of topic %q partition %d: the topic was deleted and recreated, or truncated (an application reset deletes the internal topics)", cp, offs.hwm, topic, p)
	case haveID && offs.id != zero && recorded != offs.id:
		reason = fmt.Sprintf("topic %q was deleted and recreated: its topic id is %s, the local state was built from topic id %s", topic, offs.id, recorded)
	}
	if reason != "" {
		r.log.Warn("kstream: local state does not match its changelog; wiping it and restoring from the changelog",
			"app", r.cfg.ApplicationID, "store", spec.Name, "partition", p, "task_role", role, "reason", reason)
		if err := db.Drop(spec.Name, p); err != nil {
			return localCheck{}, fmt.Errorf("kstream: wiping store %s partition %d (%s): %w", spec.Name, p, reason, err)
		}
		cp = store.NoCheckpoint
	}
	if offs.id != zero && (!haveID || recorded != offs.id) {
		if err := idb.Set(topicIDKey, offs.id[:]); err != nil {
			return localCheck{}, fmt.Errorf("kstream: recording the topic id of %q for store %s partition %d: %w", topic, spec.Name, p, err)
		}
	}
	// A changelog is written by this task's owner alone, so its last stable offset lies below
	// its high watermark only while a previous owner's transaction is open (an instance that
	// crashed or lost the task mid-transaction; it ends within that owner's transaction
	// timeout). Records committed after that transaction, by the owner after it, cannot be
	// read before it ends, but they are part of the state: the input offsets committed with
	// them say so. Restoring only to the last stable offset would lose them, so restoration
	// goes on to the high watermark, waiting for the open transaction to end. A table's
	// source topic may have other writers: it is restored to its last stable offset.
	end := offs.lso
	if !spec.SourceTopic && offs.hwm > end {
		end = offs.hwm
	}
	if spec.SourceTopic && role == "active" {
		// An active task restores its table only up to the application's committed offset
		// of the source partition (0 without one), as Kafka Streams does for a source
		// topic used as a changelog: it then processes the records after it itself, each
		// with the row it replaces as its old value. Restoring further would make a
		// replayed update look like a no-op (old = new) to the operators below that read
		// old values (a foreign-key join unsubscribing from the old key, a table regrouping).
		committed, err := r.committedOffset(ctx, topic, p)
		if err != nil {
			return localCheck{}, err
		}
		end = min(end, committed)
	}
	return localCheck{from: cp, end: end, start: offs.start}, nil
}

// committedOffset is the application's committed offset of input partition topic/p, or 0
// if it has none. A pending transactional commit is waited for (RequireStable).
func (r *Runtime) committedOffset(ctx context.Context, topic string, p int32) (int64, error) {
	var committed int64
	err := r.retry(ctx, fmt.Sprintf("reading the committed offset of topic %q partition %d", topic, p), func(ctx context.Context) error {
		offs, err := r.admin.FetchOffsets(kadm.RequireStable(ctx), r.cfg.ApplicationID)
		if err != nil {
			return fmt.Errorf("kstream: reading the committed offset of topic %q partition %d: %w", topic, p, err)
		}
		committed = 0
		if o, ok := offs.Lookup(topic, p); ok {
			if o.Err != nil {
				return fmt.Errorf("kstream: reading the committed offset of topic %q partition %d: %w", topic, p, o.Err)
			}
			committed = max(o.At, 0)
		}
		return nil
	})
	return committed, err
}
