package kstream_test

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"github.com/kstream-go/kstream/internal/kafkatest"
	"github.com/kstream-go/kstream/serde"
	"github.com/twmb/franz-go/pkg/kgo"
)

// javaPartitionKey is one line of testdata/java_partitions.txt: a key, its bytes as Java's
// StringSerializer or LongSerializer wrote them, and the partition that kafka-clients 4.4's
// BuiltInPartitioner.partitionForKey chose for it among 12 and among 7 partitions.
type javaPartitionKey struct {
	isLong bool
	str    string // string keys
	long   int64  // long keys
	bytes  []byte
	p12    int32
	p7     int32
}

// readJavaPartitions reads testdata/java_partitions.txt, written by
// testing/conformance/run.sh partitions (conformance.Partitions).
func readJavaPartitions(t *testing.T) []javaPartitionKey {
	t.Helper()
	f, err := os.Open("testdata/java_partitions.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []javaPartitionKey
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		if strings.HasPrefix(sc.Text(), "#") {
			continue
		}
		fs := strings.Fields(sc.Text())
		var k javaPartitionKey
		var hx, p12, p7 string
		switch {
		case len(fs) == 4 && fs[0] == "string":
			hx, p12, p7 = fs[1], fs[2], fs[3]
		case len(fs) == 5 && fs[0] == "long":
			k.isLong = true
			if k.long, err = strconv.ParseInt(fs[1], 10, 64); err != nil {
				t.Fatalf("line %d: %v", line, err)
			}
			hx, p12, p7 = fs[2], fs[3], fs[4]
		default:
			t.Fatalf("line %d: malformed: %q", line, sc.Text())
		}
		if hx != "-" {
			if k.bytes, err = hex.DecodeString(hx); err != nil {
				t.Fatalf("line %d: %v", line, err)
			}
		}
		k.str = string(k.bytes)
		n12, err1 := strconv.ParseInt(p12, 10, 32)
		n7, err2 := strconv.ParseInt(p7, 10, 32)
		if err1 != nil || err2 != nil {
			t.Fatalf("line %d: bad partitions %q %q", line, p12, p7)
		}
		k.p12, k.p7 = int32(n12), int32(n7)
		out = append(out, k)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestKeyMetadataMatchesJavaPartitioner checks App.KeyMetadata against the partitions that
// the Java producer chooses (testdata/java_partitions.txt: 10,315 String keys, ASCII,
// non-ASCII and empty, and 405 Long keys), for counts over 12 and over 7 partitions, and
// that records produced by kgo's default partitioner are counted in the partition that
// KeyMetadata names.
func TestKeyMetadataMatchesJavaPartitioner(t *testing.T) {
	t.Parallel()
	keys := readJavaPartitions(t)
	var nStr, nLong int
	for _, k := range keys {
		if k.isLong {
			nLong++
		} else {
			nStr++
		}
	}
	if nStr < 10_000 || nLong < 400 {
		t.Fatalf("golden file holds %d string and %d long keys, want at least 10000 and 400", nStr, nLong)
	}
	// A few keys of each kind that a kgo producer writes with its default partitioner.
	var produced []javaPartitionKey
	for i, k := range keys {
		if i%997 == 0 || (!k.isLong && len(k.bytes) > 0 && k.bytes[0] >= 0x80 && i%13 == 0) || (k.isLong && i%41 == 0) {
			produced = append(produced, k)
		}
	}

	for _, n := range []int32{12, 7} {
		for _, long := range []bool{false, true} {
			name := "string"
			if long {
				name = "long"
			}
			t.Run(name+"-"+strconv.Itoa(int(n)), func(t *testing.T) {
				t.Parallel()
				in := kafkatest.CreateTopic(t, "in", n, nil)
				b := kstream.NewBuilder()
				if long {
					kstream.Count(kstream.Stream(b, in, serde.Int64(), serde.String()).GroupByKey(), "counts", kstream.InMemory())
				} else {
					kstream.Count(kstream.Stream(b, in, serde.String(), serde.String()).GroupByKey(), "counts", kstream.InMemory())
				}
				app := newApp(t, b, testConfig(t))
				r := start(t, app)
				kafkatest.Eventually(t, 30*time.Second, "running with every task", func() bool {
					return r.app.State() == kstream.StateRunning && len(r.app.Tasks()) == int(n)
				})

				want := func(k javaPartitionKey) int32 {
					if n == 12 {
						return k.p12
					}
					return k.p7
				}
				checked, mismatches := 0, 0
				for _, k := range keys {
					if k.isLong != long {
						continue
					}
					var key any = k.str
					if long {
						kb, _ := serde.Int64().Serialize(k.long)
						if !bytes.Equal(kb, k.bytes) {
							t.Fatalf("serde.Int64 writes %d as %x, Java's LongSerializer as %x", k.long, kb, k.bytes)
						}
						key = k.long
					}
					md, err := app.KeyMetadata("counts", key)
					if err != nil {
						t.Fatalf("KeyMetadata(%q): %v", k.bytes, err)
					}
					checked++
					if md.Partition != want(k) {
						if mismatches++; mismatches <= 10 {
							t.Errorf("key %x: KeyMetadata partition %d, Java producer %d (of %d)", k.bytes, md.Partition, want(k), n)
						}
					}
					if md.Active == "" && md.ActiveMember == "" {
						t.Fatalf("key %x: KeyMetadata names no active member: %+v", k.bytes, md)
					}
					// The same for the serialized key.
					if md2, err := app.KeyMetadata("counts", kstream.RawKey(k.bytes)); err != nil || md2.Partition != md.Partition {
						t.Fatalf("KeyMetadata(RawKey %x) = %+v, %v; want partition %d", k.bytes, md2, err, md.Partition)
					}
				}
				if mismatches > 0 {
					t.Fatalf("%d of %d keys partitioned unlike the Java producer", mismatches, checked)
				}
				t.Logf("%d %s keys over %d partitions: all as the Java producer", checked, name, n)

				// Records written by kgo's default partitioner land where KeyMetadata says, and
				// the count of that partition's store holds them.
				cl := kafkatest.Client(t)
				var recs []*kgo.Record
				for _, k := range produced {
					if k.isLong == long {
						recs = append(recs, &kgo.Record{Topic: in, Key: k.bytes, Value: []byte("v")})
					}
				}
				kafkatest.Produce(t, cl, recs...)
				back := kafkatest.Consume(t, in, len(recs), 20*time.Second)
				if len(back) != len(recs) {
					t.Fatalf("consumed %d records, produced %d", len(back), len(recs))
				}
				store, err := app.RawStore("counts")
				if err != nil {
					t.Fatal(err)
				}
				for _, rec := range back {
					md, err := app.KeyMetadata("counts", kstream.RawKey(rec.Key))
					if err != nil {
						t.Fatal(err)
					}
					if rec.Partition != md.Partition {
						t.Errorf("key %x: kgo's default partitioner wrote it to partition %d, KeyMetadata names %d", rec.Key, rec.Partition, md.Partition)
					}
					kafkatest.Eventually(t, 10*time.Second, "the key counted", func() bool {
						v, ok, err := store.Get(rec.Key)
						return err == nil && ok && v.Partition == md.Partition && bytes.Equal(v.Value, []byte{0, 0, 0, 0, 0, 0, 0, 1})
					})
				}
				t.Logf("%d records from kgo's default partitioner in the partitions KeyMetadata names", len(back))
			})
		}
	}
}
