package registry

import (
	"encoding/binary"
	"fmt"
	"math"
)

// HeaderLen is the length of the Confluent wire format's header: the magic byte 0 and the
// schema id as a 4-byte big-endian integer.
const HeaderLen = 5

// AppendHeader appends the Confluent wire format's header for schema id to dst: the magic
// byte 0 and the 4-byte big-endian id.
func AppendHeader(dst []byte, id int) []byte {
	return binary.BigEndian.AppendUint32(append(dst, 0), uint32(id))
}

// SplitHeader splits a payload in the Confluent wire format into its schema id and the
// bytes after the header. It fails with an error wrapping ErrNoMagicByte if b is shorter
// than the header or does not start with the magic byte 0.
func SplitHeader(b []byte) (id int, rest []byte, err error) {
	if len(b) < HeaderLen || b[0] != 0 {
		n := min(len(b), HeaderLen)
		return 0, nil, fmt.Errorf("%w (got %d bytes starting % x)", ErrNoMagicByte, len(b), b[:n])
	}
	u := binary.BigEndian.Uint32(b[1:HeaderLen])
	if u == 0 || u > math.MaxInt32 {
		return 0, nil, fmt.Errorf("%w (schema id %d is not a registry id)", ErrNoMagicByte, u)
	}
	return int(u), b[HeaderLen:], nil
}
