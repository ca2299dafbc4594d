package serde_test

import (
	"encoding/hex"
	"math"
	"testing"
	"time"

	"github.com/kstream-go/kstream/serde"
)

// The expected bytes and strings below are Kafka Streams 4.4's: TimeWindowedSerializer,
// TimeWindowedDeserializer, SessionWindowedSerializer and Windowed.toString, as printed by
// store/testdata/windowjava/WindowGolden.java (store/testdata/window_golden.txt).

func TestTimeWindowedJavaBytes(t *testing.T) {
	for _, c := range []struct {
		key         string
		start, size int64
		hex, str    string
	}{
		{"hello", 1700000000000, 60000, "68656c6c6f0000018bcfe56800", "[hello@1700000000000/1700000060000]"},
		{"\x00", 0, 1, "000000000000000000", "[\x00@0/1]"},
		{"ü", 5, 10, "c3bc0000000000000005", "[ü@5/15]"},
	} {
		s := serde.TimeWindowed(serde.String(), time.Duration(c.size)*time.Millisecond)
		b, err := s.Serialize(serde.WindowedMs(c.key, c.start, c.start+c.size))
		if err != nil || hex.EncodeToString(b) != c.hex {
			t.Errorf("Serialize(%q@%d) = %x, %v; want %s", c.key, c.start, b, err, c.hex)
		}
		w, err := s.Deserialize(b)
		if err != nil || w.String() != c.str {
			t.Errorf("Deserialize(%s) = %s, %v; want %s", c.hex, w, err, c.str)
		}
	}
	for _, c := range []struct {
		key         int64
		start, size int64
		hex         string
	}{
		{42, 5000, 1000, "000000000000002a0000000000001388"},
		{-1, 0, 100, "ffffffffffffffff0000000000000000"},
	} {
		b, err := serde.TimeWindowed(serde.Int64(), 0).Serialize(serde.WindowedMs(c.key, c.start, c.start+c.size))
		if err != nil || hex.EncodeToString(b) != c.hex {
			t.Errorf("Serialize(%d@%d) = %x, %v; want %s", c.key, c.start, b, err, c.hex)
		}
	}
	// Deserialization computes the end from the size, Long.MAX_VALUE past the end of time.
	for _, c := range []struct {
		hex  string
		size int64
		str  string
	}{
		{"6b7fffffffffffff00", 10, "[k@9223372036854775552/9223372036854775562]"},
		{"00000000000000000000", 7, "[\x00\x00@0/7]"},
		// Not Java's: a window starting at Long.MAX_VALUE is empty, which Java's TimeWindow
		// rejects; kstream returns it.
		{"6b7fffffffffffffff", 10, "[k@9223372036854775807/9223372036854775807]"},
	} {
		b, _ := hex.DecodeString(c.hex)
		w, err := serde.TimeWindowed(serde.String(), time.Duration(c.size)*time.Millisecond).Deserialize(b)
		if err != nil || w.String() != c.str {
			t.Errorf("Deserialize(%s) = %s, %v; want %s", c.hex, w, err, c.str)
		}
	}
	if got := serde.TimeWindowEnd(math.MaxInt64-5, 10*time.Millisecond); got != math.MaxInt64 {
		t.Errorf("TimeWindowEnd overflowing = %d", got)
	}
}

func TestSessionWindowedJavaBytes(t *testing.T) {
	for _, c := range []struct {
		key        string
		start, end int64
		hex, str   string
	}{
		{"user", 1000, 2000, "7573657200000000000007d000000000000003e8", "[user@1000/2000]"},
		{"a", 0, 0, "6100000000000000000000000000000000", "[a@0/0]"},
		{"\x00\x01", 9223372036854775000, 9223372036854775807, "00017fffffffffffffff7ffffffffffffcd8", "[\x00\x01@9223372036854775000/9223372036854775807]"},
	} {
		s := serde.SessionWindowed(serde.String())
		b, err := s.Serialize(serde.WindowedMs(c.key, c.start, c.end))
		if err != nil || hex.EncodeToString(b) != c.hex {
			t.Errorf("Serialize(%q@%d/%d) = %x, %v; want %s", c.key, c.start, c.end, b, err, c.hex)
		}
		w, err := s.Deserialize(b)
		if err != nil || w.String() != c.str {
			t.Errorf("Deserialize(%s) = %s, %v; want %s", c.hex, w, err, c.str)
		}
	}
	for _, c := range []struct {
		key, start, end int64
		hex             string
	}{
		{7, 0, 0, "000000000000000700000000000000000000000000000000"},
		{-5, 100, 200, "fffffffffffffffb00000000000000c80000000000000064"},
	} {
		b, err := serde.SessionWindowed(serde.Int64()).Serialize(serde.WindowedMs(c.key, c.start, c.end))
		if err != nil || hex.EncodeToString(b) != c.hex {
			t.Errorf("Serialize(%d@%d/%d) = %x, %v; want %s", c.key, c.start, c.end, b, err, c.hex)
		}
	}
}

func TestWindowedSerdeEdges(t *testing.T) {
	ts := serde.TimeWindowed(serde.String(), time.Second)
	ss := serde.SessionWindowed(serde.String())
	// Nil bytes: the zero value, as every serde of the package.
	if w, err := ts.Deserialize(nil); err != nil || w != (serde.Windowed[string]{}) {
		t.Errorf("TimeWindowed Deserialize(nil) = %v, %v", w, err)
	}
	if w, err := ss.Deserialize(nil); err != nil || w != (serde.Windowed[string]{}) {
		t.Errorf("SessionWindowed Deserialize(nil) = %v, %v", w, err)
	}
	// Too short.
	if _, err := ts.Deserialize(make([]byte, 7)); err == nil {
		t.Error("TimeWindowed Deserialize of 7 bytes succeeded")
	}
	if _, err := ss.Deserialize(make([]byte, 15)); err == nil {
		t.Error("SessionWindowed Deserialize of 15 bytes succeeded")
	}
	// The inner serde's errors go through.
	if _, err := ts.Deserialize([]byte{0xff, 0, 0, 0, 0, 0, 0, 0, 0}); err == nil {
		t.Error("TimeWindowed Deserialize of invalid UTF-8 succeeded")
	}
	// A null inner key is written as empty bytes.
	b, err := serde.TimeWindowed(serde.Nullable(serde.String()), time.Second).Serialize(serde.WindowedMs[*string](nil, 3, 4))
	if err != nil || hex.EncodeToString(b) != "0000000000000003" {
		t.Errorf("Serialize of a null key = %x, %v", b, err)
	}
	// Round trip of a time window, and the accessors.
	w := serde.Windowed[string]{Key: "k", Start: time.UnixMilli(1000), End: time.UnixMilli(2000)}
	b, _ = ts.Serialize(w)
	got, err := ts.Deserialize(b)
	if err != nil || got.Key != "k" || !got.Start.Equal(w.Start) || !got.End.Equal(w.End) || got.StartMs() != 1000 || got.EndMs() != 2000 {
		t.Errorf("round trip = %v, %v", got, err)
	}
}
