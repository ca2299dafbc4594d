package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The Java tools test runs Apache Kafka's own command-line tools (their main
// classes, from the Kafka 4.4 jars testing/kafka/kafka.sh fetches) against
// "kstream dev" and checks what they print and what they change.

// javaToolTimeout bounds one run of a Java tool (a JVM start included).
const javaToolTimeout = 90 * time.Second

// javaTools finds java and the Kafka jars, or skips the test saying how to
// get them (fails it if KSTREAM_TEST_JAVA_TOOLS=required, as .ci/run sets):
// the jars are in $KSTREAM_KAFKA_CACHE/lib, else in kafka.sh's default cache,
// testing/kafka/.cache/lib.
func javaTools(t *testing.T) (java, lib string) {
	t.Helper()
	skip := t.Skipf
	if os.Getenv("KSTREAM_TEST_JAVA_TOOLS") == "required" {
		skip = t.Fatalf
	}
	java, err := exec.LookPath("java")
	if env := os.Getenv("KSTREAM_KAFKA_JAVA"); env != "" {
		java, err = env, nil
	}
	if err != nil {
		skip("java not found: the Java tools test needs Java 17+ and the Kafka jars (bash testing/kafka/kafka.sh fetch)")
	}
	cache := os.Getenv("KSTREAM_KAFKA_CACHE")
	if cache == "" {
		cache = filepath.Join("..", "..", "testing", "kafka", ".cache")
	}
	lib, err = filepath.Abs(filepath.Join(cache, "lib"))
	if err != nil {
		t.Fatal(err)
	}
	jars, _ := filepath.Glob(filepath.Join(lib, "kafka-tools-*.jar"))
	if len(jars) == 0 {
		skip("no kafka-tools jar in %s: run bash testing/kafka/kafka.sh fetch (or set KSTREAM_KAFKA_CACHE to its cache dir)", lib)
	}
	return java, lib
}

// javaTool runs a Kafka tool's main class with args and stdin, and returns
// its stdout; it fails the test if the tool exits non-zero.
func javaTool(t *testing.T, java, lib, stdin, class string, args ...string) string {
	t.Helper()
	out, errOut, err := runJavaTool(java, lib, stdin, class, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", class, strings.Join(args, " "), err, out, errOut)
	}
	return out
}

func runJavaTool(java, lib, stdin, class string, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), javaToolTimeout)
	defer cancel()
	cmdArgs := append([]string{
		"-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Djava.awt.headless=true",
		// Log WARN and above to stderr (kafka.sh's log4j2 config for its tools).
		"-Dlog4j2.configurationFile=" + filepath.Join("..", "..", "testing", "kafka", "log4j2.properties"),
		"-Dkstream.kafka.log.level=WARN", "-Dkstream.kafka.log.target=SYSTEM_ERR",
		"-cp", filepath.Join(lib, "*"), class,
	}, args...)
	cmd := exec.CommandContext(ctx, java, cmdArgs...)
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

const (
	topicCommand       = "org.apache.kafka.tools.TopicCommand"
	consoleProducer    = "org.apache.kafka.tools.ConsoleProducer"
	consoleConsumer    = "org.apache.kafka.tools.consumer.ConsoleConsumer"
	getOffsetShell     = "org.apache.kafka.tools.GetOffsetShell"
	consumerGroupsTool = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
	streamsResetter    = "org.apache.kafka.tools.StreamsResetter"
)

// groupRow is one partition line of kafka-consumer-groups --describe.
type groupRow struct {
	partition                 int32
	current, end, lag         string
	consumerID, host, clients string
}

var groupRowRE = regexp.MustCompile(`^(\S+)\s+(\S+)\s+(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$`)

// parseGroupDescribe returns the rows of group's topic in a --describe
// output, by partition.
func parseGroupDescribe(t *testing.T, out, group, topic string) map[int32]groupRow {
	t.Helper()
	rows := make(map[int32]groupRow)
	for _, line := range strings.Split(out, "\n") {
		m := groupRowRE.FindStringSubmatch(line)
		if m == nil || m[1] != group || m[2] != topic {
			continue
		}
		p, _ := strconv.Atoi(m[3])
		rows[int32(p)] = groupRow{int32(p), m[4], m[5], m[6], m[7], m[8], m[9]}
	}
	return rows
}

func TestJavaTools(t *testing.T) {
	java, lib := javaTools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	d := startDev(t, "-addr", "127.0.0.1:0", "-data", "", "-log-level", "none")
	defer d.stop(t)
	b := d.addr

	cl, err := kgo.NewClient(kgo.SeedBrokers(b), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	endOffsets := func(topic string) map[int32]int64 {
		t.Helper()
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatalf("list end offsets: %v", err)
		}
		m := make(map[int32]int64)
		ends.Each(func(o kadm.ListedOffset) { m[o.Partition] = o.Offset })
		return m
	}
	committed := func(group, topic string) map[int32]int64 {
		t.Helper()
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatalf("fetch offsets of %s: %v", group, err)
		}
		m := make(map[int32]int64)
		offs.Each(func(o kadm.OffsetResponse) {
			if o.Topic == topic {
				m[o.Partition] = o.At
			}
		})
		return m
	}

	// kafka-topics --create and --describe.
	out := javaTool(t, java, lib, "", topicCommand, "--bootstrap-server", b, "--create", "--topic", "in", "--partitions", "3")
	if want := "Created topic in.\n"; out != want {
		t.Fatalf("kafka-topics --create printed %q, want %q", out, want)
	}
	out = javaTool(t, java, lib, "", topicCommand, "--bootstrap-server", b, "--create", "--topic", "compacted",
		"--partitions", "2", "--config", "cleanup.policy=compact")
	if want := "Created topic compacted.\n"; out != want {
		t.Fatalf("kafka-topics --create --config printed %q, want %q", out, want)
	}
	out = javaTool(t, java, lib, "", topicCommand, "--bootstrap-server", b, "--describe", "--topic", "in,compacted")
	for _, re := range []string{
		`(?m)^Topic: in\tTopicId: \S+\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: $`,
		`(?m)^Topic: compacted\tTopicId: \S+\tPartitionCount: 2\tReplicationFactor: 1\tConfigs: cleanup.policy=compact$`,
		`(?m)^\tTopic: in\tPartition: 0\tLeader: 0\tReplicas: 0\tIsr: 0\t`,
		`(?m)^\tTopic: in\tPartition: 1\tLeader: 0\tReplicas: 0\tIsr: 0\t`,
		`(?m)^\tTopic: in\tPartition: 2\tLeader: 0\tReplicas: 0\tIsr: 0\t`,
		`(?m)^\tTopic: compacted\tPartition: 1\tLeader: 0\tReplicas: 0\tIsr: 0\t`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("kafka-topics --describe: no line matches %q in:\n%s", re, out)
		}
	}
	if n := strings.Count(out, "\tPartition: "); n != 5 {
		t.Errorf("kafka-topics --describe printed %d partition lines, want 5:\n%s", n, out)
	}

	// kafka-console-producer, then kafka-console-consumer reads back the
	// same records in a group that commits its offsets.
	var input strings.Builder
	var want []string
	for i := 0; i < 9; i++ {
		fmt.Fprintf(&input, "k%d:v%d\n", i, i)
		want = append(want, fmt.Sprintf("k%d\tv%d", i, i))
	}
	javaTool(t, java, lib, input.String(), consoleProducer, "--bootstrap-server", b, "--topic", "in",
		"--reader-property", "parse.key=true", "--reader-property", "key.separator=:")
	ends := endOffsets("in")
	var total int64
	for _, o := range ends {
		total += o
	}
	if total != 9 {
		t.Fatalf("after the console producer the topic holds %d records (%v), want 9", total, ends)
	}
	out = javaTool(t, java, lib, "", consoleConsumer, "--bootstrap-server", b, "--topic", "in", "--from-beginning",
		"--max-messages", "9", "--group", "cg", "--timeout-ms", "30000", "--formatter-property", "print.key=true")
	got := strings.Split(strings.TrimSpace(out), "\n")
	sort.Strings(got)
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("console consumer printed %q, want %q (any order)", got, want)
	}

	// kafka-get-offsets: the end offsets, and the earliest ones.
	out = javaTool(t, java, lib, "", getOffsetShell, "--bootstrap-server", b, "--topic", "in")
	if want := fmt.Sprintf("in:0:%d\nin:1:%d\nin:2:%d\n", ends[0], ends[1], ends[2]); out != want {
		t.Errorf("kafka-get-offsets printed %q, want %q", out, want)
	}
	out = javaTool(t, java, lib, "", getOffsetShell, "--bootstrap-server", b, "--topic", "in", "--time", "-2")
	if want := "in:0:0\nin:1:0\nin:2:0\n"; out != want {
		t.Errorf("kafka-get-offsets --time -2 printed %q, want %q", out, want)
	}

	// The group committed every record; three more to partition 1 make a
	// lag of 3 there.
	if c := committed("cg", "in"); fmt.Sprint(c) != fmt.Sprint(ends) {
		t.Fatalf("group cg committed %v, want the end offsets %v", c, ends)
	}
	for i := 0; i < 3; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "in", Partition: 1, Value: []byte("more")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	// kafka-consumer-groups --list, --describe (lag), --reset-offsets.
	out = javaTool(t, java, lib, "", consumerGroupsTool, "--bootstrap-server", b, "--list")
	if !regexp.MustCompile(`(?m)^cg$`).MatchString(out) {
		t.Errorf("kafka-consumer-groups --list printed %q, want a line cg", out)
	}
	out = javaTool(t, java, lib, "", consumerGroupsTool, "--bootstrap-server", b, "--describe", "--group", "cg")
	rows := parseGroupDescribe(t, out, "cg", "in")
	for p := int32(0); p < 3; p++ {
		lag := int64(0)
		if p == 1 {
			lag = 3
		}
		want := groupRow{p, strconv.FormatInt(ends[p], 10), strconv.FormatInt(ends[p]+lag, 10), strconv.FormatInt(lag, 10), "-", "-", "-"}
		if rows[p] != want {
			t.Errorf("kafka-consumer-groups --describe partition %d: %+v, want %+v\n%s", p, rows[p], want, out)
		}
	}
	out = javaTool(t, java, lib, "", consumerGroupsTool, "--bootstrap-server", b, "--reset-offsets", "--group", "cg",
		"--topic", "in", "--to-earliest", "--execute")
	if n := len(regexp.MustCompile(`(?m)^cg\s+in\s+\d\s+0\s*$`).FindAllString(out, -1)); n != 3 {
		t.Errorf("kafka-consumer-groups --reset-offsets printed %d partitions reset to 0, want 3:\n%s", n, out)
	}
	if c := committed("cg", "in"); fmt.Sprint(c) != fmt.Sprint(map[int32]int64{0: 0, 1: 0, 2: 0}) {
		t.Errorf("after --reset-offsets --to-earliest group cg committed %v, want 0 everywhere", c)
	}

	// A group with an active member (a consumer of the KIP-848 protocol):
	// --describe names its member and client id on every partition.
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "compacted", Key: []byte("a"), Value: []byte("1"), Partition: 0}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	live := exec.CommandContext(ctx, java, "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
		"-Dlog4j2.configurationFile="+filepath.Join("..", "..", "testing", "kafka", "log4j2.properties"),
		"-Dkstream.kafka.log.level=WARN", "-Dkstream.kafka.log.target=SYSTEM_ERR",
		"-cp", filepath.Join(lib, "*"), consoleConsumer, "--bootstrap-server", b, "--topic", "compacted",
		"--from-beginning", "--group", "live", "--command-property", "group.protocol=consumer",
		"--command-property", "client.id=live-client")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = live.Process.Kill()
		_ = live.Wait()
	}()
	var liveRows map[int32]groupRow
	deadline := time.Now().Add(javaToolTimeout)
	for {
		out = javaTool(t, java, lib, "", consumerGroupsTool, "--bootstrap-server", b, "--describe", "--group", "live")
		liveRows = parseGroupDescribe(t, out, "live", "compacted")
		if len(liveRows) == 2 && liveRows[0].clients == "live-client" && liveRows[1].clients == "live-client" && liveRows[0].current == "1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kafka-consumer-groups --describe of a live KIP-848 group: want both partitions owned by live-client, partition 0 committed at 1, got:\n%s", out)
		}
	}
	if liveRows[0].consumerID == "-" || liveRows[0].consumerID != liveRows[1].consumerID {
		t.Errorf("live group rows name members %q and %q, want one member", liveRows[0].consumerID, liveRows[1].consumerID)
	}
	if liveRows[0].host != "/127.0.0.1" {
		t.Errorf("live group member host %q, want /127.0.0.1 (as Apache Kafka prints it)", liveRows[0].host)
	}

	// A kstream application: the group's member is its StreamThread-1 consumer, named as
	// Kafka Streams names it.
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "app-out"); err != nil {
		t.Fatal(err)
	}
	kb := kstream.NewBuilder()
	kstream.Stream(kb, "in", serde.String(), serde.String()).To("app-out", nil, nil)
	app, err := kstream.New(kb, kstream.Config{ApplicationID: "ks-app", Brokers: []string{b}, StateDir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	appCtx, appStop := context.WithCancel(ctx)
	appDone := make(chan error, 1)
	go func() { appDone <- app.Run(appCtx) }()
	defer func() {
		appStop()
		if err := <-appDone; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("kstream app: %v", err)
		}
	}()
	appClient := regexp.MustCompile(`^ks-app-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}-StreamThread-1-consumer$`)
	deadline = time.Now().Add(javaToolTimeout)
	for {
		out = javaTool(t, java, lib, "", consumerGroupsTool, "--bootstrap-server", b, "--describe", "--group", "ks-app")
		rows := parseGroupDescribe(t, out, "ks-app", "in")
		if len(rows) == 3 && appClient.MatchString(rows[0].clients) && rows[1].clients == rows[0].clients && rows[2].clients == rows[0].clients {
			break
		}
		select {
		case err := <-appDone:
			appDone <- err // for the deferred stop
			t.Fatalf("kstream app stopped: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("kafka-consumer-groups --describe of a running kstream app: want its 3 input partitions owned by ks-app-<process UUID>-StreamThread-1-consumer, got:\n%s", out)
		}
	}
	appStop()
	if err := <-appDone; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("kstream app: %v", err)
	}
	appDone <- nil // for the deferred stop

	// kafka-streams-application-reset: input offsets back to earliest and
	// the application's internal topics deleted.
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "app-store-changelog"); err != nil {
		t.Fatal(err)
	}
	var commits kadm.Offsets
	for p, o := range endOffsets("in") {
		commits.Add(kadm.Offset{Topic: "in", Partition: p, At: o, LeaderEpoch: -1})
	}
	if err := adm.CommitAllOffsets(ctx, "app", commits); err != nil {
		t.Fatal(err)
	}
	out = javaTool(t, java, lib, "", streamsResetter, "--bootstrap-server", b, "--application-id", "app", "--input-topics", "in")
	for _, s := range []string{
		"Topic: in Partition: 0 Offset: 0\n", "Topic: in Partition: 1 Offset: 0\n", "Topic: in Partition: 2 Offset: 0\n",
		"Deleting inferred internal topics [app-store-changelog]\n",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("kafka-streams-application-reset did not print %q:\n%s", s, out)
		}
	}
	if c := committed("app", "in"); fmt.Sprint(c) != fmt.Sprint(map[int32]int64{0: 0, 1: 0, 2: 0}) {
		t.Errorf("after the streams reset group app committed %v, want 0 everywhere", c)
	}
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(topics.Names(), ","); got != "app-out,compacted,in" {
		t.Errorf("topics after the streams reset: %s, want app-out,compacted,in", got)
	}
}
