package conformance;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Named;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.SlidingWindows;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.Suppressed.BufferConfig;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.SessionStore;
import org.apache.kafka.streams.state.WindowStore;

/**
 * The conformance scenarios of cogroup, registered with {@link Main#add} and mirrored in
 * kstreamtest (conformance_cogroup_test.go). Their input topics cg1, cg2 and cg3 are this
 * family's own, so that no other scenario's input changes.
 */
final class CogroupScenarios {
    private CogroupScenarios() {}

    /** Registers the scenarios, in the order of the Go side. */
    static void scenarios() {
        // cg-two: two streams cogrouped by key into a named store; null keys and values are
        // dropped by the aggregations.
        Main.add("cg-two", b -> {
            KGroupedStream<String, String> g1 = cg(b, "cg1").groupByKey();
            KGroupedStream<String, String> g2 = cg(b, "cg2").groupByKey();
            g1.<String>cogroup((k, v, acc) -> acc + ",1" + v)
                    .cogroup(g2, (k, v, acc) -> acc + ",2" + v)
                    .aggregate(() -> "", kv("cg-two-store"))
                    .toStream().to("out");
        });
        // cg-three: three streams, one of them of another value type (lengths), into a store
        // with the generated name.
        Main.add("cg-three", b -> {
            KGroupedStream<String, String> g1 = cg(b, "cg1").groupByKey();
            KGroupedStream<String, String> g2 = cg(b, "cg2").groupByKey();
            KGroupedStream<String, Integer> g3 = cg(b, "cg3").mapValues(v -> nz(v).length()).groupByKey();
            g1.<String>cogroup((k, v, acc) -> acc + ",1" + v)
                    .cogroup(g2, (k, v, acc) -> acc + ",2" + v)
                    .cogroup(g3, (k, n, acc) -> acc + ",3#" + n)
                    .aggregate(() -> "")
                    .toStream().to("out");
        });
        // cg-rekey: cg2 grouped by a new key (repartitioned through a topic named after the
        // store), cg3 by another one with a named grouping (its topic is cg3-by-repartition).
        Main.add("cg-rekey", b -> {
            KGroupedStream<String, String> g1 = cg(b, "cg1").groupByKey();
            KGroupedStream<String, String> g2 = cg(b, "cg2").groupBy((k, v) -> nz(v).length() % 2 == 0 ? "a" : "k");
            KGroupedStream<String, String> g3 = cg(b, "cg3").groupBy((k, v) -> nz(k) + "3", Grouped.as("cg3-by"));
            g1.<String>cogroup((k, v, acc) -> acc + ",1" + v)
                    .cogroup(g2, (k, v, acc) -> acc + ",2" + v)
                    .cogroup(g3, (k, v, acc) -> acc + ",3" + v)
                    .aggregate(() -> "", kv("cg-rekey-store"))
                    .toStream().to("out");
        });
        // cg-named: named operators and a store of longs.
        Main.add("cg-named", b -> {
            KGroupedStream<String, String> g1 = cg(b, "cg1").groupByKey();
            KGroupedStream<String, String> g2 = cg(b, "cg2").groupByKey();
            KGroupedStream<String, String> g3 = cg(b, "cg3").groupByKey();
            g1.<Long>cogroup((k, v, acc) -> acc + 1)
                    .cogroup(g2, (k, v, acc) -> acc + 10)
                    .cogroup(g3, (k, v, acc) -> acc + 100)
                    .aggregate(() -> 0L, Named.as("cgn"),
                            Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("cg-named-store").withValueSerde(Serdes.Long()))
                    .toStream().mapValues(v -> String.valueOf(v)).to("out");
        });
        // cg-tombstones: an aggregator that returns null deletes the key (a tombstone), and
        // the next record of the key starts again from the initializer.
        Main.add("cg-tombstones", b -> {
            KGroupedStream<String, String> g1 = cg(b, "cg1").groupByKey();
            KGroupedStream<String, String> g2 = cg(b, "cg2").groupByKey();
            g1.<String>cogroup((k, v, acc) -> acc + ",1" + v)
                    .cogroup(g2, (k, v, acc) -> v.startsWith("y1") ? null : acc + ",2" + v)
                    .aggregate(() -> "", kv("cg-tomb-store"))
                    .toStream().to("out");
        });
        // cg-tumbling: three streams over tumbling windows of 10s with a grace of 5s; each
        // stream's operator has its own stream time (record 12 is late for cg1's, not cg2's).
        Main.add("cg-tumbling", b -> {
            KGroupedStream<String, String> g1 = cg(b, "cg1").groupByKey();
            KGroupedStream<String, String> g2 = cg(b, "cg2").groupByKey();
            KGroupedStream<String, String> g3 = cg(b, "cg3").groupByKey();
            winOut(g1.<String>cogroup((k, v, acc) -> acc + ",1" + nz(v))
                    .cogroup(g2, (k, v, acc) -> acc + ",2" + nz(v))
                    .cogroup(g3, (k, v, acc) -> acc + ",3" + nz(v))
                    .windowedBy(TimeWindows.ofSizeAndGrace(secs(10), secs(5)))
                    .aggregate(() -> "", Materialized.<String, String, WindowStore<Bytes, byte[]>>as("cg-win-store")));
        });
        // cg-hopping-named: two streams over hopping windows, named operators, generated store.
        Main.add("cg-hopping-named", b -> {
            KGroupedStream<String, String> g1 = cg(b, "cg1").groupByKey();
            KGroupedStream<String, String> g2 = cg(b, "cg2").groupByKey();
            winOut(g1.<String>cogroup((k, v, acc) -> acc + ",1" + nz(v))
                    .cogroup(g2, (k, v, acc) -> acc + ",2" + nz(v))
                    .windowedBy(TimeWindows.ofSizeAndGrace(secs(10), secs(3)).advanceBy(secs(5)))
                    .aggregate(() -> "", Named.as("cgh")));
        });
        // cg-sliding: two streams over sliding windows (10s, grace 5s).
        Main.add("cg-sliding", b -> {
            KGroupedStream<String, String> g1 = cg(b, "cg1").groupByKey();
            KGroupedStream<String, String> g2 = cg(b, "cg2").groupByKey();
            winOut(g1.<String>cogroup((k, v, acc) -> acc + ",1" + nz(v))
                    .cogroup(g2, (k, v, acc) -> acc + ",2" + nz(v))
                    .windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(secs(10), secs(5)))
                    .aggregate(() -> "", Materialized.<String, String, WindowStore<Bytes, byte[]>>as("cg-slide-store")));
        });
        // cg-session: three streams over sessions (gap 5s, grace 5s), merged with "|", named.
        Main.add("cg-session", b -> {
            KGroupedStream<String, String> g1 = cg(b, "cg1").groupByKey();
            KGroupedStream<String, String> g2 = cg(b, "cg2").groupByKey();
            KGroupedStream<String, String> g3 = cg(b, "cg3").groupByKey();
            winOut(g1.<String>cogroup((k, v, acc) -> acc + ",1" + nz(v))
                    .cogroup(g2, (k, v, acc) -> acc + ",2" + nz(v))
                    .cogroup(g3, (k, v, acc) -> acc + ",3" + nz(v))
                    .windowedBy(SessionWindows.ofInactivityGapAndGrace(secs(5), secs(5)))
                    .aggregate(() -> "", (k, a1, a2) -> a1 + "|" + a2, Named.as("cgs"),
                            Materialized.<String, String, SessionStore<Bytes, byte[]>>as("cg-session-store")));
        });
        more();
    }

    /** More scenarios: the cogrouped table used downstream, and a shared repartition. */
    static void more() {
        // cg-suppress: a tumbling cogroup suppressed until its windows close (the grace is
        // found through the merge node).
        Main.add("cg-suppress", b -> {
            KGroupedStream<String, String> g1 = cg(b, "cg1").groupByKey();
            KGroupedStream<String, String> g2 = cg(b, "cg2").groupByKey();
            winOut(g1.<String>cogroup((k, v, acc) -> acc + ",1" + nz(v))
                    .cogroup(g2, (k, v, acc) -> acc + ",2" + nz(v))
                    .windowedBy(TimeWindows.ofSizeAndGrace(secs(10), secs(5)))
                    .aggregate(() -> "", Materialized.<String, String, WindowStore<Bytes, byte[]>>as("cg-sup-store").withKeySerde(Main.STRING))
                    .suppress(Suppressed.untilWindowCloses(BufferConfig.unbounded())));
        });
        // cg-join: stream cg3 joined with the cogrouped table of cg1 and cg2 (the join reads
        // the cogroup's store).
        Main.add("cg-join", b -> {
            KGroupedStream<String, String> g1 = cg(b, "cg1").groupByKey();
            KGroupedStream<String, String> g2 = cg(b, "cg2").groupByKey();
            KStream<String, String> s3 = cg(b, "cg3");
            KTable<String, String> t = g1.<String>cogroup((k, v, acc) -> acc + ",1" + v)
                    .cogroup(g2, (k, v, acc) -> acc + ",2" + v)
                    .aggregate(() -> "", kv("cg-join-store"));
            s3.join(t, (v, tv) -> nz(v) + "/" + tv).to("out");
        });
        // cg-regroup: the cogrouped table re-grouped by the length of its value and counted
        // (the count needs the old values, which every cogroup operator then sends).
        Main.add("cg-regroup", b -> {
            KGroupedStream<String, String> g1 = cg(b, "cg1").groupByKey();
            KGroupedStream<String, String> g2 = cg(b, "cg2").groupByKey();
            g1.<String>cogroup((k, v, acc) -> acc + ",1" + v)
                    .cogroup(g2, (k, v, acc) -> acc + ",2" + v)
                    .aggregate(() -> "", kv("cg-regroup-store"))
                    .groupBy((k, v) -> KeyValue.pair("n" + (v.length() % 4), k))
                    .count(Materialized.as("cg-regroup-count"))
                    .toStream().mapValues(v -> String.valueOf(v)).to("out");
        });
        // cg-shared-rekey: a re-keyed stream counted and cogrouped: the two repartitions
        // merge into one topic (topology.optimization=all), named after the count's store.
        Main.add("cg-shared-rekey", b -> {
            KStream<String, String> s1 = cg(b, "cg1");
            KStream<String, String> s2 = cg(b, "cg2").selectKey((k, v) -> nz(v).length() % 2 == 0 ? "a" : "b");
            s2.groupByKey().count(Materialized.as("cg-shared-count")).toStream().mapValues(v -> "n" + v).to("out");
            s1.groupByKey().<String>cogroup((k, v, acc) -> acc + ",1" + v)
                    .cogroup(s2.groupByKey(), (k, v, acc) -> acc + ",2" + v)
                    .aggregate(() -> "", kv("cg-shared-store"))
                    .toStream().to("out");
        });
    }

    private static KStream<String, String> cg(StreamsBuilder b, String topic) {
        return b.stream(topic, Consumed.with(Main.STRING, Main.STRING));
    }

    private static Materialized<String, String, KeyValueStore<Bytes, byte[]>> kv(String name) {
        return Materialized.as(name);
    }

    private static String nz(String s) {
        return s == null ? "" : s;
    }

    private static Duration secs(long n) {
        return Duration.ofSeconds(n);
    }

    /** Main.winOut: the windowed key as {@code <key>@<start - T0>/<end - T0>}. */
    private static <V> void winOut(KTable<Windowed<String>, V> t) {
        t.toStream()
                .map((wk, v) -> KeyValue.pair(wk.key() + "@" + (wk.window().start() - Main.T0) + "/" + (wk.window().end() - Main.T0),
                        v == null ? null : String.valueOf(v)))
                .to("out");
    }

    // The records of cg1, cg2 and cg3, piped in this order (mirrored by confCogroupInput in
    // conformance_cogroup_test.go): topic, key, value (null: a Kafka null), time after T0 in
    // ms; record i has the header i. The keys a, b and k all go to partition 0 of 4.
    private static final String[][] RECORDS = {
        {"cg1", "a", "x0", "1000"},
        {"cg2", "a", "y1", "2000"},
        {"cg1", "b", "x2", "3000"},
        {"cg3", "k", "z3", "4000"},
        {"cg2", "b", "y4", "9000"},
        {"cg1", "a", null, "9500"},
        {"cg2", null, "y6", "10000"},
        {"cg3", "a", "z7", "12000"},
        {"cg1", "k", "x8", "14000"},
        {"cg2", "a", "y9", "8000"},
        {"cg3", "b", "z10", "16000"},
        {"cg1", "a", "x11", "21000"},
        {"cg2", "b", "y12", "5000"},
        {"cg1", "b", "x13", "4000"},
        {"cg3", "k", null, "22000"},
        {"cg2", "a", "y15", "30000"},
        {"cg3", "a", "z16", "31000"},
        {"cg1", "b", "x17", "29000"},
        {"cg2", "k", "y18", "25000"},
        {"cg3", null, null, "26000"},
        {"cg1", "a", "x20", "50000"},
        {"cg2", "a", "y21", "52000"},
        {"cg3", "b", "z22", "40000"},
        {"cg1", "k", "x23", "33000"},
        {"cg2", "b", null, "51000"},
        {"cg3", "a", "z25", "60000"},
        {"cg1", "a", "x26", "61000"},
        {"cg2", "k", "y27", "2000"},
        {"cg1", null, "x28", "62000"},
        {"cg3", "b", "z29", "3000"},
    };

    /** The records of this family's input topics, piped after Main's own. */
    static List<Main.In> input() {
        List<Main.In> recs = new ArrayList<>();
        for (int i = 0; i < RECORDS.length; i++) {
            String[] r = RECORDS[i];
            recs.add(new Main.In(r[0], r[1], r[2], Main.T0 + Long.parseLong(r[3]), String.valueOf(i)));
        }
        return recs;
    }
}
