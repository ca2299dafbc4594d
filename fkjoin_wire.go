package kstream

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
)

// The wire formats of Kafka Streams' foreign-key join (package
// org.apache.kafka.streams.kstream.internals.foreignkeyjoin), byte for byte, so that a Go and
// a Java application running the same topology can share its internal topics and changelog.

// fkInstruction is SubscriptionWrapper.Instruction: what the right side does with a
// subscription. The values are the bytes Java writes.
type fkInstruction byte

const (
	// fkDeleteNoPropagate removes the subscription and sends no response (the old foreign
	// key of a row whose foreign key changed).
	fkDeleteNoPropagate fkInstruction = 0
	// fkDeleteAndPropagate removes the subscription and responds with a null value, so
	// that the result row is deleted.
	fkDeleteAndPropagate fkInstruction = 1
	// fkPropagateNullIfNoFK stores the subscription and always responds, with a null value
	// when the right table has no row for the foreign key.
	fkPropagateNullIfNoFK fkInstruction = 2
	// fkPropagateOnlyIfFK stores the subscription and responds only when the right table
	// has a row for the foreign key.
	fkPropagateOnlyIfFK fkInstruction = 3
)

func (i fkInstruction) String() string {
	switch i {
	case fkDeleteNoPropagate:
		return "DELETE_KEY_NO_PROPAGATE"
	case fkDeleteAndPropagate:
		return "DELETE_KEY_AND_PROPAGATE"
	case fkPropagateNullIfNoFK:
		return "PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE"
	case fkPropagateOnlyIfFK:
		return "PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE"
	}
	return fmt.Sprintf("instruction(%d)", byte(i))
}

// fkSubscriptionVersion is SubscriptionWrapper.CURRENT_VERSION: version 1 carries the
// primary partition.
const fkSubscriptionVersion = 1

// fkResponseVersion is SubscriptionResponseWrapper.CURRENT_VERSION.
const fkResponseVersion = 0

// fkHash is the 128-bit murmur3 hash of a serialized left value (Java's long[2]). Where
// Java's hash may be null (the left row was deleted), it goes with a hasHash flag, so that
// decoding allocates nothing for it.
type fkHash [2]uint64

// fkSubscription is SubscriptionWrapper: a left row's subscription to a foreign key. The
// primary key stays serialized: the right side only hands it back.
type fkSubscription struct {
	version byte
	// hash is the left value's hash when hasHash, else Java's null.
	hash        fkHash
	hasHash     bool
	instruction fkInstruction
	pk          []byte
	// partition is the left record's partition (version 1; -1 when absent, version 0).
	partition int32
}

// encodeFKSubscription is SubscriptionWrapperSerde's serializer:
// {1 bit hash-is-null}{7 bits version}{instruction}{16-byte hash, if any}{primary key}
// {4-byte primary partition, version 1}.
func encodeFKSubscription(s fkSubscription) ([]byte, error) {
	if s.version > 0x7f {
		return nil, fmt.Errorf("kstream: SubscriptionWrapper version %d is larger than 0x7F", s.version)
	}
	if s.version > fkSubscriptionVersion {
		return nil, fmt.Errorf("kstream: unsupported SubscriptionWrapper version %d", s.version)
	}
	n := 2 + len(s.pk)
	if s.hasHash {
		n += 16
	}
	if s.version >= 1 {
		n += 4
	}
	b := make([]byte, 0, n)
	if s.hasHash {
		b = append(b, s.version)
	} else {
		b = append(b, s.version|0x80)
	}
	b = append(b, byte(s.instruction))
	if s.hasHash {
		b = binary.BigEndian.AppendUint64(b, s.hash[0])
		b = binary.BigEndian.AppendUint64(b, s.hash[1])
	}
	b = append(b, s.pk...)
	if s.version >= 1 {
		b = binary.BigEndian.AppendUint32(b, uint32(s.partition))
	}
	return b, nil
}

// decodeFKSubscription is SubscriptionWrapperSerde's deserializer.
func decodeFKSubscription(b []byte) (fkSubscription, error) {
	var s fkSubscription
	if len(b) < 2 {
		return s, fmt.Errorf("kstream: SubscriptionWrapper of %d bytes, fewer than 2", len(b))
	}
	s.version = b[0] & 0x7f
	hashNull := b[0]&0x80 != 0
	s.instruction = fkInstruction(b[1])
	if s.instruction > fkPropagateOnlyIfFK {
		return s, fmt.Errorf("kstream: SubscriptionWrapper with unknown instruction %d", b[1])
	}
	rest := b[2:]
	if !hashNull {
		if len(rest) < 16 {
			return s, errors.New("kstream: SubscriptionWrapper too short for its hash")
		}
		s.hash, s.hasHash = fkHash{binary.BigEndian.Uint64(rest), binary.BigEndian.Uint64(rest[8:])}, true
		rest = rest[16:]
	}
	s.partition = -1
	if s.version > 0 {
		if len(rest) < 4 {
			return s, errors.New("kstream: SubscriptionWrapper too short for its primary partition")
		}
		s.partition = int32(binary.BigEndian.Uint32(rest[len(rest)-4:]))
		rest = rest[:len(rest)-4]
	}
	s.pk = rest
	return s, nil
}

// fkResponse is SubscriptionResponseWrapper: the right side's answer to a subscription,
// keyed by the primary key. partition is not on the wire: it is where the response goes.
type fkResponse struct {
	version byte
	// hash is the hash of the subscription answered when hasHash, else Java's null.
	hash    fkHash
	hasHash bool
	value   []byte // the serialized right value; nil for null
	// partition is the subscription's primary partition, or -1.
	partition int32
}

// encodeFKResponse is SubscriptionResponseWrapperSerde's serializer:
// {1 bit hash-is-null}{7 bits version}{16-byte hash, if any}{right value, if any}.
func encodeFKResponse(r fkResponse) []byte {
	n := 1 + len(r.value)
	if r.hasHash {
		n += 16
	}
	b := make([]byte, 0, n)
	if r.hasHash {
		b = append(b, r.version)
		b = binary.BigEndian.AppendUint64(b, r.hash[0])
		b = binary.BigEndian.AppendUint64(b, r.hash[1])
	} else {
		b = append(b, r.version|0x80)
	}
	return append(b, r.value...)
}

// decodeFKResponse is SubscriptionResponseWrapperSerde's deserializer. An empty value is a
// null one, as in Java.
func decodeFKResponse(b []byte) (fkResponse, error) {
	r := fkResponse{partition: -1}
	if len(b) < 1 {
		return r, errors.New("kstream: empty SubscriptionResponseWrapper")
	}
	r.version = b[0] & 0x7f
	rest := b[1:]
	if b[0]&0x80 == 0 {
		if len(rest) < 16 {
			return r, errors.New("kstream: SubscriptionResponseWrapper too short for its hash")
		}
		r.hash, r.hasHash = fkHash{binary.BigEndian.Uint64(rest), binary.BigEndian.Uint64(rest[8:])}, true
		rest = rest[16:]
	}
	if len(rest) > 0 {
		r.value = rest
	}
	return r, nil
}

// fkCombinedKey is CombinedKeySchema.toBytes: {4-byte foreign key length}{foreign key}
// {primary key}, the key of the subscription store. With pk nil it is prefixBytes, the
// prefix of every subscription to fk.
func fkCombinedKey(fk, pk []byte) []byte {
	return appendFKCombinedKey(make([]byte, 0, 4+len(fk)+len(pk)), fk, pk)
}

// appendFKCombinedKey appends fkCombinedKey(fk, pk) to b.
func appendFKCombinedKey(b, fk, pk []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(fk)))
	b = append(b, fk...)
	return append(b, pk...)
}

// splitFKCombinedKey is CombinedKeySchema.fromBytes, leaving both keys serialized.
func splitFKCombinedKey(b []byte) (fk, pk []byte, err error) {
	if len(b) < 4 {
		return nil, nil, fmt.Errorf("kstream: combined key of %d bytes, fewer than 4", len(b))
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-4) {
		return nil, nil, fmt.Errorf("kstream: combined key with a foreign key of %d bytes in %d", n, len(b)-4)
	}
	return b[4 : 4+n], b[4+n:], nil
}

// murmur3Seed is Kafka Streams' Murmur3.DEFAULT_SEED.
const murmur3Seed = 104729

// murmur3Hash128 is Kafka Streams' Murmur3.hash128(byte[]): MurmurHash3 x64 128 with seed
// 104729, returning Java's {h1, h2}.
func murmur3Hash128(data []byte) fkHash {
	const (
		c1 = 0x87c37b91114253d5
		c2 = 0x4cf5ad432745937f
	)
	h1, h2 := uint64(murmur3Seed), uint64(murmur3Seed)
	n := len(data)
	nblocks := n / 16
	for i := range nblocks {
		k1 := binary.LittleEndian.Uint64(data[i*16:])
		k2 := binary.LittleEndian.Uint64(data[i*16+8:])
		k1 *= c1
		k1 = bits.RotateLeft64(k1, 31)
		k1 *= c2
		h1 ^= k1
		h1 = bits.RotateLeft64(h1, 27)
		h1 += h2
		h1 = h1*5 + 0x52dce729
		k2 *= c2
		k2 = bits.RotateLeft64(k2, 33)
		k2 *= c1
		h2 ^= k2
		h2 = bits.RotateLeft64(h2, 31)
		h2 += h1
		h2 = h2*5 + 0x38495ab5
	}
	tail := data[nblocks*16:]
	var k1, k2 uint64
	for i := len(tail) - 1; i >= 8; i-- {
		k2 ^= uint64(tail[i]) << (8 * (i - 8))
	}
	if len(tail) > 8 {
		k2 *= c2
		k2 = bits.RotateLeft64(k2, 33)
		k2 *= c1
		h2 ^= k2
	}
	for i := min(len(tail), 8) - 1; i >= 0; i-- {
		k1 ^= uint64(tail[i]) << (8 * i)
	}
	if len(tail) > 0 {
		k1 *= c1
		k1 = bits.RotateLeft64(k1, 31)
		k1 *= c2
		h1 ^= k1
	}
	h1 ^= uint64(n)
	h2 ^= uint64(n)
	h1 += h2
	h2 += h1
	h1 = fmix64(h1)
	h2 = fmix64(h2)
	h1 += h2
	h2 += h1
	return fkHash{h1, h2}
}

func fmix64(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}
