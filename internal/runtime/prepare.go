package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// prepare checks that the topics the topology reads and writes exist, creates the internal
// topics, and checks co-partitioning. Every error names the topic at fault.
func (r *Runtime) prepare(ctx context.Context) error {
	if err := r.resolvePatterns(ctx); err != nil {
		return err
	}
	internal := map[string]*InternalTopic{}
	for i := range r.topo.InternalTopics {
		it := &r.topo.InternalTopics[i]
		internal[it.Name] = it
	}
	var external []string
	seen := map[string]bool{}
	for _, st := range r.topo.SubTopologies {
		for _, src := range st.Sources {
			if internal[src.Topic] == nil && !seen[src.Topic] {
				seen[src.Topic] = true
				external = append(external, src.Topic)
			}
		}
	}
	for _, s := range r.topo.SinkTopics {
		if internal[s.Topic] == nil && !seen[s.Topic] {
			seen[s.Topic] = true
			external = append(external, s.Topic)
		}
	}
	for _, d := range r.cfg.DeadLetterTopics {
		if internal[d.Topic] == nil && !seen[d.Topic] {
			seen[d.Topic] = true
			external = append(external, d.Topic)
		}
	}
	counts := map[string]int32{}
	if len(external) > 0 {
		// While the cluster cannot be reached the instance waits; a missing topic or a
		// missing permission fails at once.
		err := r.retry(ctx, fmt.Sprintf("reading metadata of topics %v", external), func(ctx context.Context) error {
			details, err := r.admin.ListTopics(ctx, external...)
			if err != nil {
				return fmt.Errorf("kstream: reading metadata of topics %v: %w", external, err)
			}
			for _, t := range external {
				d, ok := details[t]
				if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
					return r.missingTopic(t)
				}
				if d.Err != nil {
					return fmt.Errorf("kstream: reading metadata of topic %q: %w", t, d.Err)
				}
				counts[t] = int32(len(d.Partitions))
			}
			return nil
		})
		if err != nil {
			return asMissing(err)
		}
	}

	// Resolve repartition partition counts: a topic with no explicit count gets the largest
	// count of its PartitionsOf topics, or else of its writer's sources. Writers may themselves read repartition topics, so iterate.
	for range len(r.topo.InternalTopics) + 1 {
		progress := false
		for i := range r.topo.InternalTopics {
			it := &r.topo.InternalTopics[i]
			if _, done := counts[it.Name]; done {
				continue
			}
			if it.Partitions > 0 {
				counts[it.Name] = it.Partitions
				progress = true
				continue
			}
			var n int32
			ready := true
			like := it.PartitionsOf
			if len(like) == 0 {
				for _, src := range r.topo.SubTopologies[it.Writer].Sources {
					like = append(like, src.Topic)
				}
			}
			for _, src := range like {
				c, ok := counts[src]
				if !ok {
					ready = false
					break
				}
				n = max(n, c)
			}
			if ready && n > 0 {
				counts[it.Name] = n
				progress = true
			}
		}
		if !progress {
			break
		}
	}
	for _, it := range r.topo.InternalTopics {
		if _, ok := counts[it.Name]; !ok {
			return fmt.Errorf("kstream: cannot infer the partition count of repartition topic %q; set it explicitly", it.Name)
		}
		if err := r.createInternal(ctx, it, counts[it.Name]); err != nil {
			return err
		}
	}

	r.src.Store(newSourceIndex(r.topo, counts))
	r.publishCounts()
	for _, group := range r.topo.CopartitionGroups {
		var want int32 = -1
		for _, t := range group {
			c := counts[t]
			if want < 0 {
				want = c
				continue
			}
			if c != want {
				var parts []string
				for _, t := range group {
					parts = append(parts, fmt.Sprintf("%s=%d", t, counts[t]))
				}
				return fmt.Errorf("kstream: topics %v must be co-partitioned (equal partition counts), but have %s", group, strings.Join(parts, ", "))
			}
		}
	}
	return nil
}

// missingTopic is the error for an external topic t that does not exist, naming what needs
// it. It is never retried.
func (r *Runtime) missingTopic(t string) error {
	for _, st := range r.topo.SubTopologies {
		for _, src := range st.Sources {
			if src.Topic == t {
				return topicMissing("kstream: source topic %q (sub-topology %d) does not exist", t, st.ID)
			}
		}
	}
	for _, s := range r.topo.SinkTopics {
		if s.Topic == t {
			return topicMissing("kstream: sink topic %q (operator %s) does not exist; create it before starting the application", t, s.Operator)
		}
	}
	for _, d := range r.cfg.DeadLetterTopics {
		if d.Topic == t {
			return topicMissing("kstream: dead-letter topic %q (%s) does not exist; create it before starting the application", t, d.Handler)
		}
	}
	return topicMissing("kstream: topic %q does not exist", t)
}

func (r *Runtime) createInternal(ctx context.Context, it InternalTopic, partitions int32) error {
	created := false
	err := r.retry(ctx, fmt.Sprintf("creating internal topic %q", it.Name), func(ctx context.Context) error {
		resp, err := r.admin.CreateTopic(ctx, partitions, r.cfg.ReplicationFactor, it.Configs, it.Name)
		if err == nil {
			err = resp.Err
		}
		switch {
		case err == nil:
			created = true
			return nil
		case errors.Is(err, kerr.TopicAlreadyExists):
			return nil
		case errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.ClusterAuthorizationFailed):
			return fmt.Errorf("kstream: creating internal topic %q: not authorized; the application's principal needs CREATE permission on it (or create it yourself with %d partitions): %w", it.Name, partitions, err)
		default:
			return fmt.Errorf("kstream: creating internal topic %q with %d partitions: %w", it.Name, partitions, err)
		}
	})
	if err != nil {
		return err
	}
	if created {
		r.log.Info("kstream: created internal topic", "topic", it.Name, "partitions", partitions)
	}
	return r.awaitTopic(ctx, it.Name, partitions)
}

// errNotReady is a topic that is not usable yet: not in the metadata, or a partition
// without a leader. It heals by waiting.
type errNotReady struct{ msg string }

func (e *errNotReady) Error() string { return e.msg }

// Unwrap makes it retriable.
func (e *errNotReady) Unwrap() error { return kerr.LeaderNotAvailable }

// awaitTopic waits until topic is in the metadata with all its partitions, each with a
// leader (a real cluster answers CreateTopics before every broker knows the topic, and
// lists partitions before they are led), and checks the count. It waits as long as the
// cluster needs (bounded by Config.GiveUpAfter). It asks the cluster each time (kadm's
// ListTopics may answer from a cache for a few seconds).
func (r *Runtime) awaitTopic(ctx context.Context, topic string, partitions int32) error {
	return r.retry(ctx, fmt.Sprintf("waiting for internal topic %q to have %d partitions, each with a leader", topic, partitions), func(ctx context.Context) error {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, r.producer)
		if err != nil {
			return fmt.Errorf("kstream: reading metadata of internal topic %q: %w", topic, err)
		}
		i := slices.IndexFunc(resp.Topics, func(t kmsg.MetadataResponseTopic) bool { return t.Topic != nil && *t.Topic == topic })
		if i < 0 {
			return &errNotReady{fmt.Sprintf("kstream: internal topic %q is not in the metadata yet", topic)}
		}
		d := resp.Topics[i]
		switch n, terr := len(d.Partitions), kerr.ErrorForCode(d.ErrorCode); {
		case errors.Is(terr, kerr.UnknownTopicOrPartition):
			return &errNotReady{fmt.Sprintf("kstream: internal topic %q is not in the metadata yet", topic)}
		case terr != nil:
			return fmt.Errorf("kstream: reading metadata of internal topic %q: %w", topic, terr)
		case n > 0 && n != int(partitions):
			return fmt.Errorf("kstream: internal topic %q exists with %d partitions, want %d", topic, n, partitions)
		case n == 0:
			return &errNotReady{fmt.Sprintf("kstream: internal topic %q has no partitions in the metadata yet", topic)}
		}
		for _, pd := range d.Partitions {
			// An offline follower (REPLICA_NOT_AVAILABLE, from older brokers) does not
			// keep a led partition from being used.
			if err := kerr.ErrorForCode(pd.ErrorCode); err != nil && (pd.Leader < 0 || !errors.Is(err, kerr.ReplicaNotAvailable)) {
				return fmt.Errorf("kstream: internal topic %q partition %d: %w", topic, pd.Partition, err)
			}
			if pd.Leader < 0 {
				return &errNotReady{fmt.Sprintf("kstream: internal topic %q partition %d has no leader yet", topic, pd.Partition)}
			}
		}
		return nil
	})
}

// slogAdapter sends franz-go's logs to slog, one level below ours so they stay quiet.
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Level() kgo.LogLevel {
	ctx := context.Background()
	switch {
	case a.l.Enabled(ctx, slog.LevelDebug-4):
		return kgo.LogLevelDebug
	case a.l.Enabled(ctx, slog.LevelDebug):
		return kgo.LogLevelInfo
	default:
		return kgo.LogLevelWarn
	}
}

func (a slogAdapter) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	var l slog.Level
	switch level {
	case kgo.LogLevelError:
		l = slog.LevelWarn // the runtime decides what is an error of the application
	case kgo.LogLevelWarn:
		l = slog.LevelInfo
	case kgo.LogLevelInfo:
		l = slog.LevelDebug
	default:
		l = slog.LevelDebug - 4
	}
	a.l.Log(context.Background(), l, "kgo: "+msg, keyvals...)
}
