package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/twmb/franz-go/pkg/kgo"
)

const dlqUsage = `Usage: kstream dlq replay -brokers host:port -topic <dead-letter topic> [flags]

Reads the records of a dead-letter topic (written by kstream.DeadLetterQueue or a handler
answering kstream.DeadLetter) and sends each back to the topic it failed from, named by
its header __streams.errors.topic, as it was: same key, value, timestamp and headers,
without the error headers (__streams.errors.* and kstream.error.*), into the partition it
was read from (__streams.errors.partition). With -to, every record goes to that topic
instead, partitioned by key. A record without a source topic (a production error of a
record a punctuator emitted) is skipped unless -to is given.

Filters select the records: -kind (deserialization, processing, production),
-source-topic, -partition, -from-offset and -to-offset (offsets in the dead-letter
topic, both included), -since (record timestamp) and -limit (the first N selected
records). The command reads each partition up to its end at the start (committed records
only) and prints, per record, what it did; -dry-run prints only.

Run the fixed application before replaying: a record that fails again is dead-lettered
again.

Flags:
`

// dlqReplayOptions are the parsed flags of kstream dlq replay.
type dlqReplayOptions struct {
	brokers, topic, to string
	kinds, sources     []string
	partition          int
	from, until        int64 // dead-letter offsets, both included; until -1: to the end
	since              time.Time
	limit              int
	dryRun             bool
	// idle bounds the wait for records that the listed end offsets say exist.
	idle time.Duration
}

// runDLQ implements "kstream dlq".
func runDLQ(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "replay" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help") {
			return runDLQReplay(ctx, []string{"-h"}, stdout, stdout)
		}
		fmt.Fprint(stderr, "Usage: kstream dlq replay [flags]\n\nThe only dlq command is replay; run 'kstream help dlq' for its flags.\n")
		return errUsage
	}
	return runDLQReplay(ctx, args[1:], stdout, stderr)
}

// runDLQReplay implements "kstream dlq replay".
func runDLQReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("dlq replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := dlqReplayOptions{idle: 10 * time.Second}
	fs.StringVar(&o.brokers, "brokers", "127.0.0.1:9092", "comma-separated `host:port` seed brokers")
	fs.StringVar(&o.topic, "topic", "", "the dead-letter `topic` to read")
	fs.StringVar(&o.to, "to", "", "send every record to `topic` (partitioned by key) instead of its source topic")
	kinds := fs.String("kind", "", "replay only these comma-separated error `kinds`: deserialization, processing, production")
	sources := fs.String("source-topic", "", "replay only records that failed from these comma-separated `topics`")
	fs.IntVar(&o.partition, "partition", -1, "read only this `partition` of the dead-letter topic")
	fs.Int64Var(&o.from, "from-offset", 0, "first dead-letter `offset` to read (in each partition read)")
	fs.Int64Var(&o.until, "to-offset", -1, "last dead-letter `offset` to read, included; -1: to the end")
	since := fs.String("since", "", "replay only records with a timestamp at or after `time`: RFC 3339 (2026-01-02T15:04:05Z) or a duration before now (2h)")
	fs.IntVar(&o.limit, "limit", 0, "replay at most `n` records; 0: no limit")
	fs.BoolVar(&o.dryRun, "dry-run", false, "print what would be replayed; send nothing")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), dlqUsage)
		fs.PrintDefaults()
	}
	if help, err := parseFlags(fs, args, stderr); help || err != nil {
		return err
	}
	if o.topic == "" {
		return usageError(fs, "-topic is required")
	}
	o.kinds, o.sources = splitList(*kinds), splitList(*sources)
	for _, k := range o.kinds {
		if k != "deserialization" && k != "processing" && k != "production" {
			return usageError(fs, "-kind %q: want deserialization, processing or production", k)
		}
	}
	if *since != "" {
		if d, err := time.ParseDuration(*since); err == nil {
			o.since = time.Now().Add(-d)
		} else if t, err := time.Parse(time.RFC3339Nano, *since); err == nil {
			o.since = t
		} else {
			return usageError(fs, "-since %q: want RFC 3339 (2026-01-02T15:04:05Z) or a duration (2h)", *since)
		}
	}
	if o.from < 0 || o.limit < 0 {
		return usageError(fs, "-from-offset and -limit must not be negative")
	}
	if err := dlqReplay(ctx, o, stdout); err != nil {
		return fmt.Errorf("dlq replay: %w", err)
	}
	return nil
}

// dlqRecord is what a dead-letter record says about its failure.
type dlqRecord struct {
	kind, operator, message string
	topic                   string
	partition               int32
	offset                  int64
	headers                 []kgo.RecordHeader // the record's own headers
}

// parseDLQRecord reads the error headers of a dead-letter record.
func parseDLQRecord(r *kgo.Record) dlqRecord {
	d := dlqRecord{partition: -1, offset: -1}
	for _, h := range r.Headers {
		v := string(h.Value)
		switch h.Key {
		case kstream.HeaderErrorKind:
			d.kind = v
		case kstream.HeaderErrorOperator:
			d.operator = v
		case kstream.HeaderErrorMessage:
			d.message = v
		case kstream.HeaderErrorTopic:
			d.topic = v
		case kstream.HeaderErrorPartition:
			if p, err := strconv.ParseInt(v, 10, 32); err == nil {
				d.partition = int32(p)
			}
		case kstream.HeaderErrorOffset:
			if off, err := strconv.ParseInt(v, 10, 64); err == nil {
				d.offset = off
			}
		}
		if !strings.HasPrefix(h.Key, "__streams.errors.") && !strings.HasPrefix(h.Key, "kstream.error.") {
			d.headers = append(d.headers, h)
		}
	}
	return d
}

// skipReason returns why o's filters skip record r (d its headers), or "".
func (o dlqReplayOptions) skipReason(r *kgo.Record, d dlqRecord) string {
	switch {
	case len(o.kinds) > 0 && !slices.Contains(o.kinds, d.kind):
		return fmt.Sprintf("kind %q not selected", d.kind)
	case len(o.sources) > 0 && !slices.Contains(o.sources, d.topic):
		return fmt.Sprintf("source topic %q not selected", d.topic)
	case !o.since.IsZero() && r.Timestamp.Before(o.since):
		return "timestamp " + r.Timestamp.UTC().Format(time.RFC3339Nano) + " before -since"
	case o.to == "" && d.topic == "":
		return "no source topic (a record a punctuator emitted); give -to"
	case o.to == "" && d.partition < 0:
		return "no source partition header"
	}
	return ""
}

// dlqReplay replays the dead-letter records o selects, printing what it does to w.
func dlqReplay(ctx context.Context, o dlqReplayOptions, w io.Writer) error {
	cl, adm, err := newAdmin(o.brokers)
	if err != nil {
		return err
	}
	defer cl.Close()
	lctx, cancel := withTimeout(ctx)
	defer cancel()
	starts, err := adm.ListStartOffsets(lctx, o.topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return fmt.Errorf("listing the start offsets of %s: %w", o.topic, err)
	}
	ends, err := adm.ListEndOffsets(lctx, o.topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("listing the end offsets of %s: %w", o.topic, err)
	}
	// What to read: [from, end) per partition.
	read := map[int32]kgo.Offset{}
	stop := map[int32]int64{} // partition -> first offset not to read
	for p, end := range ends[o.topic] {
		if o.partition >= 0 && p != int32(o.partition) {
			continue
		}
		from := max(o.from, starts[o.topic][p].Offset)
		until := end.Offset
		if o.until >= 0 {
			until = min(until, o.until+1)
		}
		if from < until {
			read[p], stop[p] = kgo.NewOffset().At(from), until
		}
	}
	if o.partition >= 0 {
		if _, ok := ends[o.topic][int32(o.partition)]; !ok {
			return fmt.Errorf("topic %s has no partition %d", o.topic, o.partition)
		}
	}
	if o.dryRun {
		fmt.Fprintln(w, "Dry run: nothing is sent.")
	}
	replayed, skipped := 0, 0
	defer func() {
		verb := "replayed"
		if o.dryRun {
			verb = "would replay"
		}
		fmt.Fprintf(w, "%s %d record(s), skipped %d.\n", verb, replayed, skipped)
	}()
	if len(read) == 0 {
		return nil
	}

	consumer, err := newClient(o.brokers,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{o.topic: read}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(), // so that the last offset is seen when it is a transaction marker
	)
	if err != nil {
		return err
	}
	defer consumer.Close()
	var producer *kgo.Client
	if !o.dryRun {
		part := kgo.ManualPartitioner()
		if o.to != "" {
			part = kgo.StickyKeyPartitioner(nil) // the default: by key
		}
		if producer, err = newClient(o.brokers, kgo.RecordPartitioner(part)); err != nil {
			return err
		}
		defer producer.Close()
	}

	for len(stop) > 0 {
		pctx, cancel := context.WithTimeout(ctx, o.idle)
		fetches := consumer.PollFetches(pctx)
		cancel()
		if err := ctx.Err(); err != nil {
			return err
		}
		var errs []error
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				errs = append(errs, fmt.Errorf("reading %s partition %d: %w", t, p, err))
			}
		})
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
		if fetches.NumRecords() == 0 {
			var left []string
			for p := range stop {
				left = append(left, strconv.Itoa(int(p)))
			}
			slices.Sort(left)
			return fmt.Errorf("%s: no record for %v from partition(s) %s before their end offsets", o.topic, o.idle, strings.Join(left, ", "))
		}
		var batch []*kgo.Record
		var lines []string
		fetches.EachRecord(func(r *kgo.Record) {
			end, ok := stop[r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			if r.Offset >= end-1 {
				delete(stop, r.Partition)
			}
			if r.Attrs.IsControl() {
				return
			}
			if o.limit > 0 && replayed+len(batch) >= o.limit {
				clear(stop)
				return
			}
			d := parseDLQRecord(r)
			where := fmt.Sprintf("%s/%d@%d", r.Topic, r.Partition, r.Offset)
			if why := o.skipReason(r, d); why != "" {
				skipped++
				fmt.Fprintf(w, "skip   %s: %s\n", where, why)
				return
			}
			out := &kgo.Record{Topic: d.topic, Partition: d.partition, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp, Headers: d.headers}
			if o.to != "" {
				out.Topic, out.Partition = o.to, 0
			}
			batch = append(batch, out)
			lines = append(lines, fmt.Sprintf("%s: %s error at %s/%d@%d (operator %s), key %q, timestamp %s", where, d.kind, d.topic, d.partition, d.offset,
				d.operator, r.Key, r.Timestamp.UTC().Format(time.RFC3339Nano)))
		})
		if o.dryRun {
			for i, l := range lines {
				fmt.Fprintf(w, "would  %s -> %s\n", l, target(batch[i], o.to != ""))
			}
			replayed += len(batch)
			continue
		}
		if len(batch) == 0 {
			continue
		}
		pctx, cancel = withTimeout(ctx)
		results := producer.ProduceSync(pctx, batch...)
		cancel()
		for i, res := range results {
			if res.Err != nil {
				return fmt.Errorf("replaying %s to %s: %w", lines[i], target(batch[i], o.to != ""), res.Err)
			}
			replayed++
			fmt.Fprintf(w, "replay %s -> %s/%d@%d\n", lines[i], res.Record.Topic, res.Record.Partition, res.Record.Offset)
		}
	}
	return nil
}

// target names where r goes: its topic, and its partition unless partitioned by key.
func target(r *kgo.Record, byKey bool) string {
	if byKey {
		return r.Topic
	}
	return fmt.Sprintf("%s/%d", r.Topic, r.Partition)
}
