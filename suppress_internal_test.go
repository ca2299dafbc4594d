package kstream

import (
	"testing"
	"time"
	"unsafe"

	"github.com/kstream-go/kstream/serde"
)

// The suppression reads the window end of a serde.Windowed key in place, at the offset
// windowEndOffset finds, instead of through the windowEnder interface: both must agree,
// whatever the inner key type's size; other types have no offset.
func TestWindowEndOffset(t *testing.T) {
	check := func(name string, off int, key any, ptr unsafe.Pointer) {
		t.Helper()
		if off < 0 {
			t.Fatalf("%s: no offset", name)
		}
		got := (*time.Time)(unsafe.Add(ptr, off)).UnixMilli()
		if want := key.(windowEnder).EndMs(); got != want {
			t.Fatalf("%s: end %d read in place, %d through EndMs", name, got, want)
		}
	}
	ks := serde.WindowedMs("key", 1000, 61000)
	check("string key", windowEndOffset[serde.Windowed[string]](), ks, unsafe.Pointer(&ks))
	type big struct {
		a, b int64
		c    [3]byte
	}
	kb := serde.WindowedMs(big{1, 2, [3]byte{3}}, 5, 17)
	check("struct key", windowEndOffset[serde.Windowed[big]](), kb, unsafe.Pointer(&kb))
	kz := serde.WindowedMs(struct{}{}, 0, 9)
	check("empty key", windowEndOffset[serde.Windowed[struct{}]](), kz, unsafe.Pointer(&kz))
	if off := windowEndOffset[string](); off != -1 {
		t.Fatalf("string: offset %d, want -1", off)
	}
	type Windowed struct{ End time.Time } // not serde's
	if off := windowEndOffset[Windowed](); off != -1 {
		t.Fatalf("another Windowed: offset %d, want -1", off)
	}
}
