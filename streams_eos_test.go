package kstream_test

import (
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
)

// Exactly-once under the streams protocol (KIP-1071): the crash tests of the classic
// protocol run again as streams groups on Apache Kafka (their Streams variants, in the test
// files of the classic ones), with a 6 s session and 500 ms heartbeats, as the classic
// tests' members have.

// protocols are the group protocols a crash test runs under: classic everywhere, and
// streams too on a real Apache Kafka broker (the in-process broker does not speak it).
func protocols() []kstream.GroupProtocol {
	if kafkatest.Tier() == "kafka" {
		return []kstream.GroupProtocol{kstream.GroupProtocolClassic, kstream.GroupProtocolStreams}
	}
	return []kstream.GroupProtocol{kstream.GroupProtocolClassic}
}

// protocolName names a protocol in a subtest's name.
func protocolName(p kstream.GroupProtocol) string {
	if p == kstream.GroupProtocolStreams {
		return "streams"
	}
	return "classic"
}

// useProtocol makes cfg (and the children started with env) members of a group of protocol
// p: under streams, the group's session timeout and heartbeat interval are set on the
// broker (6 s, 500 ms) and env gets GROUP_PROTOCOL=streams.
func useProtocol(t *testing.T, p kstream.GroupProtocol, cfg *kstream.Config, env []string) []string {
	t.Helper()
	if p != kstream.GroupProtocolStreams {
		return env
	}
	if cfg != nil {
		cfg.GroupProtocol = kstream.GroupProtocolStreams
	}
	streamsGroupTimeouts(t, cfg.ApplicationID)
	return append(env, "GROUP_PROTOCOL=streams")
}

// streamsGroupTimeouts gives the streams group app a 6 s session and 500 ms heartbeats.
func streamsGroupTimeouts(t *testing.T, app string) {
	t.Helper()
	setGroupConfigs(t, app, "streams.session.timeout.ms", "6000", "streams.heartbeat.interval.ms", "500")
}

// Exactly-once counts under the streams protocol: two instances, every commit a
// transaction whose offsets the streams group accepts (TxnOffsetCommit with the member's
// epoch), a read_committed reader sees each count once.
func TestStreamsProtocolExactlyOnceCountsOnKafka(t *testing.T) {
	if kafkatest.Tier() != "kafka" {
		t.Skip("needs a real Apache Kafka 4.2+ broker (KSTREAM_TEST_BROKERS)")
	}
	t.Parallel()
	in := kafkatest.CreateTopic(t, "in", 4, nil)
	out := kafkatest.CreateTopic(t, "out", 4, nil)
	cfg := testConfig(t)
	cfg.Guarantee, cfg.CommitInterval = kstream.ExactlyOnce, 0
	useProtocol(t, kstream.GroupProtocolStreams, &cfg, nil)
	cfg2 := cfg
	cfg2.StateDir = t.TempDir()
	app1, app2 := newApp(t, countTopology(in, out), cfg), newApp(t, countTopology(in, out), cfg2)
	outputs := collect(t, out, readCommitted)
	start(t, app1)
	start(t, app2)
	kafkatest.Eventually(t, 90*time.Second, "the tasks split between the instances", func() bool {
		return len(app1.Tasks()) == 2 && len(app2.Tasks()) == 2 && app1.State() == kstream.StateRunning && app2.State() == kstream.StateRunning
	})
	want := map[string]int64{}
	produceCounts(t, in, 20000, 500, 3, want)
	kafkatest.Eventually(t, 60*time.Second, "exact counts", func() bool { return outputs.reached(want) })
	outputs.checkExact(t, want)
	kafkatest.Eventually(t, 30*time.Second, "every input offset committed", func() bool { return committedAll(t, cfg.ApplicationID, in) })
	for _, app := range []*kstream.App{app1, app2} {
		st := app.Stats()
		if !st.ExactlyOnce || st.Commits == 0 || st.TransactionalID == "" {
			t.Errorf("stats %+v: want exactly-once commits and a transactional id", st)
		}
	}
	t.Logf("stats: %+v / %+v", app1.Stats(), app2.Stats())
}
