package embedded_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The responses the Java admin client needs complete (compat.go), checked on the wire
// with franz-go's raw requests: a nullable array decodes as nil when sent as null.
func TestJavaClientCompat(t *testing.T) {
	b := start(t)
	ctx := testCtx(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	// CreateTopics: the created topic's configs are a list (not null), their source
	// DYNAMIC_TOPIC_CONFIG.
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "plain", 2, 1
	create.Topics = append(create.Topics, ct)
	ct.Topic = "compacted"
	cfg := kmsg.NewCreateTopicsRequestTopicConfig()
	cfg.Name, cfg.Value = "cleanup.policy", kmsg.StringPtr("compact")
	ct.Configs = []kmsg.CreateTopicsRequestTopicConfig{cfg}
	create.Topics = append(create.Topics, ct)
	cresp, err := create.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range cresp.Topics {
		if rt.ErrorCode != 0 || rt.Configs == nil {
			t.Errorf("CreateTopics %s: error %d, configs %v: want no error and a (maybe empty) list", rt.Topic, rt.ErrorCode, rt.Configs)
		}
		if rt.Topic == "compacted" {
			if len(rt.Configs) != 1 || rt.Configs[0].Name != "cleanup.policy" || rt.Configs[0].Source != 1 {
				t.Errorf("CreateTopics compacted configs %+v: want cleanup.policy with source 1 (DYNAMIC_TOPIC_CONFIG)", rt.Configs)
			}
		}
	}

	// DescribeTopicPartitions: the ELR lists are lists, not null.
	dtp := kmsg.NewPtrDescribeTopicPartitionsRequest()
	dtp.ResponsePartitionLimit = 100
	dresp, err := dtp.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	var parts int
	for _, rt := range dresp.Topics {
		for _, p := range rt.Partitions {
			parts++
			if p.EligibleLeaderReplicas == nil || p.LastKnownELR == nil {
				t.Errorf("DescribeTopicPartitions %s/%d: ELR %v, last known ELR %v: want lists", *rt.Topic, p.Partition, p.EligibleLeaderReplicas, p.LastKnownELR)
			}
		}
	}
	if parts != 4 {
		t.Errorf("DescribeTopicPartitions described %d partitions, want 4", parts)
	}

	// ListGroups: the Java client's type filter ("Classic", "Consumer") matches.
	adm := kadm.NewClient(cl)
	if err := adm.CommitAllOffsets(ctx, "g", kadm.OffsetsFromRecords(kgo.Record{Topic: "plain", Partition: 0, Offset: 0})); err != nil {
		t.Fatal(err)
	}
	list := kmsg.NewPtrListGroupsRequest()
	list.TypesFilter = []string{"Classic", "Consumer"}
	lresp, err := list.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	var groups []string
	for _, g := range lresp.Groups {
		groups = append(groups, g.Group)
	}
	if !slices.Equal(groups, []string{"g"}) {
		t.Errorf("ListGroups with the types filter [Classic Consumer] listed %q, want [g]", groups)
	}

	// ConsumerGroupDescribe (a KIP-848 member): assignments name their topics.
	member, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.ConsumerGroup("g848"), kgo.ConsumeTopics("plain"),
		kgo.ServerSideBalancer())
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	var assigned []kmsg.AssignmentTopicPartition
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		member.PollRecords(pctx, 1) // joins, then polls the empty topic a moment
		cancel()
		desc := kmsg.NewPtrConsumerGroupDescribeRequest()
		desc.Groups = []string{"g848"}
		resp, err := desc.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Groups) == 1 && len(resp.Groups[0].Members) == 1 && len(resp.Groups[0].Members[0].Assignment.TopicPartitions) == 1 {
			assigned = resp.Groups[0].Members[0].Assignment.TopicPartitions
			break
		}
	}
	if len(assigned) != 1 || assigned[0].Topic != "plain" || len(assigned[0].Partitions) != 2 {
		t.Errorf("ConsumerGroupDescribe assignment %+v: want topic plain with 2 partitions", assigned)
	}
}
