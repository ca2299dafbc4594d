package kstreamtest_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
)

// Testing a topology without a broker.
func Example() {
	b := kstream.NewBuilder()
	words := kstream.Stream(b, "words", serde.String(), serde.String())
	kstream.MapValues(words.Filter(func(_, w string) bool { return len(w) > 2 }), strings.ToUpper).
		To("shouts", nil, serde.String())

	d, err := kstreamtest.New(b, kstream.Config{ApplicationID: "shouter"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	in := kstreamtest.CreateInputTopic(d, "words", serde.String(), serde.String())
	out := kstreamtest.CreateOutputTopic(d, "shouts", serde.String(), serde.String())
	for _, w := range []string{"go", "kafka", "streams"} {
		if err := in.Pipe("k", w); err != nil {
			fmt.Println(err)
		}
	}
	values, _ := out.ReadValues()
	fmt.Println(values)
	// Output: [KAFKA STREAMS]
}

// Timestamps: explicit ones, or a start time that advances with each record.
func ExampleAutoAdvance() {
	b := kstream.NewBuilder()
	kstream.Stream(b, "in", serde.String(), serde.Int64()).To("out", nil, nil)
	d, _ := kstreamtest.New(b, kstream.Config{})
	defer d.Close()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	in := kstreamtest.CreateInputTopic(d, "in", serde.String(), serde.Int64(),
		kstreamtest.StartTime(start), kstreamtest.AutoAdvance(time.Second))
	_ = in.Pipe("a", 1)
	_ = in.Pipe("a", 2)
	_ = in.PipeAt("a", 3, start.Add(time.Hour))
	recs, _ := kstreamtest.CreateOutputTopic(d, "out", serde.String(), serde.Int64()).ReadRecords()
	for _, r := range recs {
		fmt.Println(r.Key, r.Value, r.Timestamp.Format(time.TimeOnly), r.Offset)
	}
	// Output:
	// a 1 00:00:00 0
	// a 2 00:00:01 1
	// a 3 01:00:00 2
}

// A record that cannot be decoded, under the default LogAndFail handler.
func ExampleInputTopic_PipeRaw() {
	b := kstream.NewBuilder()
	kstream.Stream(b, "numbers", serde.String(), serde.Int64()).To("out", nil, nil)
	d, _ := kstreamtest.New(b, kstream.Config{})
	defer d.Close()
	in := kstreamtest.CreateInputTopic(d, "numbers", serde.String(), serde.Int64())
	err := in.PipeRaw([]byte("k"), []byte("not a number"), time.Time{})
	fmt.Println(err)
	// Output: kstream: deserialization error in operator KSTREAM-SOURCE-0000000000 at topic "numbers" partition 0 offset 0: value: serde: int64: got 12 bytes, want 8 (Config.DeserializationErrorHandler is LogAndFail, the default: set it to kstream.LogAndContinue() to skip such a record, or to kstream.DeadLetterQueue(topic) to write it to a dead-letter topic)
}
