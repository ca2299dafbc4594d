package kstream_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/store"
)

// pageViews is a processor that counts each user's page views per minute in a window
// store and forwards, for each view, the user's counts of the last three minutes, newest
// first.
type pageViews struct {
	views *store.WindowStore[string, int64]
}

func (p *pageViews) Init(ctx kstream.ProcessorContext[string, string]) error {
	var err error
	p.views, err = kstream.GetWindowStore[string, int64](ctx, "views")
	return err
}

func (p *pageViews) Process(ctx kstream.ProcessorContext[string, string], r kstream.Record[string, string]) error {
	minute := r.Timestamp.Truncate(time.Minute)
	n, _, err := p.views.Fetch(r.Key, minute)
	if err != nil {
		return err
	}
	if err := p.views.Put(r.Key, n+1, minute); err != nil {
		return err
	}
	it, err := p.views.BackwardFetchRange(r.Key, minute.Add(-2*time.Minute), minute)
	if err != nil {
		return err
	}
	defer it.Close()
	out := ""
	for it.Next() {
		out += fmt.Sprintf(" %s:%d", it.Key().Start.UTC().Format("15:04"), it.Value())
	}
	ctx.Forward(kstream.Record[string, string]{Key: r.Key, Value: out})
	return it.Err()
}

// A window store for the Processor API: views per user and minute, kept for an hour.
func ExampleWindowStore() {
	b := kstream.NewBuilder()
	views := kstream.WindowStore("views", serde.String(), serde.Int64(), time.Hour, time.Minute)
	s := kstream.Stream(b, "page-views", serde.String(), serde.String())
	kstream.Process(s, func() kstream.Processor[string, string, string, string] { return &pageViews{} },
		kstream.WithStores(views)).To("recent-views", serde.String(), serde.String())

	d, err := kstreamtest.New(b, kstream.Config{ApplicationID: "views"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	in := kstreamtest.CreateInputTopic(d, "page-views", serde.String(), serde.String())
	out := kstreamtest.CreateOutputTopic(d, "recent-views", serde.String(), serde.String())
	t0 := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, m := range []int{0, 0, 1, 3, 3, 3} {
		_ = in.PipeAt("alice", "/home", t0.Add(time.Duration(m)*time.Minute+time.Second))
	}
	values, _ := out.ReadValues()
	for _, v := range values {
		fmt.Println("alice" + v)
	}
	// Output:
	// alice 12:00:1
	// alice 12:00:2
	// alice 12:01:1 12:00:2
	// alice 12:03:1 12:01:1
	// alice 12:03:2 12:01:1
	// alice 12:03:3 12:01:1
}

// A session store for the Processor API: each user's activity sessions, which a record
// within five minutes of a session extends (merging the sessions it bridges).
func ExampleSessionStore() {
	const gap = 5 * time.Minute
	b := kstream.NewBuilder()
	sessions := kstream.SessionStore("sessions", serde.String(), serde.Int64(), time.Hour)
	s := kstream.Stream(b, "clicks", serde.String(), serde.String())
	kstream.Process(s, func() kstream.Processor[string, string, string, string] {
		return kstream.ProcessorFunc[string, string, string, string](func(ctx kstream.ProcessorContext[string, string], r kstream.Record[string, string]) error {
			ss, err := kstream.GetSessionStore[string, int64](ctx, "sessions")
			if err != nil {
				return err
			}
			// The sessions this click joins: those ending at or after it minus the gap and
			// starting at or before it plus the gap.
			it, err := ss.FindSessions(r.Key, r.Timestamp.Add(-gap), r.Timestamp.Add(gap))
			if err != nil {
				return err
			}
			merged := serde.Windowed[string]{Key: r.Key, Start: r.Timestamp, End: r.Timestamp}
			clicks := int64(1)
			var old []serde.Windowed[string]
			for it.Next() {
				w := it.Key()
				old = append(old, w)
				clicks += it.Value()
				if w.Start.Before(merged.Start) {
					merged.Start = w.Start
				}
				if w.End.After(merged.End) {
					merged.End = w.End
				}
			}
			if err := errors.Join(it.Err(), it.Close()); err != nil {
				return err
			}
			for _, w := range old {
				if err := ss.Remove(w); err != nil {
					return err
				}
			}
			ctx.Forward(kstream.Record[string, string]{Key: r.Key,
				Value: fmt.Sprintf("%s-%s: %d clicks", merged.Start.UTC().Format("15:04"), merged.End.UTC().Format("15:04"), clicks)})
			return ss.Put(merged, clicks)
		})
	}, kstream.WithStores(sessions)).To("sessions-out", serde.String(), serde.String())

	d, err := kstreamtest.New(b, kstream.Config{ApplicationID: "sessions"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	in := kstreamtest.CreateInputTopic(d, "clicks", serde.String(), serde.String())
	out := kstreamtest.CreateOutputTopic(d, "sessions-out", serde.String(), serde.String())
	t0 := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, m := range []int{0, 3, 20, 16, 12, 8} { // 8 bridges 3 and 12
		_ = in.PipeAt("bob", "click", t0.Add(time.Duration(m)*time.Minute))
	}
	values, _ := out.ReadValues()
	for _, v := range values {
		fmt.Println(v)
	}
	// Output:
	// 12:00-12:00: 1 clicks
	// 12:00-12:03: 2 clicks
	// 12:20-12:20: 1 clicks
	// 12:16-12:20: 2 clicks
	// 12:12-12:20: 3 clicks
	// 12:00-12:20: 6 clicks
}
