package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kstream lag names, for an app with two sub-topologies (a repartition), the task and
// member of every input partition, with committed and end offsets; once the app stopped,
// it shows the lag per topic and partition, without tasks.
func TestLag(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, &logLines{t: t})
	in := kafkatest.CreateTopic(t, "in", 2, nil)
	out := kafkatest.CreateTopic(t, "out", 1, nil)
	b := kstream.NewBuilder()
	src := kstream.Stream(b, in, serde.String(), serde.String())
	byValue := kstream.GroupBy(src, func(_, v string) string { return v }, serde.String())
	kstream.Count(byValue, "counts").ToStream().To(out, nil, serde.Int64())
	r := startApp(t, b, cfg)
	r.waitRunning(t)

	p := kafkatest.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	kafkatest.Produce(t, p,
		&kgo.Record{Topic: in, Partition: 0, Key: []byte("k1"), Value: []byte("x")},
		&kgo.Record{Topic: in, Partition: 0, Key: []byte("k2"), Value: []byte("y")},
		&kgo.Record{Topic: in, Partition: 1, Key: []byte("k3"), Value: []byte("x")})
	counts(t, out, 0, 3)

	// Wait until everything is committed: 2 + 1 input records, 3 repartitioned records.
	adm := func() *lagReport {
		_, a, err := newAdmin(brokers(t))
		if err != nil {
			t.Fatal(err)
		}
		rep, err := groupLag(kafkatest.Context(t, 10*time.Second), a, cfg.ApplicationID)
		if err != nil {
			t.Logf("lag: %v", err)
			return nil
		}
		return rep
	}
	kafkatest.Eventually(t, 30*time.Second, "every partition committed to its end", func() bool {
		rep := adm()
		if rep == nil || len(rep.Partitions) != 4 || rep.TotalLag != 0 {
			return false
		}
		var ends int64
		for _, row := range rep.Partitions {
			ends += row.End
			if row.Committed != row.End && (row.Committed != -1 || row.End != 0) {
				return false
			}
		}
		return ends == 6
	})

	var rep lagReport
	if err := json.Unmarshal([]byte(mustCLI(t, "lag", "-brokers", brokers(t), "-app", cfg.ApplicationID, "-json")), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.ApplicationID != cfg.ApplicationID || rep.State != "Stable" || rep.Members != 1 || !rep.TasksKnown || rep.TotalLag != 0 {
		t.Fatalf("report header: %+v", rep)
	}
	repartition := ""
	var tasks []string
	for _, row := range rep.Partitions {
		if row.Topic != in {
			repartition = row.Topic
		}
		tasks = append(tasks, row.Task)
	}
	if !strings.HasPrefix(repartition, cfg.ApplicationID+"-") || !strings.HasSuffix(repartition, "-repartition") {
		t.Fatalf("the other topic is %q, want the repartition topic", repartition)
	}
	// The rows, sorted by task: sub-topology 0 reads the input, 1 the repartition topic.
	member, client := rep.Partitions[0].MemberID, rep.Partitions[0].ClientID
	if member == "" || client == "" {
		t.Fatalf("no member or client id: %+v", rep.Partitions[0])
	}
	want := []lagRow{
		{Task: "0_0", Topic: in, Partition: 0, Committed: 2, End: 2},
		{Task: "0_1", Topic: in, Partition: 1, Committed: 1, End: 1},
		{Task: "1_0", Topic: repartition, Partition: 0},
		{Task: "1_1", Topic: repartition, Partition: 1},
	}
	var repartitioned int64
	for i, row := range rep.Partitions {
		w := want[i]
		if i >= 2 { // how the keys x and y hash over the repartition topic is the partitioner's
			w.Committed, w.End = row.End, row.End
			if row.End == 0 {
				w.Committed = -1 // an empty partition: nothing committed
			}
			repartitioned += row.End
		}
		w.MemberID, w.ClientID, w.Host = member, client, row.Host
		row.sub = 0
		if row != w {
			t.Errorf("row %d: got %+v, want %+v", i, row, w)
		}
	}
	if repartitioned != 3 {
		t.Errorf("repartition topic rows end at %d records in all, want 3", repartitioned)
	}
	// The tasks are the app's.
	var appTasks []string
	for _, id := range r.app.Tasks() {
		appTasks = append(appTasks, id.String())
	}
	if !slices.Equal(tasks, appTasks) {
		t.Errorf("lag's tasks %v, App.Tasks %v", tasks, appTasks)
	}

	table := mustCLI(t, "lag", "-brokers", brokers(t), "-app", cfg.ApplicationID)
	for _, want := range []string{
		fmt.Sprintf("Application %s: group Stable, 1 member(s), total lag 0\n", cfg.ApplicationID),
		"TASK  TOPIC",
		fmt.Sprintf("0_0   %s", in),
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}

	// Stopped, with 3 new records on partition 0: an empty group, lag per partition.
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	kafkatest.Produce(t, p,
		&kgo.Record{Topic: in, Partition: 0, Key: []byte("k4"), Value: []byte("x")},
		&kgo.Record{Topic: in, Partition: 0, Key: []byte("k5"), Value: []byte("x")},
		&kgo.Record{Topic: in, Partition: 0, Key: []byte("k6"), Value: []byte("x")})
	rep = lagReport{}
	if err := json.Unmarshal([]byte(mustCLI(t, "lag", "-brokers", brokers(t), "-app", cfg.ApplicationID, "-json")), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.State != "Empty" || rep.Members != 0 || rep.TasksKnown || rep.TotalLag != 3 || len(rep.Partitions) != 4 {
		t.Fatalf("stopped app: %+v", rep)
	}
	// Sorted by topic and partition: the repartition topic ("<app id>-...") first.
	if got, want := rep.Partitions[2], (lagRow{Topic: in, Partition: 0, Committed: 2, End: 5, Lag: 3}); got != want {
		t.Fatalf("row of %s/0 of the stopped app: %+v, want %+v", in, got, want)
	}
	table = mustCLI(t, "lag", "-brokers", brokers(t), "-app", cfg.ApplicationID)
	if !strings.Contains(table, "Tasks unknown") || !regexp.MustCompile(`\n-\s+`+in+`\s+0\s+2\s+5\s+3\s+-\n`).MatchString(table) {
		t.Errorf("table of the stopped app:\n%s", table)
	}
	for _, l := range strings.Split(table, "\n") {
		if utf8.RuneCountInString(l) > 100 {
			t.Errorf("line wider than 100 columns: %q", l)
		}
	}
	table = mustCLI(t, "lag", "-brokers", brokers(t), "-app", cfg.ApplicationID, "-wide")
	if !regexp.MustCompile(`\n-\s+` + in + `\s+0\s+2\s+5\s+3\s+-\s+-\s+-\n`).MatchString(table) {
		t.Errorf("wide table of the stopped app:\n%s", table)
	}

	// An application that never ran has no group.
	if _, _, err := cli(t, "lag", "-brokers", brokers(t), "-app", "never-ran-"+cfg.ApplicationID); err == nil || !strings.Contains(err.Error(), "never committed") {
		t.Errorf("lag of an unknown application: %v", err)
	}
}

// The default table of kstream lag fits in 100 columns, however long the application's
// topic names and client ids, cutting the middle out of them; -wide shows them in full,
// with member ids and hosts.
func TestLagTableWidth(t *testing.T) {
	app := "shop-orders-revenue-per-customer-v2"
	repartition := app + "-KSTREAM-AGGREGATE-STATE-STORE-0000000004-repartition"
	client := app + "-8a3f2c1e-5b7d-4e9a-9c1f-2d6b8e4a7c30-StreamThread-1-consumer"
	member := client + "-0f8e2b6c-3d4a-4b1e-8c7f-5a9d2e6b1c43"
	rep := &lagReport{ApplicationID: app, State: "Stable", Members: 2, TasksKnown: true, TotalLag: 1234567}
	for p := range int32(3) {
		rep.Partitions = append(rep.Partitions,
			lagRow{Task: fmt.Sprintf("0_%d", p), Topic: "orders", Partition: p, Committed: 1234567890, End: 1234567990, Lag: 100, MemberID: member, ClientID: client, Host: "/10.20.30.40"},
			lagRow{Task: fmt.Sprintf("1_%d", p), Topic: repartition, Partition: p, Committed: -1, End: 0, Lag: 0, MemberID: member, ClientID: client, Host: "/10.20.30.41"})
	}
	var b strings.Builder
	printLag(&b, rep, false)
	compact := b.String()
	lines := strings.Split(strings.TrimSuffix(compact, "\n"), "\n")
	for _, l := range lines {
		if n := utf8.RuneCountInString(l); n > 100 {
			t.Errorf("line of %d columns: %q", n, l)
		}
	}
	if !strings.HasPrefix(lines[2], "TASK  TOPIC") || !strings.HasSuffix(lines[2], "CLIENT-ID") || strings.Contains(compact, "MEMBER") {
		t.Errorf("compact header %q", lines[2])
	}
	// The end of a cut name is kept: the repartition suffix, the client's role.
	row := regexp.MustCompile(`(?m)^1_2\s+(\S+)\s+2\s+-\s+0\s+0\s+(\S+)$`).FindStringSubmatch(compact)
	if row == nil {
		t.Fatalf("no row for task 1_2:\n%s", compact)
	}
	if !strings.Contains(row[1], "...") || !strings.HasSuffix(row[1], "-repartition") || !strings.HasPrefix(row[1], "shop-") ||
		!strings.Contains(row[2], "...") || !strings.HasSuffix(row[2], "-consumer") {
		t.Errorf("cut topic %q, client id %q", row[1], row[2])
	}
	if !strings.Contains(compact, "\n0_0   orders ") {
		t.Errorf("a short topic name was changed:\n%s", compact)
	}

	b.Reset()
	printLag(&b, rep, true)
	wide := b.String()
	for _, want := range []string{repartition, client, member, "/10.20.30.41", "MEMBER"} {
		if !strings.Contains(wide, want) {
			t.Errorf("wide table lacks %q:\n%s", want, wide)
		}
	}
	if strings.Contains(wide, "...") {
		t.Errorf("wide table cuts names:\n%s", wide)
	}
	t.Logf("compact:\n%s", compact)
}
