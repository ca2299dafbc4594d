package conformance;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Joined;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.VersionedKeyValueStore;
import org.apache.kafka.streams.state.VersionedRecord;
import org.apache.kafka.streams.state.Stores;

/**
 * The conformance scenarios of versioned stores (KIP-889, KIP-914) and stream-table joins
 * against versioned tables with and without a grace period (KIP-923), registered with
 * {@link Main#add} and mirrored in kstreamtest/conformance_versioned_test.go. Their input
 * topics, vstream and vtable, are this family's own, so that no other scenario's input
 * changes.
 */
final class VersionedScenarios {
    private VersionedScenarios() {}

    private static final Duration HISTORY = Duration.ofSeconds(10);
    private static final Duration GRACE = Duration.ofSeconds(5);

    private static KTable<String, String> vtable(StreamsBuilder b) {
        return b.table("vtable", Consumed.with(Main.STRING, Main.STRING),
                Materialized.<String, String>as(Stores.persistentVersionedKeyValueStore("vtable-store", HISTORY))
                        .withKeySerde(Main.STRING).withValueSerde(Main.STRING));
    }

    private static KStream<String, String> vstream(StreamsBuilder b) {
        return b.stream("vstream", Consumed.with(Main.STRING, Main.STRING));
    }

    private static void out(KStream<String, String> s) {
        s.to("out", Produced.with(Main.STRING, Main.STRING));
    }

    private static Materialized<String, String, KeyValueStore<Bytes, byte[]>> versioned(String name) {
        return Materialized.<String, String>as(Stores.persistentVersionedKeyValueStore(name, HISTORY))
                .withKeySerde(Main.STRING).withValueSerde(Main.STRING);
    }

    private static Joined<String, String, String> grace() {
        return Joined.with(Main.STRING, Main.STRING, Main.STRING).withGracePeriod(GRACE);
    }

    /** Registers the scenarios, in the order of the Go side. */
    static void scenarios() {
        // A versioned source table forwards out-of-order updates (not the latest) and drops
        // updates older than the history retention.
        Main.add("versioned-table-tostream", b -> out(vtable(b).toStream()));
        Main.add("versioned-filter-tostream", b -> out(vtable(b).filter((k, v) -> !v.startsWith("A1")).toStream()));
        Main.add("versioned-totable-tostream", b -> out(vstream(b).toTable(
                Materialized.<String, String>as(Stores.persistentVersionedKeyValueStore("vstream-store", HISTORY))
                        .withKeySerde(Main.STRING).withValueSerde(Main.STRING)).toStream()));
        // Stream-table joins look the versioned table up as of the stream record's time.
        Main.add("versioned-join", b -> out(vstream(b).join(vtable(b), (v, vt) -> v + "+" + vt)));
        Main.add("versioned-leftjoin", b -> out(vstream(b).leftJoin(vtable(b), (v, vt) -> v + "+" + vt)));
        // With a grace period, stream records wait in a buffer until stream time passes
        // their timestamp + grace; later ones are joined at once.
        Main.add("versioned-join-grace", b -> out(vstream(b).join(vtable(b), (v, vt) -> v + "+" + vt, grace())));
        // (Java's buffer does not take null keys, so the left join filters them out first.)
        Main.add("versioned-leftjoin-grace", b -> out(vstream(b).filter((k, v) -> k != null)
                .leftJoin(vtable(b), (v, vt) -> v + "+" + vt, grace())));
        // A table derived without a store from a versioned one is versioned too: the join
        // reads it as of the record's time through the filter's or mapValues' getter.
        Main.add("versioned-filter-join", b -> out(vstream(b).join(
                vtable(b).filter((k, v) -> !v.startsWith("A1")), (v, vt) -> v + "+" + vt)));
        Main.add("versioned-mapvalues-join-grace", b -> out(vstream(b).join(
                vtable(b).mapValues(v -> v.toLowerCase()), (v, vt) -> v + "+" + vt, grace())));
        // Table-table joins and groupBy ignore out-of-order updates of a versioned table.
        Main.add("versioned-table-table-join", b -> out(vtable(b).join(vstream(b).toTable(
                Materialized.<String, String>as(Stores.persistentVersionedKeyValueStore("vstream-store", HISTORY))
                        .withKeySerde(Main.STRING).withValueSerde(Main.STRING)), (a, s) -> a + "*" + s).toStream()));
        // Operators materialized in a versioned store (Materialized.as(a versioned supplier))
        // forward what their store took, marked latest or not by it; materialized in a
        // timestamped store, every update they forward is the latest.
        Main.add("versioned-filter-materialized", b -> out(vstream(b).join(
                vtable(b).filter((k, v) -> !v.startsWith("A1"), versioned("vfilter-store")),
                (v, vt) -> v + "+" + vt)));
        Main.add("versioned-mapvalues-materialized-tostream", b -> out(
                vtable(b).mapValues(v -> v.toLowerCase(), versioned("vmap-store")).toStream()));
        Main.add("versioned-filter-timestamped-groupby", b -> vtable(b)
                .filter((k, v) -> !v.startsWith("A1"), Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("tfilter-store"))
                .groupBy((k, v) -> KeyValue.pair(v.substring(0, 1), v))
                .count(Materialized.as("tletter-counts")).toStream().mapValues(n -> "n" + n).to("out"));
        Main.add("versioned-table-join-materialized", b -> out(vtable(b).join(vstream(b).toTable(versioned("vstream-store")),
                (a, s) -> a + "*" + s, versioned("vjoin-store")).toStream()));
        // Aggregations kept in a versioned store: a stream joined with its own count reads
        // the count as of each record's time (the aggregate's timestamp is the largest seen).
        Main.add("versioned-stream-count-join", b -> {
            KStream<String, String> s = vstream(b);
            KTable<String, Long> c = s.groupByKey().count(
                    Materialized.<String, Long>as(Stores.persistentVersionedKeyValueStore("vcounts", HISTORY))
                            .withKeySerde(Main.STRING).withValueSerde(Serdes.Long()));
            out(s.join(c, (v, n) -> v + "#" + n));
        });
        Main.add("versioned-table-reduce", b -> out(vtable(b).groupBy((k, v) -> KeyValue.pair(v.substring(0, 1), v))
                .reduce((a, v) -> a + "+" + v, (a, v) -> a + "-" + v, versioned("vreduce-store")).toStream()));
        // The Processor API: a processor reads a versioned store as of just before each
        // record, puts the record at its time, and forwards what it saw and put's code.
        Main.add("versioned-process-store", b -> {
            b.addStateStore(Stores.versionedKeyValueStoreBuilder(
                    Stores.persistentVersionedKeyValueStore("vproc-store", HISTORY), Main.STRING, Main.STRING));
            out(vstream(b).process(VProc::new, "vproc-store"));
        });
        Main.add("versioned-groupby-count", b -> vtable(b).groupBy((k, v) -> KeyValue.pair(v.substring(0, 1), v))
                .count(Materialized.as("vletter-counts")).toStream().mapValues(n -> "n" + n).to("out"));
    }

    /** VProc: see versioned-process-store. */
    private static final class VProc implements Processor<String, String, String, String> {
        private ProcessorContext<String, String> ctx;
        private VersionedKeyValueStore<String, String> store;

        @Override
        public void init(ProcessorContext<String, String> ctx) {
            this.ctx = ctx;
            this.store = ctx.getStateStore("vproc-store");
        }

        @Override
        public void process(Record<String, String> r) {
            if (r.key() == null) {
                ctx.forward(r.withValue("nokey"));
                return;
            }
            VersionedRecord<String> prev = store.get(r.key(), r.timestamp() - 1);
            long code = store.put(r.key(), r.value(), r.timestamp());
            // (validTo is not shown: Java's typed store passes a record through
            // ValueAndTimestamp bytes, which drop it; kstream's GetAsOf returns it.)
            String seen = prev == null ? "-" : prev.value() + "@" + (prev.timestamp() - Main.T0);
            String put = code == VersionedKeyValueStore.PUT_RETURN_CODE_NOT_PUT ? "notput"
                    : code == VersionedKeyValueStore.PUT_RETURN_CODE_VALID_TO_UNDEFINED ? "latest"
                    : "until" + (code - Main.T0);
            ctx.forward(r.withValue((r.value() == null ? "" : r.value()) + "|" + seen + "|" + put));
        }
    }

    private static void add(List<Main.In> recs, String topic, String key, String value, long seconds, String header) {
        recs.add(new Main.In(topic, key, value, Main.T0 + seconds * 1000L, header));
    }

    /**
     * The records of topics vstream and vtable (see the Go side's confVersionedInput): keys
     * a, b and k all go to partition 0 of 4.
     */
    static List<Main.In> input() {
        List<Main.In> r = new ArrayList<>();
        add(r, "vtable", "a", "A1", 10, "0");
        add(r, "vtable", "b", "B1", 10, null);
        add(r, "vstream", "a", "s1", 12, "2");
        add(r, "vtable", "a", "A2", 20, null);
        add(r, "vstream", "a", "s2", 15, null);
        add(r, "vtable", "a", "A15", 14, "5");
        add(r, "vtable", "a", "A0", 5, null);
        add(r, "vstream", "a", "s3", 14, null);
        add(r, "vstream", "b", "s4", 22, "8");
        add(r, "vtable", "b", null, 23, null);
        add(r, "vstream", "b", "s5", 24, null);
        add(r, "vstream", "b", "s6", 21, null);
        add(r, "vstream", "k", "s7", 25, null);
        add(r, "vstream", null, "s8", 25, "13");
        add(r, "vstream", "a", null, 25, null);
        add(r, "vtable", null, "X", 25, null);
        add(r, "vtable", "k", "K1", 26, null);
        add(r, "vstream", "k", "s9", 24, null);
        add(r, "vtable", "z", null, 27, null);
        add(r, "vstream", "a", "s10", 30, "19");
        add(r, "vtable", "a", "A29", 29, null);
        add(r, "vstream", "a", "s11", 40, null);
        add(r, "vstream", "a", "s12", 8, null);
        add(r, "vtable", "b", "B2", 33, null);
        add(r, "vstream", "b", "s13", 34, null);
        add(r, "vtable", "b", "B3", 31, null);
        add(r, "vstream", "b", "s14", 32, null);
        add(r, "vstream", "a", "s15", 60, null);
        add(r, "vtable", "a", "A5", 55, null);
        add(r, "vstream", "a", "s16", 70, null);
        return r;
    }
}
