package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kstream-go/kstream/internal/runtime"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

const resetUsage = `Usage: kstream reset -brokers host:port -app <application.id> [-input-topics a,b]
       [-intermediate-topics c] [-internal-topics d]
       [-to-earliest | -to-latest | -to-offset N | -to-datetime T | -by-duration D | -shift-by N]
       [-state-dir DIR] [-dry-run]

Resets a kstream application so that it reprocesses its input from the start (or from
the position asked), as Kafka's StreamsResetter (kafka-streams-application-reset) does:

 1. It checks that the application's consumer group (the application id) has no member:
    every instance must be stopped; otherwise it refuses, naming the members.
 2. It commits, for the group, new offsets of the -input-topics: the earliest offset by
    default, or the position that -to-latest, -to-offset, -to-datetime, -by-duration or
    -shift-by asks (clamped to the partition's start and end). -intermediate-topics
    (topics the application writes and reads back) are set to their end.
 3. It deletes the application's internal topics: the topics named "<application.id>-..."
    ending in -changelog, -repartition, -subscription-registration-topic or
    -subscription-response-topic (-internal-topics deletes a subset of them).
 4. With -state-dir, it deletes the application's local state, as App.CleanUp does:
    DIR when it is the application's state directory (its Config.StateDir), else
    DIR/<application.id> (the layout of the default, $TMPDIR/kstream/<application.id>).

Without -state-dir, an instance restarted on its old state directory finds its stores'
checkpoints beyond the end of the recreated (empty) changelogs, wipes those stores with a
warning and rebuilds them, as Kafka Streams does; deleting the local state with -state-dir
(or App.CleanUp) on every instance's machine saves that detour.

-dry-run prints what would be done and changes nothing.

Flags:
`

// internalTopicSuffixes are the suffixes of the internal topics an application creates
// (Kafka Streams' StreamsResetter.matchesInternalTopicFormat).
var internalTopicSuffixes = []string{"-changelog", "-repartition", "-subscription-registration-topic", "-subscription-response-topic"}

// fkTopicRE matches the generated names of foreign-key join topics.
var fkTopicRE = regexp.MustCompile(`-KTABLE-FK-JOIN-SUBSCRIPTION-(REGISTRATION|RESPONSE)-\d+-topic$`)

// isInternalTopic reports whether topic is one of application app's internal topics.
func isInternalTopic(app, topic string) bool {
	if !strings.HasPrefix(topic, app+"-") {
		return false
	}
	for _, s := range internalTopicSuffixes {
		if strings.HasSuffix(topic, s) {
			return true
		}
	}
	return fkTopicRE.MatchString(topic)
}

// resetOptions are the parsed flags of kstream reset.
type resetOptions struct {
	brokers, app        string
	input, intermediate []string
	internal            []string
	mode                string // earliest, latest, offset, datetime, duration, shift
	offset              int64  // -to-offset or -shift-by
	at                  time.Time
	stateDir            string
	dryRun              bool
}

// runReset implements "kstream reset".
func runReset(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("reset", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o resetOptions
	fs.StringVar(&o.brokers, "brokers", "127.0.0.1:9092", "comma-separated `host:port` seed brokers")
	fs.StringVar(&o.app, "app", "", "the application id (Config.ApplicationID), which is its consumer group")
	input := fs.String("input-topics", "", "comma-separated input `topics` whose offsets are reset")
	intermediate := fs.String("intermediate-topics", "", "comma-separated `topics` the application writes and reads back, set to their end")
	internal := fs.String("internal-topics", "", "comma-separated internal `topics` to delete, a subset of those found (default: all found)")
	toEarliest := fs.Bool("to-earliest", false, "reset the input topics to their earliest offset (the default)")
	toLatest := fs.Bool("to-latest", false, "reset the input topics to their end")
	toOffset := fs.Int64("to-offset", 0, "reset the input topics' partitions to `offset`")
	toDatetime := fs.String("to-datetime", "", "reset the input topics to the first offset with a timestamp at or after `time` (RFC 3339, e.g. 2026-01-02T15:04:05Z)")
	byDuration := fs.Duration("by-duration", 0, "reset the input topics to the first offset with a timestamp at or after now minus `duration` (e.g. 1h30m)")
	shiftBy := fs.Int64("shift-by", 0, "move the input topics' committed offsets by `n` (negative: back); without a commit, from the end")
	fs.StringVar(&o.stateDir, "state-dir", "", "delete the application's local state in `DIR` (its Config.StateDir, or the parent of <application.id>/)")
	fs.BoolVar(&o.dryRun, "dry-run", false, "print what would be done; change nothing")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), resetUsage)
		fs.PrintDefaults()
	}
	if help, err := parseFlags(fs, args, stderr); help || err != nil {
		return err
	}
	if o.app == "" {
		return usageError(fs, "-app is required")
	}
	o.input, o.intermediate, o.internal = splitList(*input), splitList(*intermediate), splitList(*internal)
	var modes []string
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "to-earliest", "to-latest", "to-offset", "to-datetime", "by-duration", "shift-by":
			modes = append(modes, "-"+f.Name)
		}
	})
	if len(modes) > 1 {
		return usageError(fs, "%s: give at most one of -to-earliest, -to-latest, -to-offset, -to-datetime, -by-duration, -shift-by", strings.Join(modes, " and "))
	}
	o.mode = "earliest"
	if len(modes) == 1 {
		o.mode = strings.TrimPrefix(strings.TrimPrefix(modes[0], "-to-"), "-")
	}
	switch o.mode {
	case "earliest":
		if !*toEarliest && len(modes) == 1 {
			return usageError(fs, "-to-earliest=false: give another reset option instead")
		}
	case "latest":
		if !*toLatest {
			return usageError(fs, "-to-latest=false: give another reset option instead")
		}
	case "offset":
		o.offset = *toOffset
	case "shift-by":
		o.mode, o.offset = "shift", *shiftBy
	case "datetime":
		t, err := parseDatetime(*toDatetime)
		if err != nil {
			return usageError(fs, "-to-datetime %q: want RFC 3339, as 2026-01-02T15:04:05Z or 2026-01-02T15:04:05.000+01:00 (local time without a zone)", *toDatetime)
		}
		o.at = t
	case "by-duration":
		if *byDuration <= 0 {
			return usageError(fs, "-by-duration %v: want a positive duration", *byDuration)
		}
		o.mode, o.at = "datetime", time.Now().Add(-*byDuration)
	}
	if o.mode != "earliest" && len(o.input) == 0 {
		return usageError(fs, "%s applies to -input-topics, and none is given", modes[0])
	}
	cl, adm, err := newAdmin(o.brokers)
	if err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	defer cl.Close()
	if err := reset(ctx, adm, o, stdout); err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	return nil
}

// parseDatetime parses an RFC 3339 time, or one without a zone (local time, as Kafka's
// tools read 2026-01-02T15:04:05.000).
func parseDatetime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	return time.ParseInLocation("2006-01-02T15:04:05.999999999", s, time.Local)
}

// waitDeleted waits until the deleted topics are gone from the metadata (a broker deletes
// them in the background), so that an application started right after the reset creates
// new ones instead of finding the old ones about to go.
func waitDeleted(ctx context.Context, adm *kadm.Client, topics []string) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		d, err := adm.ListTopics(ctx) // metadata cached at most 100ms (newAdmin)
		if err == nil {
			left := 0
			for _, t := range topics {
				if d.Has(t) {
					left++
				}
			}
			if left == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the deletion of %s: %w", strings.Join(topics, ", "), ctx.Err())
		case <-tick.C:
		}
	}
}

// reset resets application o.app, printing what it does to w.
func reset(ctx context.Context, adm *kadm.Client, o resetOptions, w io.Writer) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	if o.dryRun {
		fmt.Fprintln(w, "Dry run: nothing is changed; this is what a reset would do.")
	}

	// 1. No instance may run.
	groups, err := adm.DescribeGroups(ctx, o.app)
	if err != nil {
		return fmt.Errorf("describing group %q: %w", o.app, err)
	}
	g := groups[o.app]
	switch {
	case errors.Is(g.Err, kerr.GroupIDNotFound):
	case g.Err != nil:
		return fmt.Errorf("describing group %q: %w", o.app, g.Err)
	case len(g.Members) > 0:
		var ms []string
		for _, m := range g.Members {
			ms = append(ms, fmt.Sprintf("%s (client id %s, host %s)", m.MemberID, m.ClientID, m.ClientHost))
		}
		return fmt.Errorf("the consumer group %q of the application is still active (state %s) and has %d member(s): %s; stop every instance of the application before resetting it",
			o.app, g.State, len(g.Members), strings.Join(ms, ", "))
	}
	fmt.Fprintf(w, "Consumer group %s has no active member.\n", o.app)

	// 2. Offsets of the input and intermediate topics.
	all, err := adm.ListTopics(ctx)
	if err != nil {
		return fmt.Errorf("listing topics: %w", err)
	}
	var missing []string
	exists := func(topics []string) []string {
		var out []string
		for _, t := range topics {
			if d, ok := all[t]; ok && d.Err == nil {
				out = append(out, t)
			} else {
				missing = append(missing, t)
			}
		}
		return out
	}
	input, intermediate := exists(o.input), exists(o.intermediate)
	if len(missing) > 0 {
		fmt.Fprintf(w, "Topics not found, skipped: %s\n", strings.Join(missing, ", "))
	}
	if len(input)+len(intermediate) == 0 {
		fmt.Fprintln(w, "No input or intermediate topics: no offsets to reset.")
	} else if err := resetOffsets(ctx, adm, o, input, intermediate, w); err != nil {
		return err
	}

	// 3. Internal topics.
	var found []string
	for t := range all {
		if isInternalTopic(o.app, t) {
			found = append(found, t)
		}
	}
	slices.Sort(found)
	del := found
	if len(o.internal) > 0 {
		for _, t := range o.internal {
			if !slices.Contains(found, t) {
				return fmt.Errorf("-internal-topics: %q is not an internal topic of application %q (found: %s); run with -dry-run and without -internal-topics to list them", t, o.app, strings.Join(found, ", "))
			}
		}
		del = o.internal
	}
	if len(del) == 0 {
		fmt.Fprintln(w, "No internal topics to delete.")
	} else {
		fmt.Fprintln(w, "Deleting internal topics:")
		for _, t := range del {
			fmt.Fprintf(w, "  %s\n", t)
		}
		if !o.dryRun {
			resp, err := adm.DeleteTopics(ctx, del...)
			if err == nil {
				err = resp.Error()
			}
			if err != nil {
				return fmt.Errorf("deleting internal topics: %w", err)
			}
			if err := waitDeleted(ctx, adm, del); err != nil {
				return err
			}
		}
	}

	// 4. Local state.
	if o.stateDir != "" {
		if err := resetStateDir(o, w); err != nil {
			return err
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("topics not found: %s", strings.Join(missing, ", "))
	}
	fmt.Fprintln(w, "Done.")
	return nil
}

// resetOffsets commits the new offsets of the input and intermediate topics for the group.
func resetOffsets(ctx context.Context, adm *kadm.Client, o resetOptions, input, intermediate []string, w io.Writer) error {
	topics := append(slices.Clone(input), intermediate...)
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return fmt.Errorf("listing start offsets of %s: %w", strings.Join(topics, ", "), err)
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("listing end offsets of %s: %w", strings.Join(topics, ", "), err)
	}
	committed, err := adm.FetchOffsets(ctx, o.app)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return fmt.Errorf("fetching the committed offsets of group %q: %w", o.app, err)
	}
	var byTime kadm.ListedOffsets
	if o.mode == "datetime" && len(input) > 0 {
		byTime, err = adm.ListOffsetsAfterMilli(ctx, o.at.UnixMilli(), input...)
		if err == nil {
			err = byTime.Error()
		}
		if err != nil {
			return fmt.Errorf("listing offsets at %s of %s: %w", o.at.Format(time.RFC3339Nano), strings.Join(input, ", "), err)
		}
	}

	offsets := kadm.Offsets{}
	line := func(topic string, p int32, old string, to int64, note string) {
		fmt.Fprintf(w, "  %s partition %d: %s -> %d%s\n", topic, p, old, to, note)
		offsets.Add(kadm.Offset{Topic: topic, Partition: p, At: to, LeaderEpoch: -1})
	}
	set := func(topics []string, target func(topic string, p int32, start, end, old int64) (int64, string)) {
		for _, t := range topics {
			var ps []int32
			for p := range ends[t] {
				ps = append(ps, p)
			}
			slices.Sort(ps)
			for _, p := range ps {
				start, end := starts[t][p].Offset, ends[t][p].Offset
				old, oldS := int64(-1), "none"
				if c, ok := committed.Lookup(t, p); ok && c.Err == nil && c.At >= 0 {
					old, oldS = c.At, strconv.FormatInt(c.At, 10)
				}
				to, note := target(t, p, start, end, old)
				switch {
				case to < start:
					to, note = start, fmt.Sprintf(" (%d is before the partition's start)", to)
				case to > end:
					to, note = end, fmt.Sprintf(" (%d is past the partition's end)", to)
				}
				line(t, p, oldS, to, note)
			}
		}
	}
	if len(input) > 0 {
		what := map[string]string{"earliest": "the earliest offset", "latest": "the end", "offset": fmt.Sprintf("offset %d", o.offset),
			"datetime": "the first offset at or after " + o.at.UTC().Format(time.RFC3339Nano), "shift": fmt.Sprintf("the committed offset shifted by %d", o.offset)}[o.mode]
		fmt.Fprintf(w, "Input topic offsets of group %s, reset to %s:\n", o.app, what)
		set(input, func(topic string, p int32, start, end, old int64) (int64, string) {
			switch o.mode {
			case "latest":
				return end, ""
			case "offset":
				return o.offset, ""
			case "datetime":
				if l, ok := byTime.Lookup(topic, p); ok && l.Err == nil && l.Offset >= 0 {
					return l.Offset, ""
				}
				return end, " (no record at or after the time: the end)"
			case "shift":
				if old < 0 {
					return end + o.offset, " (no committed offset: shifted from the end)"
				}
				return old + o.offset, ""
			}
			return start, ""
		})
	}
	if len(intermediate) > 0 {
		fmt.Fprintf(w, "Intermediate topic offsets of group %s, set to the end:\n", o.app)
		set(intermediate, func(_ string, _ int32, _, end, _ int64) (int64, string) { return end, "" })
	}
	if o.dryRun {
		return nil
	}
	resp, err := adm.CommitOffsets(ctx, o.app, offsets)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("committing the new offsets of group %q: %w", o.app, err)
	}
	return nil
}

// resetStateDir deletes the application's local state under o.stateDir.
func resetStateDir(o resetOptions, w io.Writer) error {
	dir, err := appStateDir(o.stateDir, o.app)
	if err != nil {
		return err
	}
	if dir == "" {
		fmt.Fprintf(w, "No local state of application %s in %s.\n", o.app, o.stateDir)
		return nil
	}
	fmt.Fprintf(w, "Deleting the local state directory %s\n", dir)
	if o.dryRun {
		return nil
	}
	if _, err := runtime.RemoveStateDir(dir); err != nil {
		return err
	}
	return nil
}

// appStateDir returns the state directory of application app in dir: dir itself when it
// is the application's (its Config.StateDir), else dir/<app> when it exists; "" when
// there is none. It fails when dir is another application's state directory.
func appStateDir(dir, app string) (string, error) {
	owner, ok, err := runtime.StateDirApplicationID(dir)
	if err != nil {
		return "", err
	}
	if ok {
		if owner != app {
			return "", fmt.Errorf("-state-dir %s is the state directory of application %q, not of %q: not deleting it", dir, owner, app)
		}
		return dir, nil
	}
	sub := filepath.Join(dir, app)
	if owner, ok, err := runtime.StateDirApplicationID(sub); err != nil {
		return "", err
	} else if ok && owner != app {
		return "", fmt.Errorf("%s is the state directory of application %q, not of %q: not deleting it", sub, owner, app)
	}
	if fi, err := os.Stat(sub); err == nil && fi.IsDir() {
		return sub, nil
	}
	return "", nil
}
