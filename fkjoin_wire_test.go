package kstream

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"testing"
)

// The expected bytes below were printed by Kafka Streams 4.4.0 itself:
// testing/conformance/src/main/java/conformance/FkJoinWire.java, run with
//
//	cd testing/conformance && mvn -q compile dependency:copy-dependencies &&
//	java -cp "target/classes:target/lib/*" conformance.FkJoinWire
//
// (Murmur3.hash128, SubscriptionWrapperSerde, SubscriptionResponseWrapperSerde and
// CombinedKeySchema.toBytes, with String serdes).

func TestMurmur3Hash128MatchesJava(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "9d2764a018e32942 8c3cf3b035938518"},
		{"a", "3361634e7e0f5188 e9c7dda24eae326b"},
		{"order-1", "8302596bee13c726 86fa7a1659f479d5"},
		{"0123456789abcde", "c480e6b5c0016979 a0d033624a7f7904"},
		{"0123456789abcdef", "1a6e941ec6a76967 d7d82808f505d6b1"},
		{"0123456789abcdef0", "85e3069a748c16b6 bc8c0a283538abb8"},
		{"0123456789abcdef01234567", "e13ff250f601258e d9762f3819b1066a"},
		{"customer-42|widget|x", "1149ebcbce0ba895 5a953255a27ccb4e"},
		{"order-value", "e327d8b0491e9b37 1a7d2fccc941a9f6"},
	} {
		h := murmur3Hash128([]byte(c.in))
		if got := fmt.Sprintf("%016x %016x", h[0], h[1]); got != c.want {
			t.Errorf("hash128(%q) = %s, want %s (Java)", c.in, got, c.want)
		}
	}
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFKSubscriptionWireMatchesJava(t *testing.T) {
	h := murmur3Hash128([]byte("order-value"))
	cases := []struct {
		instr    fkInstruction
		withHash string // hash of "order-value", pk "o1", partition 3
		noHash   string // null hash, pk "o1", partition 0
	}{
		{fkDeleteNoPropagate, "0100e327d8b0491e9b371a7d2fccc941a9f66f3100000003", "81006f3100000000"},
		{fkDeleteAndPropagate, "0101e327d8b0491e9b371a7d2fccc941a9f66f3100000003", "81016f3100000000"},
		{fkPropagateNullIfNoFK, "0102e327d8b0491e9b371a7d2fccc941a9f66f3100000003", "81026f3100000000"},
		{fkPropagateOnlyIfFK, "0103e327d8b0491e9b371a7d2fccc941a9f66f3100000003", "81036f3100000000"},
	}
	for _, c := range cases {
		for _, v := range []struct {
			s    fkSubscription
			want string
		}{
			{fkSubscription{version: 1, hash: h, hasHash: true, instruction: c.instr, pk: []byte("o1"), partition: 3}, c.withHash},
			{fkSubscription{version: 1, instruction: c.instr, pk: []byte("o1"), partition: 0}, c.noHash},
		} {
			got, err := encodeFKSubscription(v.s)
			if err != nil {
				t.Fatal(err)
			}
			if want := unhex(t, v.want); !bytes.Equal(got, want) {
				t.Errorf("%s: encoded %x, want %x (Java)", c.instr, got, want)
			}
			back, err := decodeFKSubscription(got)
			if err != nil {
				t.Fatal(err)
			}
			if back.instruction != c.instr || back.version != 1 || !bytes.Equal(back.pk, []byte("o1")) || back.partition != v.s.partition ||
				back.hasHash != v.s.hasHash || (back.hasHash && back.hash != h) {
				t.Errorf("%s: decoded %+v, want %+v", c.instr, back, v.s)
			}
		}
	}
	// Version 0 (written by applications upgraded from before 3.4): no primary partition.
	v0, err := encodeFKSubscription(fkSubscription{version: 0, instruction: fkPropagateOnlyIfFK, pk: []byte("o1")})
	if err != nil {
		t.Fatal(err)
	}
	if want := unhex(t, "80036f31"); !bytes.Equal(v0, want) {
		t.Errorf("version 0: %x, want %x", v0, want)
	}
	if back, err := decodeFKSubscription(v0); err != nil || back.partition != -1 || string(back.pk) != "o1" {
		t.Errorf("version 0 decoded %+v, %v", back, err)
	}
	if _, err := decodeFKSubscription([]byte{0x01}); err == nil {
		t.Error("a one-byte subscription decoded without error")
	}
	if _, err := decodeFKSubscription([]byte{0x01, 0x02, 0x03}); err == nil {
		t.Error("a subscription too short for its hash decoded without error")
	}
}

func TestFKResponseWireMatchesJava(t *testing.T) {
	h := murmur3Hash128([]byte("order-value"))
	for _, c := range []struct {
		r    fkResponse
		want string
	}{
		{fkResponse{hash: h, hasHash: true, value: []byte("c1")}, "00e327d8b0491e9b371a7d2fccc941a9f66331"},
		{fkResponse{hash: h, hasHash: true}, "00e327d8b0491e9b371a7d2fccc941a9f6"},
		{fkResponse{value: []byte("c1")}, "806331"},
		{fkResponse{}, "80"},
	} {
		got := encodeFKResponse(c.r)
		if want := unhex(t, c.want); !bytes.Equal(got, want) {
			t.Errorf("encoded %x, want %x (Java)", got, want)
		}
		back, err := decodeFKResponse(got)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(back.value, c.r.value) || (back.value == nil) != (c.r.value == nil) || back.hasHash != c.r.hasHash || back.hash != c.r.hash {
			t.Errorf("decoded %+v, want %+v", back, c.r)
		}
	}
}

func TestFKCombinedKeyMatchesJava(t *testing.T) {
	got := fkCombinedKey([]byte("cust-7"), []byte("order-19"))
	if want := unhex(t, "00000006637573742d376f726465722d3139"); !bytes.Equal(got, want) {
		t.Fatalf("combined key %x, want %x (Java)", got, want)
	}
	fk, pk, err := splitFKCombinedKey(got)
	if err != nil || string(fk) != "cust-7" || string(pk) != "order-19" {
		t.Fatalf("split: %q %q %v", fk, pk, err)
	}
	if prefix := fkCombinedKey([]byte("cust-7"), nil); !bytes.HasPrefix(got, prefix) || len(prefix) != 10 {
		t.Fatalf("prefix %x", prefix)
	}
	if _, _, err := splitFKCombinedKey([]byte{0, 0, 0, 9, 'a'}); err == nil {
		t.Fatal("a combined key with a too-long foreign key split without error")
	}
}
