package store_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/kstream-go/kstream/serde"
	"github.com/kstream-go/kstream/store"
	"github.com/kstream-go/kstream/store/memory"
	"github.com/kstream-go/kstream/store/pebble"
)

// vModel is the reference of a versioned store, written from Kafka Streams'
// RocksDBVersionedStore rules: a put older than stream time - history retention is not
// put; versions of a key are ordered by timestamp, a put at an existing timestamp replaces
// it; a read as of a time older than stream time - history retention sees only the latest
// version; versions no longer readable are forgotten.
type vModel struct {
	ret int64
	st  int64
	m   map[string][]vVersion
}

type vVersion struct {
	ts   int64
	val  string
	tomb bool
}

func newVModel(ret int64) *vModel {
	return &vModel{ret: ret, st: -1, m: map[string][]vVersion{}}
}

func (m *vModel) put(k string, v vVersion) int64 {
	if v.ts < m.st-m.ret {
		return store.PutNotPut
	}
	m.st = max(m.st, v.ts)
	vs := m.m[k]
	i := 0
	for i < len(vs) && vs[i].ts < v.ts {
		i++
	}
	if i < len(vs) && vs[i].ts == v.ts {
		vs[i] = v
	} else {
		vs = slices.Insert(vs, i, v)
	}
	m.m[k] = vs
	code := store.PutValidToUndefined
	if i+1 < len(vs) {
		code = vs[i+1].ts
	}
	// Forget what can no longer be read.
	for key, vs := range m.m {
		var keep []vVersion
		for j, x := range vs {
			expiry, expires := int64(0), true
			switch {
			case j+1 < len(vs):
				expiry = vs[j+1].ts
			case x.tomb:
				expiry = x.ts
			default:
				expires = false
			}
			if !expires || expiry >= m.st-m.ret {
				keep = append(keep, x)
			}
		}
		m.m[key] = keep
	}
	return code
}

func (m *vModel) get(k string, asOf int64) (store.VersionedRecord[string], bool) {
	vs := m.m[k]
	i := len(vs) - 1
	for i >= 0 && vs[i].ts > asOf {
		i--
	}
	if i < 0 || vs[i].tomb {
		return store.VersionedRecord[string]{}, false
	}
	latest := i == len(vs)-1
	if !latest && asOf < m.st-m.ret {
		return store.VersionedRecord[string]{}, false
	}
	r := store.VersionedRecord[string]{Value: vs[i].val, Timestamp: vs[i].ts}
	if !latest {
		r.ValidTo, r.HasValidTo = vs[i+1].ts, true
	}
	return r, true
}

// capture records the changelog of a backend as the runtime logs it without a buffer.
type capture struct {
	store.Backend
	codec store.ChangelogRecordCodec
	log   []capRec
}

type capRec struct {
	key, value []byte
	ts         int64
}

func (c *capture) Set(k, v []byte) error {
	if err := c.Backend.Set(k, v); err != nil {
		return err
	}
	if key, val, ts, ok := c.codec.ChangelogRecord(k, v); ok {
		c.log = append(c.log, capRec{append([]byte(nil), key...), append([]byte(nil), val...), ts})
		if val == nil {
			c.log[len(c.log)-1].value = nil
		}
	}
	return nil
}

func (c *capture) Delete(k []byte) error {
	if err := c.Backend.Delete(k); err != nil {
		return err
	}
	if _, _, _, ok := c.codec.ChangelogRecord(k, nil); ok {
		return fmt.Errorf("deletion of %x logged", k)
	}
	return nil
}

func vEngines(t *testing.T) map[string]store.DB {
	p, err := pebble.Open(t.TempDir(), pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	m := memory.New()
	t.Cleanup(func() { m.Close() })
	return map[string]store.DB{"memory": m, "pebble": p}
}

func TestVersionedStoreModel(t *testing.T) {
	keys := []string{"", "a", "a\x00", "aa", "b"}
	for name, db := range vEngines(t) {
		for seed := range uint64(20) {
			t.Run(fmt.Sprintf("%s/%d", name, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 7))
				ret := int64(rng.IntN(30) + 1)
				raw, err := db.Open(fmt.Sprintf("v%d", seed), 0)
				if err != nil {
					t.Fatal(err)
				}
				codec := store.NewVersionedChangelog(time.Duration(ret) * time.Millisecond)
				// Half the runs go through a Buffer (the runtime's view of a persistent
				// store), flushed at random.
				var buf *store.Buffer
				var under store.Backend = raw
				if seed%2 == 1 {
					buf = store.NewBuffer(raw)
					under = buf
				}
				cb := &capture{Backend: under, codec: codec}
				s := store.NewVersionedKeyValueStore("v", cb, serde.String(), serde.String(), time.Duration(ret)*time.Millisecond)
				m := newVModel(ret)
				now := int64(1000)
				check := func(s *store.VersionedKeyValueStore[string, string], what string) {
					t.Helper()
					for _, k := range keys {
						for asOf := now - 3*ret - 5; asOf <= now+5; asOf++ {
							got, ok, err := s.GetAsOf(k, asOf)
							if err != nil {
								t.Fatal(err)
							}
							want, wok := m.get(k, asOf)
							if ok != wok || got != want {
								t.Fatalf("%s: GetAsOf(%q, %d) = %+v %v, want %+v %v (stream time %d, retention %d)", what, k, asOf, got, ok, want, wok, m.st, ret)
							}
						}
						got, ok, err := s.Get(k)
						if err != nil {
							t.Fatal(err)
						}
						want, wok := m.get(k, math.MaxInt64)
						if ok != wok || got != want {
							t.Fatalf("%s: Get(%q) = %+v %v, want %+v %v", what, k, got, ok, want, wok)
						}
					}
				}
				for i := range 300 {
					now += int64(rng.IntN(4))
					ts := now - int64(rng.IntN(int(ret)+10)) // out of order, some beyond retention
					k := keys[rng.IntN(len(keys))]
					v := vVersion{ts: ts, val: fmt.Sprintf("v%d", i)}
					var code int64
					if rng.IntN(5) == 0 {
						v.tomb, v.val = true, ""
						wantPrev, wantOK := m.get(k, ts)
						if ts < m.st-ret {
							wantPrev, wantOK = store.VersionedRecord[string]{}, false
						}
						prev, ok, err := s.Delete(k, ts)
						if err != nil {
							t.Fatal(err)
						}
						if ok != wantOK || prev != wantPrev {
							t.Fatalf("Delete(%q, %d) = %+v %v, want %+v %v", k, ts, prev, ok, wantPrev, wantOK)
						}
						m.put(k, v)
					} else {
						want := m.put(k, v)
						var err error
						if code, err = s.Put(k, v.val, ts); err != nil {
							t.Fatal(err)
						}
						if code != want {
							t.Fatalf("Put(%q, %d) = %d, want %d", k, ts, code, want)
						}
					}
					if buf != nil && rng.IntN(20) == 0 {
						if err := buf.Flush(-1); err != nil {
							t.Fatal(err)
						}
					}
					if i%25 == 0 {
						check(s, "live")
					}
				}
				check(s, "live")
				st, err := s.ObservedStreamTime()
				if err != nil || st != m.st {
					t.Fatalf("ObservedStreamTime = %d, %v; want %d", st, err, m.st)
				}

				// Restore the changelog into a new partition, in batches of random sizes.
				raw2, err := db.Open(fmt.Sprintf("r%d", seed), 0)
				if err != nil {
					t.Fatal(err)
				}
				r, err := codec.NewRestorer(raw2)
				if err != nil {
					t.Fatal(err)
				}
				tr := r.(store.TimestampedRestorer)
				bt := raw2.NewBatch()
				for i, rec := range cb.log {
					if err := tr.RestoreAt(bt, rec.key, rec.value, rec.ts); err != nil {
						t.Fatal(err)
					}
					if rng.IntN(10) == 0 || i == len(cb.log)-1 {
						bt.SetCheckpoint(int64(i))
						if err := bt.Commit(); err != nil {
							t.Fatal(err)
						}
					}
				}
				s2 := store.NewVersionedKeyValueStore("v", raw2, serde.String(), serde.String(), time.Duration(ret)*time.Millisecond)
				check(s2, "restored")
				// The restored store goes on as the original.
				for i := range 50 {
					now++
					ts := now - int64(rng.IntN(int(ret)+3))
					k := keys[rng.IntN(len(keys))]
					want := m.put(k, vVersion{ts: ts, val: fmt.Sprintf("w%d", i)})
					code, err := s2.Put(k, fmt.Sprintf("w%d", i), ts)
					if err != nil || code != want {
						t.Fatalf("restored Put(%q, %d) = %d, %v; want %d", k, ts, code, err, want)
					}
				}
				check(s2, "restored, then written")
			})
		}
	}
}

func TestVersionedStoreVersionsAndConfig(t *testing.T) {
	raw, err := memory.New().Open("v", 0)
	if err != nil {
		t.Fatal(err)
	}
	s := store.NewVersionedKeyValueStore("v", raw, serde.String(), serde.String(), 100*time.Millisecond)
	for _, p := range []struct {
		v  string
		ts int64
	}{{"a", 10}, {"c", 30}, {"b", 20}, {"", 40}, {"d", 50}} {
		if p.v == "" {
			if _, _, err := s.Delete("k", p.ts); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if _, err := s.Put("k", p.v, p.ts); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Versions("k", 15, 45)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.VersionedRecord[string]{
		{Value: "c", Timestamp: 30, ValidTo: 40, HasValidTo: true},
		{Value: "b", Timestamp: 20, ValidTo: 30, HasValidTo: true},
		{Value: "a", Timestamp: 10, ValidTo: 20, HasValidTo: true},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Versions = %+v, want %+v", got, want)
	}
	cfg := store.NewVersionedChangelog(time.Hour).TopicConfigs()
	if *cfg["cleanup.policy"] != "compact" || *cfg["min.compaction.lag.ms"] != "90000000" {
		t.Fatalf("topic configs: policy %s lag %s", *cfg["cleanup.policy"], *cfg["min.compaction.lag.ms"])
	}
}

// Expired versions leave the backend: after many updates of a few keys, the store holds only
// the versions within the history retention (plus the index entries and the stream time).
func TestVersionedStoreExpiryDeletes(t *testing.T) {
	raw, err := memory.New().Open("v", 0)
	if err != nil {
		t.Fatal(err)
	}
	s := store.NewVersionedKeyValueStore("v", raw, serde.String(), serde.String(), 100*time.Millisecond)
	for i := range int64(10_000) {
		if _, err := s.Put(fmt.Sprint("k", i%3), fmt.Sprint(i), i); err != nil {
			t.Fatal(err)
		}
	}
	// Per key: the versions whose validity ended within the last 100 ms (about 34), the
	// latest, and an index entry for each non-latest one; plus the stream time.
	n, err := raw.ApproximateCount()
	if err != nil {
		t.Fatal(err)
	}
	if n > 3*2*36+1 {
		t.Fatalf("%d backend keys after 10000 puts over 3 keys with 100 ms of history", n)
	}
	if r, ok, _ := s.GetAsOf("k1", 9_950); !ok || r.Value != "9949" {
		t.Fatalf("GetAsOf(k1, 9950) = %+v %v, want 9949", r, ok)
	}
	if _, ok, _ := s.GetAsOf("k1", 9_800); ok {
		t.Fatal("a version older than the history retention is still readable")
	}
}
