package store_test

import (
	"fmt"
	"time"

	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/store"
	"github.com/kstream-go/kstream/store/memory"
)

func ExampleWindowStore() {
	db := memory.New()
	defer db.Close()
	b, err := db.Open("clicks-per-minute", 0)
	if err != nil {
		panic(err)
	}
	// One-minute windows kept for ten minutes of stream time.
	w, err := store.NewWindowStore("clicks-per-minute", b, serde.String(), serde.Int64(),
		store.WindowOptions{Retention: 10 * time.Minute, WindowSize: time.Minute})
	if err != nil {
		panic(err)
	}
	minute := func(m int64) time.Time { return time.UnixMilli(m * 60_000) }
	for m, n := range []int64{3, 5, 2} {
		if err := w.Put("alice", n, minute(int64(m))); err != nil {
			panic(err)
		}
	}
	// Stream time moves to minute 11: the windows starting at or before minute 1 (11 - 10)
	// have expired.
	if err := w.Put("alice", 7, minute(11)); err != nil {
		panic(err)
	}
	it, err := w.FetchRange("alice", minute(0), minute(20))
	if err != nil {
		panic(err)
	}
	defer it.Close()
	for it.Next() {
		fmt.Println(it.Key(), it.Value())
	}
	if err := it.Err(); err != nil {
		panic(err)
	}
	// Output:
	// [alice@120000/180000] 2
	// [alice@660000/720000] 7
}

func ExampleSessionStore() {
	db := memory.New()
	defer db.Close()
	b, err := db.Open("sessions", 0)
	if err != nil {
		panic(err)
	}
	s, err := store.NewSessionStore("sessions", b, serde.String(), serde.Int64(),
		store.SessionOptions{Retention: time.Hour})
	if err != nil {
		panic(err)
	}
	if err := s.Put(serde.WindowedMs("alice", 1_000, 4_000), 2); err != nil {
		panic(err)
	}
	if err := s.Put(serde.WindowedMs("alice", 20_000, 20_000), 1); err != nil {
		panic(err)
	}
	// A record of alice at 6 s with an inactivity gap of 5 s merges with the sessions that
	// end at or after 1 s and start at or before 11 s.
	it, err := s.FindSessions("alice", time.UnixMilli(1_000), time.UnixMilli(11_000))
	if err != nil {
		panic(err)
	}
	defer it.Close()
	for it.Next() {
		fmt.Println(it.Key(), it.Value())
	}
	if err := it.Err(); err != nil {
		panic(err)
	}
	// Output:
	// [alice@1000/4000] 2
}
