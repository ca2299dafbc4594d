// Package serde converts typed keys and values to and from the bytes stored in Kafka.
//
// The built-in serdes are byte-identical to the serdes shipped with Apache Kafka's Java client
// (StringSerde, ByteArraySerde, IntegerSerde, LongSerde, DoubleSerde), so Go and Java
// applications can share topics.
//
// # Nil bytes (null keys and tombstones)
//
// Kafka distinguishes a null key or value (no bytes at all) from an empty one. A Go value type
// such as string or int64 has no null, so the rules are:
//
//   - Deserialize(nil) returns the zero value of T and no error, for every serde in this package.
//     Java's deserializers return null for null bytes; the zero value is the closest Go has.
//   - To keep the difference between "absent" and "zero", use a pointer type with [Nullable]
//     (or [JSON] with a pointer type): nil bytes become a nil pointer, and a nil pointer
//     serializes to nil bytes, which Kafka stores as a null (a tombstone for a value).
//   - [Bytes] maps nil to nil and empty to empty, exactly as Java's ByteArraySerde does.
//
// All serdes in this package are safe for concurrent use.
package serde

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"unicode/utf8"
)

// Serde serializes and deserializes values of type T.
//
// Implementations must be safe for concurrent use: one serde value serves every task of an
// application. Deserialize must not keep a reference to its input after it returns, because
// the runtime may reuse the buffer; Serialize may return a slice that it does not reuse.
type Serde[T any] interface {
	// Serialize encodes v. A nil result is a Kafka null.
	Serialize(v T) ([]byte, error)
	// Deserialize decodes b. b is nil for a Kafka null.
	Deserialize(b []byte) (T, error)
}

// ErrUnavailable is matched (with errors.Is) by the errors of a serde that could not reach a
// service it needs: the Schema Registry serdes' registry.ErrRegistryUnavailable, once their
// retries are spent. It is weather, not bad input, and kstream does not give such a record to
// the error handlers (it is neither skipped nor dead-lettered): the task fails with the
// error, nothing after the last commit is committed, and the record is processed again
// when the application runs again. A serde of one's own that calls a service may wrap it
// for the same treatment.
var ErrUnavailable = errors.New("serde: a service the serde needs is unavailable")

// Funcs builds a Serde from two functions.
func Funcs[T any](ser func(T) ([]byte, error), de func([]byte) (T, error)) Serde[T] {
	return funcSerde[T]{ser: ser, de: de}
}

type funcSerde[T any] struct {
	ser func(T) ([]byte, error)
	de  func([]byte) (T, error)
}

func (f funcSerde[T]) Serialize(v T) ([]byte, error)   { return f.ser(v) }
func (f funcSerde[T]) Deserialize(b []byte) (T, error) { return f.de(b) }

// String returns a UTF-8 string serde, byte-identical to Java's StringSerde.
// Serialize("") is an empty, non-null value; Deserialize(nil) is "".
// Deserialize rejects bytes that are not valid UTF-8.
func String() Serde[string] { return stringSerde{} }

type stringSerde struct{}

func (stringSerde) Serialize(v string) ([]byte, error) { return []byte(v), nil }

// AppendSerialize appends Serialize's bytes to dst (kstream's stores and aggregations
// serialize so, into buffers they reuse).
func (stringSerde) AppendSerialize(dst []byte, v string) ([]byte, bool, error) {
	return append(dst, v...), false, nil
}

func (stringSerde) Deserialize(b []byte) (string, error) {
	if !utf8.Valid(b) {
		return "", fmt.Errorf("serde: string: %d bytes are not valid UTF-8", len(b))
	}
	return string(b), nil
}

// Bytes returns a serde that passes bytes through, like Java's ByteArraySerde. Nil stays nil.
// Deserialize copies its input, so the result stays valid after the record is released.
func Bytes() Serde[[]byte] { return bytesSerde{} }

type bytesSerde struct{}

func (bytesSerde) Serialize(v []byte) ([]byte, error) { return v, nil }
func (bytesSerde) Deserialize(b []byte) ([]byte, error) {
	if b == nil {
		return nil, nil
	}
	return append(make([]byte, 0, len(b)), b...), nil
}

// Int32 returns a 4-byte big-endian serde, byte-identical to Java's IntegerSerde.
func Int32() Serde[int32] { return int32Serde{} }

type int32Serde struct{}

func (int32Serde) Serialize(v int32) ([]byte, error) {
	return binary.BigEndian.AppendUint32(make([]byte, 0, 4), uint32(v)), nil
}

// AppendSerialize appends Serialize's bytes to dst.
func (int32Serde) AppendSerialize(dst []byte, v int32) ([]byte, bool, error) {
	return binary.BigEndian.AppendUint32(dst, uint32(v)), false, nil
}

func (int32Serde) Deserialize(b []byte) (int32, error) {
	if b == nil {
		return 0, nil
	}
	if len(b) != 4 {
		return 0, fmt.Errorf("serde: int32: got %d bytes, want 4", len(b))
	}
	return int32(binary.BigEndian.Uint32(b)), nil
}

// Int64 returns an 8-byte big-endian serde, byte-identical to Java's LongSerde.
func Int64() Serde[int64] { return int64Serde{} }

type int64Serde struct{}

func (int64Serde) Serialize(v int64) ([]byte, error) {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), uint64(v)), nil
}

// AppendSerialize appends Serialize's bytes to dst.
func (int64Serde) AppendSerialize(dst []byte, v int64) ([]byte, bool, error) {
	return binary.BigEndian.AppendUint64(dst, uint64(v)), false, nil
}

func (int64Serde) Deserialize(b []byte) (int64, error) {
	if b == nil {
		return 0, nil
	}
	if len(b) != 8 {
		return 0, fmt.Errorf("serde: int64: got %d bytes, want 8", len(b))
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

// Float64 returns an 8-byte IEEE 754 big-endian serde, byte-identical to Java's DoubleSerde
// (Double.doubleToLongBits; NaN is written as Java's canonical NaN 0x7ff8000000000000).
func Float64() Serde[float64] { return float64Serde{} }

type float64Serde struct{}

func (float64Serde) Serialize(v float64) ([]byte, error) {
	bits := math.Float64bits(v)
	if v != v { // NaN: Java's doubleToLongBits collapses every NaN to one value.
		bits = 0x7ff8000000000000
	}
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), bits), nil
}
func (float64Serde) Deserialize(b []byte) (float64, error) {
	if b == nil {
		return 0, nil
	}
	if len(b) != 8 {
		return 0, fmt.Errorf("serde: float64: got %d bytes, want 8", len(b))
	}
	return math.Float64frombits(binary.BigEndian.Uint64(b)), nil
}

// JSON returns a serde that encodes T with encoding/json.
//
// If T is a pointer, map, slice or interface type, a nil value serializes to nil bytes (a Kafka
// null, not the text "null"), and nil bytes deserialize to a nil value. For other types, nil
// bytes deserialize to the zero value of T.
func JSON[T any]() Serde[T] {
	nilable := false
	switch reflect.TypeFor[T]().Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Interface:
		nilable = true
	}
	return jsonSerde[T]{nilable: nilable}
}

type jsonSerde[T any] struct{ nilable bool }

func (s jsonSerde[T]) Serialize(v T) ([]byte, error) {
	if s.nilable && reflect.ValueOf(&v).Elem().IsNil() {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("serde: json: %w", err)
	}
	return b, nil
}

func (s jsonSerde[T]) Deserialize(b []byte) (T, error) {
	var v T
	if b == nil {
		return v, nil
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("serde: json: %w", err)
	}
	return v, nil
}

// Nullable wraps s so that a nil *T is a Kafka null and nil bytes decode to a nil *T.
// Use it to carry tombstones through a pipeline with a value type that has no nil, for
// example Nullable(String()) or Nullable(Int64()).
func Nullable[T any](s Serde[T]) Serde[*T] { return nullable[T]{s} }

type nullable[T any] struct{ inner Serde[T] }

func (n nullable[T]) Serialize(v *T) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	b, err := n.inner.Serialize(*v)
	if err == nil && b == nil {
		b = []byte{} // a present value must not turn into a null
	}
	return b, err
}

func (n nullable[T]) Deserialize(b []byte) (*T, error) {
	if b == nil {
		return nil, nil
	}
	v, err := n.inner.Deserialize(b)
	if err != nil {
		return nil, err
	}
	return &v, nil
}
