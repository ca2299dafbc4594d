package pebble

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kstream-go/kstream/store"
)

// scan reads [from, to) of b, forward or in reverse, as "key=value" strings.
func scan(t *testing.T, b store.Backend, from, to []byte, reverse bool) []string {
	t.Helper()
	var it store.Iterator
	var err error
	if reverse {
		it, err = b.ReverseRange(from, to)
	} else {
		it, err = b.Range(from, to)
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for it.Next() {
		out = append(out, string(it.Key())+"="+string(it.Value()))
	}
	if err := errors.Join(it.Err(), it.Close()); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestIteratorReuse checks that scans, which reuse a backend's Pebble iterator while its
// namespace is not written, always see the namespace as it is: after every kind of write
// through this backend or another backend of the same namespace, with scans left open,
// abandoned half way or exhausted, and that the writes of another namespace change nothing.
func TestIteratorReuse(t *testing.T) {
	d := mustOpenFS(t, vfs.NewMem(), quietOptions(false))
	defer d.Close()
	open := func(name string) store.Backend {
		b, err := d.Open(name, 0)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b, twin, other := open("s"), open("s"), open("other")
	model := map[string]string{}
	r := rand.New(rand.NewPCG(1, 2))
	key := func() []byte { return fmt.Appendf(nil, "k%02d", r.IntN(40)) }
	want := func(from, to []byte, reverse bool) []string {
		var out []string
		for _, k := range slices.Sorted(maps.Keys(model)) {
			if (from == nil || k >= string(from)) && (to == nil || k < string(to)) {
				out = append(out, k+"="+model[k])
			}
		}
		if reverse {
			slices.Reverse(out)
		}
		return out
	}
	var held []store.Iterator // scans left open while others run and writes happen
	for step := range 3000 {
		w := b
		if r.IntN(4) == 0 {
			w = twin
		}
		switch op := r.IntN(20); {
		case op < 4:
			k, v := key(), fmt.Sprintf("v%d", step)
			if err := w.Set(k, []byte(v)); err != nil {
				t.Fatal(err)
			}
			model[string(k)] = v
		case op < 5:
			k := key()
			if err := w.Delete(k); err != nil {
				t.Fatal(err)
			}
			delete(model, string(k))
		case op < 6:
			from, to := key(), key()
			if err := w.DeleteRange(from, to); err != nil {
				t.Fatal(err)
			}
			for k := range model {
				if k >= string(from) && k < string(to) {
					delete(model, k)
				}
			}
		case op < 7:
			bt := w.NewBatch()
			k, v := key(), fmt.Sprintf("b%d", step)
			bt.Set(k, []byte(v))
			bt.SetCheckpoint(int64(step))
			if err := bt.Commit(); err != nil {
				t.Fatal(err)
			}
			model[string(k)] = v
		case op < 8:
			if err := other.Set(key(), []byte("x")); err != nil {
				t.Fatal(err)
			}
		case op < 9:
			it, err := b.Range(nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			it.Next()
			held = append(held, it)
		case op < 10 && len(held) > 0:
			if err := held[0].Close(); err != nil {
				t.Fatal(err)
			}
			held = held[1:]
		case op < 11:
			// A scan abandoned after its first entry.
			it, err := b.Range(key(), nil)
			if err != nil {
				t.Fatal(err)
			}
			it.Next()
			if err := it.Close(); err != nil {
				t.Fatal(err)
			}
		default:
			from, to := key(), key()
			if r.IntN(4) == 0 {
				from = nil
			}
			if r.IntN(4) == 0 {
				to = nil
			}
			reverse := r.IntN(3) == 0
			if got, w := scan(t, b, from, to, reverse), want(from, to, reverse); !slices.Equal(got, w) {
				t.Fatalf("step %d: scan [%q, %q) reverse=%v:\n got %q\nwant %q", step, from, to, reverse, got, w)
			}
		}
	}
	for _, it := range held {
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestIteratorReuseClose checks that closing the DB closes the Pebble iterator a backend
// keeps for reuse, and that scans then fail with store.ErrClosed.
func TestIteratorReuseClose(t *testing.T) {
	d := mustOpenFS(t, vfs.NewMem(), quietOptions(false))
	b, err := d.Open("s", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Set([]byte("a"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	if got := scan(t, b, nil, nil, false); !slices.Equal(got, []string{"a=1"}) {
		t.Fatalf("scan = %q", got)
	}
	d.iters.Lock()
	idle := len(d.iters.idle)
	d.iters.Unlock()
	if idle != 1 {
		t.Fatalf("%d backends keep an idle iterator after a scan; want 1", idle)
	}
	if err := d.Close(); err != nil { // Pebble reports iterators left open as an error
		t.Fatal(err)
	}
	if _, err := b.Range(nil, nil); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Range after Close: %v; want ErrClosed", err)
	}
}
