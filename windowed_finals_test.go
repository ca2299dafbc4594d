package kstream_test

import (
	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/serde"
)

// windowFinals returns the final results of a windowed count: the table itself when it
// emits on window close ("close"), else its suppression until the windows close.
func windowFinals(counts kstream.KTable[serde.Windowed[string], int64], emit string) kstream.KTable[serde.Windowed[string], int64] {
	if emit == "close" {
		return counts
	}
	return counts.Suppress(kstream.UntilWindowCloses(kstream.Unbounded()))
}
