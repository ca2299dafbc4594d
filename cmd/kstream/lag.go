package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// lagRow is one input partition of an application: the group's committed offset, the
// partition's end offset and the difference, and the task and member that own it.
type lagRow struct {
	// Task is "<sub-topology>_<partition>" ("0_1,2_1" when several sub-topologies read the
	// topic), or "" when the group's assignment does not say (the group has no member).
	Task      string `json:"task"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Committed is the group's committed offset, -1 when there is none (the application
	// then starts at its reset policy: the log start by default).
	Committed int64 `json:"committed"`
	End       int64 `json:"end"`
	// Lag is End minus Committed (minus the log start without a commit), -1 if unknown.
	Lag      int64  `json:"lag"`
	MemberID string `json:"member_id,omitempty"`
	ClientID string `json:"client_id,omitempty"`
	Host     string `json:"host,omitempty"`
	Error    string `json:"error,omitempty"`

	sub int // first sub-topology, for sorting; -1 if unknown
}

// lagReport is the output of kstream lag.
type lagReport struct {
	ApplicationID string `json:"application_id"`
	// State is the group's state: Stable, PreparingRebalance, CompletingRebalance, Empty.
	State   string `json:"state"`
	Members int    `json:"members"`
	// TasksKnown reports whether partitions could be mapped to tasks: that takes the
	// assignment of a running member.
	TasksKnown bool     `json:"tasks_known"`
	TotalLag   int64    `json:"total_lag"`
	Partitions []lagRow `json:"partitions"`
}

const lagUsage = `Usage: kstream lag -brokers host:port -app <application.id> [-wide|-json]

Prints, for every input partition of a kstream application (its source topics and
repartition topics), the offset its consumer group (the application id) committed, the
partition's end offset and the lag between them, with the task that processes it
("<sub-topology>_<partition>", the numbering of the ops page and App.Tasks) and the
member (member id, client id, host) it is assigned to, as Kafka's consumer-group
command's describe does, from the broker alone. The table fits in 100 columns: it shows
the member's client id, and cuts the middle out of names too long ("..."); -wide shows
the member id and host too, and every name in full.

Tasks are read from the group's assignment, so they are known only while at least one
instance runs; with an empty group the rows are per topic and partition, without task
and member. Without a committed offset, the lag counts from the partition's log start
(where the application starts by default).

Flags:
`

// runLag implements "kstream lag".
func runLag(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("lag", flag.ContinueOnError)
	fs.SetOutput(stderr)
	brokers := fs.String("brokers", "127.0.0.1:9092", "comma-separated `host:port` seed brokers")
	app := fs.String("app", "", "the application id (Config.ApplicationID), which is its consumer group")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	wide := fs.Bool("wide", false, "print every column in full (member id, client id and host; names not shortened) instead of a table that fits in 100 columns")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), lagUsage)
		fs.PrintDefaults()
	}
	if help, err := parseFlags(fs, args, stderr); help || err != nil {
		return err
	}
	if *app == "" {
		return usageError(fs, "-app is required")
	}
	cl, adm, err := newAdmin(*brokers)
	if err != nil {
		return fmt.Errorf("lag: %w", err)
	}
	defer cl.Close()
	rep, err := groupLag(ctx, adm, *app)
	if err != nil {
		return fmt.Errorf("lag: %w", err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printLag(stdout, rep, *wide)
	return nil
}

// groupLag reads the lag of application app's group.
func groupLag(ctx context.Context, adm *kadm.Client, app string) (*lagReport, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	lags, err := adm.Lag(ctx, app)
	if err != nil {
		return nil, fmt.Errorf("reading the lag of group %q: %w", app, err)
	}
	gl, ok := lags[app]
	if !ok {
		return nil, fmt.Errorf("group %q: not in the broker's answer", app)
	}
	err = gl.Error()
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return nil, fmt.Errorf("group %q: %w", app, err)
	}
	if err != nil || gl.State == "Dead" || (len(gl.Members) == 0 && len(gl.Lag) == 0) {
		return nil, fmt.Errorf("group %q: %w (the application never committed, or was reset)", app, kerr.GroupIDNotFound)
	}
	rep := &lagReport{ApplicationID: app, State: gl.State, Members: len(gl.Members), Partitions: []lagRow{}}
	topicSubs := assignmentTopics(gl.Members)
	rep.TasksKnown = topicSubs != nil
	for topic, ps := range gl.Lag {
		for p, l := range ps {
			row := lagRow{Topic: topic, Partition: p, Committed: l.Commit.At, End: l.End.Offset, Lag: l.Lag, sub: -1}
			if l.Commit.At < 0 {
				row.Committed = -1
			}
			if l.Err != nil {
				row.Error, row.Lag = l.Err.Error(), -1
			}
			if l.Member != nil {
				row.MemberID, row.ClientID, row.Host = l.Member.MemberID, l.Member.ClientID, l.Member.ClientHost
			}
			if subs := topicSubs[topic]; len(subs) > 0 {
				ids := make([]string, len(subs))
				for i, s := range subs {
					ids[i] = fmt.Sprintf("%d_%d", s, p)
				}
				row.Task, row.sub = strings.Join(ids, ","), subs[0]
			}
			if row.Lag > 0 {
				rep.TotalLag += row.Lag
			}
			rep.Partitions = append(rep.Partitions, row)
		}
	}
	key := func(r lagRow) int { // unknown tasks last
		if r.sub < 0 {
			return math.MaxInt
		}
		return r.sub
	}
	slices.SortFunc(rep.Partitions, func(a, b lagRow) int {
		if a.sub < 0 && b.sub < 0 {
			return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
		}
		return cmp.Or(cmp.Compare(key(a), key(b)), cmp.Compare(a.Partition, b.Partition), strings.Compare(a.Topic, b.Topic))
	})
	return rep, nil
}

// assignmentTopics returns the sub-topologies reading each source topic, as the group
// leader wrote them in the members' assignments, or nil if no member carries them.
func assignmentTopics(members []kadm.DescribedGroupMember) map[string][]int {
	for _, m := range members {
		a, ok := m.Assigned.AsConsumer()
		if !ok || len(a.UserData) == 0 {
			continue
		}
		var ud struct {
			Topics map[string][]int `json:"t"`
		}
		if json.Unmarshal(a.UserData, &ud) == nil && len(ud.Topics) > 0 {
			for _, subs := range ud.Topics {
				slices.Sort(subs)
			}
			return ud.Topics
		}
	}
	return nil
}

// lagWidth is the width the default table of kstream lag fits in.
const lagWidth = 100

// printLag writes rep as a table. The default table fits in lagWidth columns: it shows
// the client id of each partition's member (not its member id and host), and shortens
// topic names and client ids that would not fit by cutting out their middle ("...").
// wide shows every column in full.
func printLag(w io.Writer, rep *lagReport, wide bool) {
	fmt.Fprintf(w, "Application %s: group %s, %d member(s), total lag %d\n", rep.ApplicationID, rep.State, rep.Members, rep.TotalLag)
	if !rep.TasksKnown {
		fmt.Fprintln(w, "Tasks unknown: the group has no running member whose assignment names them;")
		fmt.Fprintln(w, "rows are per topic and partition.")
	}
	fmt.Fprintln(w)
	dash := func(s string) string { return cmp.Or(s, "-") }
	num := func(n int64) string {
		if n < 0 {
			return "-"
		}
		return strconv.FormatInt(n, 10)
	}
	header := []string{"TASK", "TOPIC", "PARTITION", "COMMITTED", "END", "LAG", "CLIENT-ID"}
	if wide {
		header = []string{"TASK", "TOPIC", "PARTITION", "COMMITTED", "END", "LAG", "MEMBER", "CLIENT-ID", "HOST"}
	}
	rows := [][]string{header}
	for _, r := range rep.Partitions {
		lag := num(r.Lag)
		if r.Error != "" {
			lag = "error: " + r.Error
		}
		row := []string{dash(r.Task), r.Topic, strconv.FormatInt(int64(r.Partition), 10), num(r.Committed), num(r.End), lag}
		if wide {
			row = append(row, dash(r.MemberID), dash(r.ClientID), dash(r.Host))
		} else {
			row = append(row, dash(r.ClientID))
		}
		rows = append(rows, row)
	}
	if !wide {
		fitColumns(rows, lagWidth, []int{6, 1, 5})
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, row := range rows {
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	tw.Flush()
}

// fitColumns shortens the cells of rows (the first is the header) so that the table,
// with two spaces between columns, is at most width runes wide: the columns in shrink,
// in order of preference, are cut to what is left of the width after the others, but
// to no fewer than 20 runes each (the header's cells are never cut).
func fitColumns(rows [][]string, width int, shrink []int) {
	const gap, least = 2, 20
	widths := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, c := range row {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	total := gap * (len(widths) - 1)
	for _, w := range widths {
		total += w
	}
	for _, col := range shrink {
		if total <= width {
			break
		}
		limit := max(widths[col]-(total-width), least, utf8.RuneCountInString(rows[0][col]))
		if limit >= widths[col] {
			continue
		}
		for _, row := range rows[1:] {
			row[col] = cutMiddle(row[col], limit)
		}
		total -= widths[col] - limit
		widths[col] = limit
	}
}

// cutMiddle shortens s to n runes by replacing its middle with "...", keeping a third of
// the rest from its start and two thirds from its end, where topic names and client ids differ (a "-repartition" or "-consumer" suffix, a
// process id).
func cutMiddle(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	if n <= 3 {
		return string(r[:n])
	}
	head := (n - 3) / 3
	tail := n - 3 - head
	return string(r[:head]) + "..." + string(r[len(r)-tail:])
}
