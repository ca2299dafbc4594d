package query

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/kstream-go/kstream"
)

// Entry is one key of a store, or one window of a window or session store, as the server
// renders it: key and value as JSON (or base64 of their serialized bytes with format=raw),
// the value's timestamp (Unix ms, -1 if the store keeps none), the partition it was read
// from, whether it was read from a standby replica, and that replica's changelog position.
// Start and End (Unix ms) are set for windows and sessions only.
type Entry struct {
	Key       json.RawMessage `json:"key"`
	Value     json.RawMessage `json:"value"`
	Timestamp int64           `json:"timestamp"`
	Start     *int64          `json:"start,omitempty"`
	End       *int64          `json:"end,omitempty"`
	Partition int32           `json:"partition"`
	Standby   bool            `json:"standby"`
	Position  int64           `json:"position"`
	// RawKey is the serialized key; only the answers of one instance to another carry it,
	// to merge by.
	RawKey []byte `json:"raw_key,omitempty"`
}

// Page is an answer of a scan: entries in order and, when there are more, the cursor to
// pass to get the next page.
type Page struct {
	Entries []Entry `json:"entries"`
	Cursor  string  `json:"cursor,omitempty"`
}

// BatchRequest is the body of a multi-get.
type BatchRequest struct {
	Keys []json.RawMessage `json:"keys"`
}

// BatchResult is one key of a multi-get answer: Found says whether the key is present;
// ServedBy is the instance that read it.
type BatchResult struct {
	Entry
	Found    bool   `json:"found"`
	ServedBy string `json:"served_by,omitempty"`
}

// BatchResponse is the answer of a multi-get, one result per requested key, in request
// order.
type BatchResponse struct {
	Results []BatchResult `json:"results"`
}

// CountResponse is the answer of /count.
type CountResponse struct {
	Count int64 `json:"count"`
}

// StoreDescription describes a queryable store: its name, kind ("key-value", "window",
// "session", "versioned") and partition count.
type StoreDescription struct {
	Name       string `json:"name"`
	Kind       string `json:"kind"`
	Partitions int32  `json:"partitions"`
}

// StoresResponse is the answer of /v1/stores.
type StoresResponse struct {
	Stores []StoreDescription `json:"stores"`
}

// Instance describes one instance of the application: its ApplicationServer (Host), and
// per store the partitions it runs (Stores) and keeps standby replicas of (Standbys).
type Instance struct {
	Host     string             `json:"host"`
	MemberID string             `json:"member_id"`
	Self     bool               `json:"self"`
	Stores   map[string][]int32 `json:"stores"`
	Standbys map[string][]int32 `json:"standbys"`
}

// MetadataResponse is the answer of /v1/metadata: every instance as of the last
// rebalance, and the queryable stores.
type MetadataResponse struct {
	Instances []Instance         `json:"instances"`
	Stores    []StoreDescription `json:"stores"`
}

// KeyOwner is the answer of /v1/stores/{store}/owner: where a key lives.
type KeyOwner struct {
	Partition int32    `json:"partition"`
	Active    string   `json:"active"`
	Standbys  []string `json:"standbys"`
}

// render renders serialized bytes as JSON, or as a base64 JSON string when raw.
func render(b []byte, raw bool, toJSON func([]byte) (json.RawMessage, error)) (json.RawMessage, error) {
	if raw {
		return json.Marshal(b)
	}
	if b == nil {
		return json.RawMessage("null"), nil
	}
	return toJSON(b)
}

// entryOf renders a value read from a store.
func entryOf(rs *kstream.RawStore, key []byte, v kstream.RawValue, raw, withRaw bool) (Entry, error) {
	e := Entry{Timestamp: v.Timestamp, Partition: v.Partition, Standby: v.Standby, Position: v.Position}
	var err error
	if e.Key, err = render(key, raw, rs.KeyToJSON); err != nil {
		return e, err
	}
	if e.Value, err = render(v.Value, raw, rs.ValueToJSON); err != nil {
		return e, err
	}
	if withRaw {
		e.RawKey = key
	}
	return e, nil
}

// windowEntryOf renders a window or session.
func windowEntryOf(rs *kstream.RawStore, w kstream.RawWindowEntry, raw, withRaw bool) (Entry, error) {
	e, err := entryOf(rs, w.Key, w.RawValue, raw, withRaw)
	s, en := w.Start.UnixMilli(), w.End.UnixMilli()
	e.Start, e.End = &s, &en
	if withRaw {
		e.RawKey = w.Key
	}
	return e, err
}

// entryPos is where an entry sorts: its serialized key, then its window.
type entryPos struct {
	key        []byte
	start, end int64
}

// posOf returns the position of an entry whose RawKey is set.
func posOf(e Entry) entryPos {
	p := entryPos{key: e.RawKey}
	if e.Start != nil {
		p.start = *e.Start
	}
	if e.End != nil {
		p.end = *e.End
	}
	return p
}

// comparePos orders positions by key bytes (the stores' order), then start, then end.
func comparePos(a, b entryPos) int {
	if c := bytes.Compare(a.key, b.key); c != 0 {
		return c
	}
	return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(a.end, b.end))
}

// encodeCursor encodes a position: base64url of the key for key-value scans, of 16 bytes
// of window bounds and the key for windows. The empty key, whose base64 is "", which is no
// cursor (a page would seem to be the last), is encoded as "=": its padding, which
// decodeCursor drops, so that it decodes to the empty key (as decodeCursor always did).
func encodeCursor(p entryPos, windowed bool) string {
	if !windowed {
		if len(p.key) == 0 {
			return emptyKeyCursor
		}
		return base64.RawURLEncoding.EncodeToString(p.key)
	}
	b := binary.BigEndian.AppendUint64(nil, uint64(p.start))
	b = binary.BigEndian.AppendUint64(b, uint64(p.end))
	return base64.RawURLEncoding.EncodeToString(append(b, p.key...))
}

// emptyKeyCursor is the cursor of a key-value scan after the empty key.
const emptyKeyCursor = "="

// decodeCursor decodes a cursor of encodeCursor; "" is no cursor.
func decodeCursor(s string, windowed bool) (*entryPos, error) {
	if s == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return nil, badRequest("bad cursor %q: %v", s, err)
	}
	if !windowed {
		return &entryPos{key: b}, nil
	}
	if len(b) < 16 {
		return nil, badRequest("bad cursor %q: too short for a window cursor", s)
	}
	return &entryPos{start: int64(binary.BigEndian.Uint64(b)), end: int64(binary.BigEndian.Uint64(b[8:])), key: b[16:]}, nil
}

// parseTime parses a time given as Unix milliseconds or RFC 3339; "" is def.
func parseTime(name, s string, def time.Time) (time.Time, error) {
	if s == "" {
		return def, nil
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, badRequest("parameter %s=%q is neither Unix milliseconds nor RFC 3339", name, s)
	}
	return t, nil
}

// minTime and maxTime are the default bounds of window queries.
var (
	minTime = time.UnixMilli(0)
	maxTime = time.UnixMilli(math.MaxInt64)
)

// successor returns the smallest key greater than every key with prefix p, nil if none
// (p is empty or all 0xff).
func successor(p []byte) []byte {
	s := bytes.Clone(p)
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] < 0xff {
			s[i]++
			return s[:i+1]
		}
	}
	return nil
}

// next returns the smallest key greater than k.
func next(k []byte) []byte { return append(bytes.Clone(k), 0) }
