package kstream_test

import (
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/twmb/franz-go/pkg/kadm"
)

// Three processes of one application id share the work: three child processes run the
// counting pipeline under exactly-once over 12 input partitions while the input arrives;
// the group gives each of them a third of the partitions, and, read read_committed, every
// key's counts are exactly 1, 2, ..., n. The consumer group is the distributed engine: no
// coordination other than Kafka's.
func TestThreeProcessesShareTheWork(t *testing.T) {
	t.Parallel()
	const parts, processes = 12, 3
	records, keys := 30_000, 600
	if os.Getenv("KSTREAM_TEST_LONG") != "" {
		records, keys = 300_000, 5_000
	}
	in := kafkatest.CreateTopic(t, "in", parts, nil)
	out := kafkatest.CreateTopic(t, "out", parts, nil)
	app := kafkatest.Name(t, "app")
	outputs := collect(t, out, readCommitted)

	children := make([]*kafkatest.Child, processes)
	for i := range children {
		children[i] = kafkatest.StartChild(t, "count-app", "APP_ID="+app, "STATE_DIR="+t.TempDir(),
			"IN="+in, "OUT="+out, "GUARANTEE=eos", "COMMIT_MS=100")
	}
	t.Cleanup(func() {
		for _, c := range children {
			c.Kill(t)
		}
	})
	adm := kadm.NewClient(kafkatest.Client(t))
	var shares map[string][]int32
	kafkatest.Eventually(t, 120*time.Second, "three members with four partitions each", func() bool {
		shares = groupShares(t, adm, app, in)
		if len(shares) != processes {
			return false
		}
		for _, ps := range shares {
			if len(ps) != parts/processes {
				return false
			}
		}
		return true
	})
	t.Logf("shares: %v", shares)

	var mu sync.Mutex
	want := map[string]int64{}
	feed(t, in, records, keys, 20*time.Millisecond, 31, &mu, want)
	kafkatest.Eventually(t, 120*time.Second, "every count", func() bool { return outputs.reached(want) })
	outputs.checkExact(t, want)

	// The input arrived while the three ran: each of them processed records of its own
	// partitions (a child prints nothing per record, so the group's committed offsets say
	// it: every partition moved, and the group still has the same three members).
	final := groupShares(t, adm, app, in)
	if len(final) != processes {
		t.Errorf("group after the run: %v, want the same %d members", final, processes)
	}
	for m, ps := range shares {
		if !slices.Equal(final[m], ps) {
			t.Errorf("member %s held %v and now holds %v: the work moved during a run without failures", m, ps, final[m])
		}
	}
	committed, err := adm.FetchOffsets(kafkatest.Context(t, 10*time.Second), app)
	if err != nil {
		t.Fatalf("fetching the group's offsets: %v", err)
	}
	for p := range int32(parts) {
		if o, ok := committed.Lookup(in, p); !ok || o.At <= 0 {
			t.Errorf("input partition %d: committed offset %v, want progress", p, o.At)
		}
	}
	for i, c := range children {
		if exited, err := c.Exited(); exited {
			t.Errorf("process %d exited: %v\n%s", i, err, tail(c.Output(), 2000))
		}
	}
}

// groupShares returns, for each member of group, the partitions of topic it is assigned,
// sorted.
func groupShares(t *testing.T, adm *kadm.Client, group, topic string) map[string][]int32 {
	t.Helper()
	gs, err := adm.DescribeGroups(kafkatest.Context(t, 10*time.Second), group)
	if err != nil {
		return nil
	}
	shares := map[string][]int32{}
	for _, g := range gs {
		if g.State != "Stable" {
			return nil
		}
		for _, m := range g.Members {
			a, ok := m.Assigned.AsConsumer()
			if !ok {
				return nil
			}
			var ps []int32
			for _, tp := range a.Topics {
				if tp.Topic == topic {
					ps = append(ps, tp.Partitions...)
				}
			}
			slices.Sort(ps)
			shares[m.MemberID] = ps
		}
	}
	return shares
}

// tail returns the last n bytes of s, cut at a line start.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}
