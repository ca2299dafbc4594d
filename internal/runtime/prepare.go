package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// prepare checks that the topics the topology reads and writes exist, creates the internal
// topics, and checks co-partitioning. Every error names the topic at fault.
func (r *Runtime) prepare(ctx context.Context) error {
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
	counts := map[string]int32{}
	if len(external) > 0 {
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
	}

	// Resolve repartition partition counts: a topic with no explicit count gets the largest
	// source count of its writer. Writers may themselves read repartition topics, so iterate.
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
			for _, src := range r.topo.SubTopologies[it.Writer].Sources {
				c, ok := counts[src.Topic]
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

	r.counts = counts
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

func (r *Runtime) missingTopic(t string) error {
	for _, st := range r.topo.SubTopologies {
		for _, src := range st.Sources {
			if src.Topic == t {
				return fmt.Errorf("kstream: source topic %q (sub-topology %d) does not exist", t, st.ID)
			}
		}
	}
	for _, s := range r.topo.SinkTopics {
		if s.Topic == t {
			return fmt.Errorf("kstream: sink topic %q (operator %s) does not exist; create it before starting the application", t, s.Operator)
		}
	}
	return fmt.Errorf("kstream: topic %q does not exist", t)
}

func (r *Runtime) createInternal(ctx context.Context, it InternalTopic, partitions int32) error {
	resp, err := r.admin.CreateTopic(ctx, partitions, r.cfg.ReplicationFactor, it.Configs, it.Name)
	if err == nil {
		err = resp.Err
	}
	switch {
	case err == nil:
		r.log.Info("kstream: created internal topic", "topic", it.Name, "partitions", partitions)
		return r.awaitTopic(ctx, it.Name, partitions)
	case errors.Is(err, kerr.TopicAlreadyExists):
		return r.awaitTopic(ctx, it.Name, partitions)
	case errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.ClusterAuthorizationFailed):
		return fmt.Errorf("kstream: creating internal topic %q: not authorized; the application's principal needs CREATE permission on it (or create it yourself with %d partitions): %w", it.Name, partitions, err)
	default:
		return fmt.Errorf("kstream: creating internal topic %q with %d partitions: %w", it.Name, partitions, err)
	}
}

// awaitTopic waits until topic is visible in the metadata with all its partitions (a real
// cluster answers CreateTopics before every broker knows the topic), and checks the count.
func (r *Runtime) awaitTopic(ctx context.Context, topic string, partitions int32) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		details, err := r.admin.ListTopics(ctx, topic)
		if err == nil {
			d := details[topic]
			switch n := len(d.Partitions); {
			case d.Err == nil && n == int(partitions):
				return nil
			case d.Err == nil && n > 0 && n != int(partitions):
				return fmt.Errorf("kstream: internal topic %q exists with %d partitions, want %d", topic, n, partitions)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kstream: internal topic %q did not appear in the metadata with %d partitions: %w", topic, partitions, errors.Join(ctx.Err(), err))
		case <-time.After(50 * time.Millisecond):
		}
	}
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
