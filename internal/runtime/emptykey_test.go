package runtime

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A changelog record's key and value bytes are never nil, whatever the batch: the empty key
// of a store (which a store may hand over as nil) is logged as an empty key, not a null one.
func TestLogBatchCopyIsNeverNil(t *testing.T) {
	for name, lb := range map[string]*logBatch{
		"no batch":          nil,
		"batch, no arena":   {},
		"batch with arena":  {arena: make([]byte, 0, 16)},
		"batch, full arena": {arena: make([]byte, 4)},
	} {
		for _, in := range [][]byte{nil, {}, []byte("k")} {
			out := lb.copyBytes(in)
			if out == nil || string(out) != string(in) {
				t.Errorf("%s: copyBytes(%q) = %q (nil %v)", name, in, out, out == nil)
			}
		}
	}
}

// The replay key of a produced record tells a null key or value from an empty one.
func TestReplayKeyNullIsNotEmpty(t *testing.T) {
	src := &kgo.Record{Topic: "in", Partition: 1, Offset: 7}
	keys := map[replayKey]string{}
	for name, r := range map[string]*kgo.Record{
		"null key":    {Topic: "out", Key: nil, Value: []byte("v")},
		"empty key":   {Topic: "out", Key: []byte{}, Value: []byte("v")},
		"null value":  {Topic: "out", Key: []byte("k"), Value: nil},
		"empty value": {Topic: "out", Key: []byte("k"), Value: []byte{}},
		"split":       {Topic: "out", Key: []byte("k1"), Value: []byte("v")},
		"joined":      {Topic: "out", Key: []byte("k"), Value: []byte("1v")},
	} {
		k := newReplayKey(r, src)
		if other, ok := keys[k]; ok {
			t.Errorf("%s and %s have the same replay key", name, other)
		}
		keys[k] = name
	}
}
