package runtime

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// PartitionCount implements TaskEnv: the count prepare found for a topic of the topology,
// or else the cluster's answer for topic, asked once and then remembered.
func (r *Runtime) PartitionCount(ctx context.Context, topic string) (int32, error) {
	if n, ok := r.sources().counts[topic]; ok && n > 0 {
		return n, nil
	}
	if n, ok := r.otherCounts.Load(topic); ok {
		return n.(int32), nil
	}
	details, err := r.admin.ListTopics(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("kstream: reading the partition count of topic %q: %w", topic, err)
	}
	d, ok := details[topic]
	if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
		return 0, fmt.Errorf("kstream: reading the partition count of topic %q: %w", topic, kerr.UnknownTopicOrPartition)
	}
	if d.Err != nil {
		return 0, fmt.Errorf("kstream: reading the partition count of topic %q: %w", topic, d.Err)
	}
	n := int32(len(d.Partitions))
	r.otherCounts.Store(topic, n)
	return n, nil
}
