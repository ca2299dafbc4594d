package kstream_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
)

// Exactly-once under the streams protocol (KIP-1071): the crash tests of the classic
// protocol run again as streams groups on Apache Kafka (their Streams variants, in the test
// files of the classic ones), with a 6 s session and 500 ms heartbeats, as the classic
// tests' members have.

// useProtocol makes application app of protocol p: under streams, the group's session
// timeout and heartbeat interval are set on the broker (6 s, 500 ms), cfg (if not nil) gets
// the protocol, and the environment returned, for the children, GROUP_PROTOCOL=streams.
func useProtocol(t *testing.T, p kstream.GroupProtocol, app string, cfg *kstream.Config) []string {
	t.Helper()
	if p != kstream.GroupProtocolStreams {
		return nil
	}
	if cfg != nil {
		cfg.GroupProtocol = kstream.GroupProtocolStreams
	}
	streamsGroupTimeouts(t, app)
	return []string{"GROUP_PROTOCOL=streams"}
}

// needStreamsBroker skips a streams-protocol test off a real Apache Kafka broker.
func needStreamsBroker(t *testing.T) {
	t.Helper()
	if kafkatest.Tier() != "kafka" {
		t.Skip("needs a real Apache Kafka 4.2+ broker (KSTREAM_TEST_BROKERS)")
	}
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
	useProtocol(t, kstream.GroupProtocolStreams, cfg.ApplicationID, &cfg)
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

// activeRe matches a streams member's log line of an assignment with active tasks.
var activeRe = regexp.MustCompile(`msg="kstream: streams group assignment".* active="?\[\d`)

// childRunning reports whether a child's output (its info log) shows it running. A classic
// member is RUNNING once it holds its assignment, which a restart after a kill gets only
// when the dead member has left (a rebalance waits for it). A streams member joins at
// once and is RUNNING with no task while the broker waits out the dead member's session
// (its tasks are not free until then): it is running once it was given active tasks and
// its last state is RUNNING.
func childRunning(out string, p kstream.GroupProtocol) bool {
	if p != kstream.GroupProtocolStreams {
		return strings.Contains(out, "to=RUNNING")
	}
	return activeRe.MatchString(out) && lastStateRunning(out)
}

// stateRe matches a kstream state change log line.
var stateRe = regexp.MustCompile(`msg="kstream: state change" .* to=([A-Z_]+)`)

// lastStateRunning reports whether a child's last state change (its info log) is to
// RUNNING.
func lastStateRunning(out string) bool {
	m := stateRe.FindAllStringSubmatch(out, -1)
	return len(m) > 0 && m[len(m)-1][1] == "RUNNING"
}
