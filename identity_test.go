package kstream_test

import (
	"regexp"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/twmb/franz-go/pkg/kadm"
)

// The group members' client ids are formed as Kafka Streams forms them:
// <application.id>-<process UUID>-StreamThread-1-consumer by default, and
// <client.id>-StreamThread-1-consumer with Config.ClientID.
func TestClientIDs(t *testing.T) {
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", parts, nil)
	out := kafkatest.CreateTopic(t, "out", parts, nil)
	build := func() *kstream.Builder {
		b := kstream.NewBuilder()
		strs(b, in).To(out, nil, nil)
		return b
	}
	cfg := testConfig(t)
	start(t, newApp(t, build(), cfg))
	cfg2 := cfg
	cfg2.ClientID = "custom-instance"
	cfg2.StateDir = t.TempDir()
	start(t, newApp(t, build(), cfg2))

	defaultID := regexp.MustCompile(`^` + regexp.QuoteMeta(cfg.ApplicationID) +
		`-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}-StreamThread-1-consumer$`)
	adm := kadm.NewClient(kafkatest.Client(t))
	var ids []string
	kafkatest.Eventually(t, 30*time.Second, "two members in the group", func() bool {
		groups, err := adm.DescribeGroups(kafkatest.Context(t, 10*time.Second), cfg.ApplicationID)
		if err != nil {
			return false
		}
		g := groups[cfg.ApplicationID]
		if g.Err != nil || g.State != "Stable" || len(g.Members) != 2 {
			return false
		}
		ids = ids[:0]
		for _, m := range g.Members {
			ids = append(ids, m.ClientID)
		}
		return true
	})
	var sawDefault, sawCustom bool
	for _, id := range ids {
		switch {
		case id == "custom-instance-StreamThread-1-consumer":
			sawCustom = true
		case defaultID.MatchString(id):
			sawDefault = true
		default:
			t.Errorf("member client id %q is neither %s nor custom-instance-StreamThread-1-consumer", id, defaultID)
		}
	}
	if !sawDefault || !sawCustom {
		t.Errorf("member client ids %q: want one of each form", ids)
	}
}
