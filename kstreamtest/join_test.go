package kstreamtest_test

import (
	"slices"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/kstreamtest"
	"github.com/kstream-go/kstream/serde"
)

// Stream-table joins, record by record: table updates and deletes change what later stream
// records see, and never emit by themselves.
func TestStreamTableJoin(t *testing.T) {
	b := kstream.NewBuilder()
	users := kstream.Table(b, "users", serde.String(), serde.Nullable(serde.String()), "users-store")
	clicks := kstream.Stream(b, "clicks", serde.String(), serde.String())
	kstream.Join(clicks, users, func(_ string, page string, name *string) string { return *name + "@" + page }).
		To("inner", serde.String(), serde.String())
	kstream.LeftJoin(clicks, users, func(_ string, page string, name *string, found bool) string {
		if !found {
			return "anonymous@" + page
		}
		return *name + "@" + page
	}).To("left", serde.String(), serde.String())
	d, err := kstreamtest.New(b, kstream.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	u := kstreamtest.CreateInputTopic(d, "users", serde.String(), serde.Nullable(serde.String()))
	c := kstreamtest.CreateInputTopic(d, "clicks", serde.String(), serde.String(), kstreamtest.AutoAdvance(time.Second))
	name := func(s string) *string { return &s }
	steps := []func() error{
		func() error { return c.Pipe("u1", "home") },        // no user yet
		func() error { return u.Pipe("u1", name("ann")) },   // table update: no output
		func() error { return c.Pipe("u1", "cart") },        // ann
		func() error { return u.Pipe("u1", name("annie")) }, // update
		func() error { return c.Pipe("u1", "pay") },         // annie
		func() error { return u.Pipe("u1", nil) },           // delete
		func() error { return c.Pipe("u1", "bye") },         // gone again
		func() error { return c.Pipe("u2", "home") },        // never known
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	inner, _ := kstreamtest.CreateOutputTopic(d, "inner", serde.String(), serde.String()).ReadValues()
	left, _ := kstreamtest.CreateOutputTopic(d, "left", serde.String(), serde.String()).ReadValues()
	if want := []string{"ann@cart", "annie@pay"}; !slices.Equal(inner, want) {
		t.Errorf("inner join: %v, want %v", inner, want)
	}
	if want := []string{"anonymous@home", "ann@cart", "annie@pay", "anonymous@bye", "anonymous@home"}; !slices.Equal(left, want) {
		t.Errorf("left join: %v, want %v", left, want)
	}
	st, err := kstreamtest.KeyValueStore(d, "users-store", 0, serde.String(), serde.Nullable(serde.String()))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := st.Get("u1"); ok {
		t.Error("deleted key still in the table's store")
	}
}
