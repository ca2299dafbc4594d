package pebble

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Key layout of the single Pebble keyspace that holds every namespace:
//
//	0x00 0x00                                 -> layout version (1 byte: layoutVersion)
//	0x00 0x01 <partition uint32 BE> <name>    -> namespace id (uint32 BE)
//	0x00 0x02 <id uint32 BE>                  -> checkpoint (int64 BE two's complement)
//	0x01 <id uint32 BE> <user key>            -> user value
//
// The metadata keyspace (first byte 0x00) sorts before all data. Namespace ids start at 1,
// are allocated in order and are never reused, and a dropped namespace keeps its id (so
// backends opened before Drop stay valid). The partition is fixed-width and comes before
// the name, so (name, partition) pairs such as ("a", 11) and ("a1", 1) cannot collide
// whatever bytes the name holds. A namespace's data is the span
// [0x01 <id>, successor(0x01 <id>)), which Drop deletes with one range deletion.
const (
	metaPrefix = 0x00
	dataPrefix = 0x01

	metaVersion    = 0x00
	metaNamespace  = 0x01
	metaCheckpoint = 0x02

	layoutVersion = 1

	// dataPrefixLen is the length of a data key's namespace prefix.
	dataPrefixLen = 1 + 4
)

var (
	versionKey       = []byte{metaPrefix, metaVersion}
	namespaceKeysLow = []byte{metaPrefix, metaNamespace}
	namespaceKeysEnd = []byte{metaPrefix, metaNamespace + 1}
)

// namespaceKey is the registry key of (name, partition).
func namespaceKey(name string, partition int32) []byte {
	k := make([]byte, 0, 2+4+len(name))
	k = append(k, metaPrefix, metaNamespace)
	k = binary.BigEndian.AppendUint32(k, uint32(partition))
	return append(k, name...)
}

// parseNamespaceKey is the inverse of namespaceKey.
func parseNamespaceKey(k []byte) (name string, partition int32, err error) {
	if len(k) < 6 || k[0] != metaPrefix || k[1] != metaNamespace {
		return "", 0, fmt.Errorf("malformed namespace key %x", k)
	}
	return string(k[6:]), int32(binary.BigEndian.Uint32(k[2:6])), nil
}

func checkpointKey(id uint32) []byte {
	k := make([]byte, 0, 6)
	k = append(k, metaPrefix, metaCheckpoint)
	return binary.BigEndian.AppendUint32(k, id)
}

func dataKeyPrefix(id uint32) [dataPrefixLen]byte {
	var p [dataPrefixLen]byte
	p[0] = dataPrefix
	binary.BigEndian.PutUint32(p[1:], id)
	return p
}

func encodeID(id uint32) []byte { return binary.BigEndian.AppendUint32(nil, id) }

func decodeID(v []byte) (uint32, error) {
	if len(v) != 4 {
		return 0, fmt.Errorf("malformed namespace id %x", v)
	}
	return binary.BigEndian.Uint32(v), nil
}

func encodeCheckpoint(offset int64) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(offset))
}

func decodeCheckpoint(v []byte) (int64, error) {
	if len(v) != 8 {
		return 0, fmt.Errorf("malformed checkpoint %x", v)
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

// errNoSuccessor is returned by successor for an empty or all-0xff key.
var errNoSuccessor = errors.New("no successor")

// successor returns the smallest key greater than every key that starts with p: p with its
// last non-0xff byte incremented and the bytes after it removed.
func successor(p []byte) ([]byte, error) {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] != 0xff {
			end := append([]byte(nil), p[:i+1]...)
			end[i]++
			return end, nil
		}
	}
	return nil, errNoSuccessor
}
