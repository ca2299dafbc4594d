package conformance;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.function.Consumer;

import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Branched;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.GlobalKTable;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Joined;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.KGroupedTable;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Named;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Repartitioned;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.Stores;

/**
 * Prints topology.describe() for each topology of kstream's describe_test.go, built with
 * topology.optimization=all (mode "all", the default) or without optimization (mode "none").
 * Usage: Describe [all|none] [name...]
 *
 * It is the source of describe_test.go's describeJava: copy it beside
 * testing/conformance/src/main/java/conformance/Main.java, build that project (run.sh does)
 * and run
 *   java -cp "target/classes:target/lib/*" conformance.Describe all
 * which prints "=== name", the text, "=== end" for each topology. The topology
 * rekey-peek-split-count fails in Java's optimizer and is not in describe_test.go's table
 * (TestSharedRepartitionThroughBranches covers it).
 */
public final class Describe {
    private static final Serde<String> S = Serdes.String();

    private Describe() {}

    static KStream<String, String> in(StreamsBuilder b) {
        return b.stream("in", Consumed.with(S, S));
    }

    static KTable<String, String> table(StreamsBuilder b, String topic, String store) {
        return b.table(topic, Consumed.with(S, S), Materialized.as(store));
    }

    static Map<String, Consumer<StreamsBuilder>> topologies() {
        Map<String, Consumer<StreamsBuilder>> m = new LinkedHashMap<>();
        m.put("stateless", b -> in(b).filter((k, v) -> true).filterNot((k, v) -> false)
                .mapValues(v -> v).mapValues((k, v) -> v)
                .flatMapValues(v -> List.of(v)).flatMapValues((k, v) -> List.of(v))
                .peek((k, v) -> {}).to("out"));
        m.put("key-changing-sinks", b -> {
            KStream<String, String> s = in(b);
            s.map((k, v) -> KeyValue.pair(v, k)).to("out");
            s.<String, String>flatMap((k, v) -> List.of(KeyValue.pair(v, k))).to("out");
            s.selectKey((k, v) -> v).to("out");
            s.foreach((k, v) -> {});
        });
        m.put("named-operators", b -> {
            KStream<String, String> s = b.stream("orders", Consumed.with(S, S).withName("orders-source"));
            KStream<String, String> big = s.filter((k, v) -> true, Named.as("big"));
            big.mapValues(v -> v, Named.as("ids")).to("ids", Produced.<String, String>as("ids-sink"));
            big.peek((k, v) -> {}, Named.as("peeker")).foreach((k, v) -> {}, Named.as("each"));
            s.selectKey((k, v) -> v, Named.as("rekey")).map((k, v) -> KeyValue.pair(k, v), Named.as("remap"))
                    .flatMap((k, v) -> List.of(KeyValue.pair(k, v)), Named.as("flat")).to("out", Produced.as("out-sink"));
        });
        m.put("split-named", b -> {
            Map<String, KStream<String, String>> br = in(b).split(Named.as("len-"))
                    .branch((k, v) -> v.length() <= 5, Branched.as("short"))
                    .defaultBranch(Branched.as("long"));
            br.get("len-short").mapValues(v -> v.toUpperCase()).to("short");
            br.get("len-long").to("long");
        });
        m.put("split-unnamed", b -> {
            Map<String, KStream<String, String>> br = in(b).filter((k, v) -> true).split()
                    .branch((k, v) -> v.startsWith("a"), Branched.as("a"))
                    .branch((k, v) -> v.startsWith("b"), Branched.as("b"))
                    .noDefaultBranch();
            for (Map.Entry<String, KStream<String, String>> e : br.entrySet()) {
                e.getValue().to("out-" + e.getKey().substring(e.getKey().length() - 1));
            }
        });
        m.put("merge", b -> {
            KStream<String, String> a = b.stream("a", Consumed.with(S, S));
            KStream<String, String> c = b.stream("c", Consumed.with(S, S));
            a.merge(c).to("out");
            a.filter((k, v) -> true).merge(c.mapValues(v -> v), Named.as("merged")).to("out2");
        });
        m.put("stream-topics", b -> b.stream(List.of("t1", "t2", "t0"), Consumed.with(S, S)).mapValues(v -> v).to("out"));
        m.put("process-store", b -> {
            b.addStateStore(Stores.keyValueStoreBuilder(Stores.persistentKeyValueStore("seen"), S, S));
            in(b).process(() -> new Processor<String, String, String, String>() {
                private ProcessorContext<String, String> ctx;
                @Override
                public void init(ProcessorContext<String, String> c) { ctx = c; }
                @Override
                public void process(Record<String, String> r) { ctx.forward(r); }
            }, "seen").to("out");
            in2(b).process(Describe::pass, Named.as("sink-proc"));
        });
        m.put("repartition-named", b -> in(b).selectKey((k, v) -> v)
                .repartition(Repartitioned.<String, String>as("by-value").withNumberOfPartitions(4)).to("out"));
        m.put("groupbykey-count", b -> in(b).groupByKey().count(Materialized.as("counts")).toStream().to("out"));
        m.put("groupby-count", b -> in(b).groupBy((k, v) -> v).count(Materialized.as("by-value")).toStream().to("out"));
        m.put("groupby-named", b -> in(b).flatMapValues(v -> List.of(v.split(" ")))
                .groupBy((k, w) -> w, Grouped.as("by-word")).count(Materialized.as("word-counts")).toStream().to("out"));
        m.put("rekey-two-aggregations", b -> {
            KGroupedStream<String, String> g = in(b).selectKey((k, v) -> v).groupByKey();
            g.count(Materialized.as("c1")).toStream().to("out1");
            g.reduce((a, c) -> a + c, Materialized.as("r1")).toStream().to("out2");
        });
        m.put("rekey-join-leftjoin", b -> {
            KTable<String, String> t = table(b, "table", "table-store");
            KStream<String, String> s = in(b).selectKey((k, v) -> v);
            s.join(t, (v, vt) -> v + vt).to("out");
            s.leftJoin(t, (v, vt) -> v + vt).to("out");
        });
        m.put("two-joins-and-count", b -> {
            KTable<String, String> t = table(b, "table", "table-store");
            KStream<String, String> s = in(b).selectKey((k, v) -> v);
            s.join(t, (v, vt) -> v + vt).to("out");
            s.leftJoin(t, (v, vt) -> v + vt).to("out");
            s.groupByKey().count(Materialized.as("counts")).toStream().mapValues(n -> "" + n).to("out");
        });
        m.put("rekey-mapvalues-join", b -> {
            KTable<String, String> t = table(b, "table", "table-store");
            KStream<String, String> s = in(b).selectKey((k, v) -> v).mapValues(v -> v);
            s.join(t, (v, vt) -> v + vt).to("out");
            s.groupByKey().count(Materialized.as("c1")).toStream().to("c1");
            s.groupByKey().count(Materialized.as("c2")).toStream().to("c2");
        });
        m.put("rekey-filter-count-and-to", b -> {
            KStream<String, String> k = in(b).selectKey((x, v) -> v);
            KStream<String, String> f = k.filter((x, v) -> true);
            f.groupByKey().count(Materialized.as("c")).toStream().to("counts");
            f.to("rekeyed");
            k.to("direct");
        });
        m.put("totable", b -> {
            KStream<String, String> s = in(b);
            s.toTable(Materialized.as("latest")).toStream().to("out");
            s.selectKey((k, v) -> v).toTable(Materialized.as("by-value")).toStream().to("out2");
        });
        m.put("table-ops", b -> {
            KTable<String, String> t = table(b, "left", "left-store");
            t.filter((k, v) -> true).mapValues(v -> v).toStream().to("out");
            t.filterNot((k, v) -> false, Materialized.as("not-filtered")).mapValues((k, v) -> v, Named.as("with-key"))
                    .toStream(Named.as("changes")).to("out2");
            t.mapValues(v -> v, Materialized.as("mapped")).filter((k, v) -> true, Named.as("keep")).toStream().to("out3");
        });
        m.put("table-groupby", b -> {
            KTable<String, String> t = table(b, "left", "left-store");
            KGroupedTable<String, String> g = t.groupBy((k, v) -> KeyValue.pair(v, k));
            g.count(Materialized.as("cnt")).toStream().to("out");
            g.reduce((a, c) -> a + c, (a, c) -> a, Materialized.as("red")).toStream().to("out");
            KGroupedTable<String, String> g2 = t.groupBy((k, v) -> KeyValue.pair(v, k), Grouped.as("regroup"));
            g2.aggregate(() -> "", (k, v, a) -> a + v, (k, v, a) -> a, Materialized.as("agg")).toStream().to("out");
            g2.count(Materialized.as("cnt2")).toStream().to("out");
        });
        m.put("table-joins", b -> {
            KTable<String, String> l = table(b, "left", "left-store");
            KTable<String, String> r = table(b, "right", "right-store");
            l.join(r, (a, c) -> a + c).toStream().to("out");
            l.leftJoin(r, (a, c) -> a + c, Named.as("lj")).toStream().to("out");
            l.outerJoin(r, (a, c) -> a + c, Materialized.as("oj-store")).toStream().to("out");
        });
        m.put("table-join-derived", b -> {
            KTable<String, String> l = table(b, "left", "left-store");
            KTable<String, String> r = table(b, "right", "right-store");
            KTable<String, String> lf = l.filter((k, v) -> v.length() > 2);
            KTable<String, String> rm = r.mapValues(v -> v.toUpperCase());
            KTable<String, String> j1 = lf.leftJoin(rm, (a, c) -> a + "/" + c, Materialized.as("j1"));
            j1.toStream().to("out");
            KTable<String, String> rf = r.filter((k, v) -> !v.isEmpty(), Materialized.as("right-filtered"));
            j1.outerJoin(rf.mapValues((k, v) -> k + v.length()), (a, c) -> a + "&" + c)
                    .filter((k, v) -> !v.startsWith("-"))
                    .toStream().to("out");
        });
        m.put("stream-table-join", b -> {
            KTable<String, String> t = table(b, "table", "table-store");
            KStream<String, String> s = in(b);
            s.join(t, (v, vt) -> v + vt).to("out");
            s.leftJoin(t, (v, vt) -> v + vt, Joined.as("enrich")).to("out");
        });
        m.put("stream-totable-join", b -> {
            KTable<String, String> t = in(b).toTable(Materialized.as("as-table"));
            t.join(table(b, "right", "right-store"), (a, c) -> a + "*" + c).toStream().to("out");
        });
        m.put("global", b -> {
            KStream<String, String> s = in(b);
            GlobalKTable<String, String> g = b.globalTable("products", Consumed.with(S, S), Materialized.as("products-store"));
            KStream<String, String> o = b.stream("other", Consumed.with(S, S));
            s.join(g, (k, v) -> v, (v, gv) -> v + gv).to("out");
            o.leftJoin(g, (k, v) -> v, (v, gv) -> v + gv, Named.as("enrich")).to("out");
        });
        m.put("named-sources-order", b -> {
            b.stream("z", Consumed.with(S, S).withName("zeta")).groupBy((k, v) -> v).count(Materialized.as("zc")).toStream().to("out");
            b.stream("a", Consumed.with(S, S).withName("alpha")).to("out");
            b.stream("m", Consumed.with(S, S)).selectKey((k, v) -> v).repartition(Repartitioned.as("Mid")).to("out");
        });
        m.put("merge-rekey-count", b -> {
            KStream<String, String> a = b.stream("a", Consumed.with(S, S)).selectKey((k, v) -> v);
            KStream<String, String> c = b.stream("c", Consumed.with(S, S)).selectKey((k, v) -> v);
            a.merge(c).groupByKey().count(Materialized.as("merged-counts")).toStream().to("out");
        });
        m.put("process-count", b -> in(b).process(() -> new Processor<String, String, String, String>() {
            private ProcessorContext<String, String> ctx;
            @Override
            public void init(ProcessorContext<String, String> c) { ctx = c; }
            @Override
            public void process(Record<String, String> r) { ctx.forward(r); }
        }).groupByKey().count(Materialized.as("pc")).toStream().to("out"));
        m.put("rekey-process-count", b -> in(b).selectKey((k, v) -> v).process(Describe::pass)
                .groupByKey().count(Materialized.as("pc")).toStream().to("out"));
        m.put("table-tostream-rekey-count", b -> table(b, "left", "left-store").toStream().selectKey((k, v) -> v)
                .groupByKey().count(Materialized.as("tc")).toStream().to("out"));
        m.put("named-join-rekey", b -> {
            KTable<String, String> t = table(b, "table", "table-store");
            KStream<String, String> s = in(b).selectKey((k, v) -> v);
            s.join(t, (v, vt) -> v + vt, Joined.as("enrich")).to("out");
            s.leftJoin(t, (v, vt) -> v + vt, Joined.as("enrich2")).to("out");
        });
        m.put("aggregate-reduce", b -> {
            KGroupedStream<String, String> g = in(b).groupByKey();
            g.aggregate(() -> "", (k, v, a) -> a + v, Materialized.as("agg")).toStream().to("out");
            g.reduce((a, c) -> a + c, Materialized.as("red")).toStream().to("out");
        });
        m.put("flatmap-map-stateful", b -> {
            KTable<String, String> t = table(b, "table", "table-store");
            in(b).<String, String>flatMap((k, v) -> List.of(KeyValue.pair(v, k))).groupByKey().count(Materialized.as("fc")).toStream().to("out");
            in2(b).map((k, v) -> KeyValue.pair(v, k)).join(t, (v, vt) -> v + vt).to("out");
        });
        m.put("rekey-peek-split-count", b -> {
            KStream<String, String> k = in(b).selectKey((x, v) -> v).peek((x, v) -> {});
            Map<String, KStream<String, String>> br = k.split(Named.as("s-")).branch((x, v) -> true, Branched.as("x")).defaultBranch(Branched.as("y"));
            br.get("s-x").groupByKey().count(Materialized.as("cx")).toStream().to("out");
            br.get("s-y").groupByKey().count(Materialized.as("cy")).toStream().to("out");
        });
        m.put("rekey-totable-and-count", b -> {
            KStream<String, String> k = in(b).selectKey((x, v) -> v);
            k.toTable(Materialized.as("t")).toStream().to("out");
            k.groupByKey().count(Materialized.as("c")).toStream().to("out");
            k.join(k.toTable(Materialized.as("t2")), (a, c) -> a + c).to("out");
        });
        m.put("join-of-join", b -> {
            KTable<String, String> l = table(b, "left", "left-store");
            KTable<String, String> r = table(b, "right", "right-store");
            KTable<String, String> x = table(b, "extra", "extra-store");
            KTable<String, String> lr = l.join(r, (a, c) -> a + c);
            lr.join(x, (a, c) -> a + c).toStream().to("out");
            in(b).join(lr, (v, vt) -> v + vt).to("out2");
            x.leftJoin(lr.filter((k, v) -> true), (a, c) -> a + c).toStream().to("out3");
        });
        m.put("big-fanout", b -> {
            KStream<String, String> s = in(b);
            for (int i = 0; i < 15; i++) {
                KStream<String, String> c = s.filter((k, v) -> true);
                for (int j = 0; j < i % 4; j++) {
                    c = c.mapValues(v -> v);
                }
                if (i % 3 == 0) {
                    c.to("out" + i);
                } else if (i % 3 == 1) {
                    c.peek((k, v) -> {}).foreach((k, v) -> {});
                } else {
                    c.to("out");
                    c.to("more");
                }
            }
        });
        m.put("multi-topics-hash", b -> b.stream(List.of("orders", "payments", "a-very-long-topic-name", "zzz", "shipments"), Consumed.with(S, S)).to("out"));
        m.put("process-two-stores", b -> {
            b.addStateStore(Stores.keyValueStoreBuilder(Stores.persistentKeyValueStore("beta"), S, S));
            b.addStateStore(Stores.keyValueStoreBuilder(Stores.persistentKeyValueStore("alpha-store"), S, S));
            b.addStateStore(Stores.keyValueStoreBuilder(Stores.persistentKeyValueStore("gamma-7"), S, S));
            in(b).process(Describe::pass, "beta", "alpha-store", "gamma-7").to("out");
        });
        m.put("processvalues-count", b -> in(b).processValues(Describe::passValues)
                .groupByKey().count(Materialized.as("pvc")).toStream().to("out"));
        m.put("rekey-processvalues-two-counts", b -> {
            KStream<String, String> p = in(b).selectKey((k, v) -> v).processValues(Describe::passValues);
            p.groupByKey().count(Materialized.as("c1")).toStream().to("out");
            p.groupByKey().count(Materialized.as("c2")).toStream().to("out");
        });
        m.put("processvalues-named-store", b -> {
            b.addStateStore(Stores.keyValueStoreBuilder(Stores.persistentKeyValueStore("pv-store"), S, S));
            in(b).processValues(Describe::passValues, Named.as("pv"), "pv-store").mapValues(v -> v).to("out");
            in2(b).processValues(Describe::passValues).processValues(Describe::passValues).to("out2");
        });
        m.put("groupby-named-two-aggs", b -> {
            KGroupedStream<String, String> g = in(b).groupBy((k, v) -> v, Grouped.as("g"));
            g.count(Materialized.as("gc")).toStream().to("out");
            g.aggregate(() -> "", (k, v, a) -> a + v, Materialized.as("ga")).toStream().to("out");
        });
        m.put("rekey-repartition-and-count", b -> {
            KStream<String, String> k = in(b).selectKey((x, v) -> v);
            k.repartition(Repartitioned.as("explicit")).to("out");
            k.groupByKey().count(Materialized.as("c")).toStream().to("out");
        });
        m.put("rekey-split-default-count", b -> {
            Map<String, KStream<String, String>> br = in(b).selectKey((x, v) -> v).split()
                    .branch((x, v) -> v.isEmpty(), Branched.as("x"))
                    .defaultBranch(Branched.as("rest"));
            for (Map.Entry<String, KStream<String, String>> e : br.entrySet()) {
                if (e.getKey().endsWith("x")) {
                    e.getValue().to("empty");
                }
            }
            for (Map.Entry<String, KStream<String, String>> e : br.entrySet()) {
                if (e.getKey().endsWith("rest")) {
                    e.getValue().groupByKey().count(Materialized.as("rc")).toStream().to("out");
                }
            }
        });
        m.put("merge-self", b -> {
            KStream<String, String> s = in(b);
            s.merge(s).to("out");
        });
        m.put("chained-rekeys", b -> {
            KTable<String, String> t = table(b, "table", "table-store");
            in(b).selectKey((k, v) -> v).selectKey((k, v) -> k + v).groupByKey().count(Materialized.as("cc")).toStream().to("out");
            in2(b).map((k, v) -> KeyValue.pair(v, k)).<String, String>flatMap((k, v) -> List.of(KeyValue.pair(v, k))).join(t, (v, vt) -> v + vt).to("out");
        });
        m.put("table-tostream-join", b -> {
            KTable<String, String> t = table(b, "table", "table-store");
            KTable<String, String> l = table(b, "left", "left-store");
            l.toStream().join(t, (v, vt) -> v + vt).to("out");
            l.toStream().filter((k, v) -> true).leftJoin(t.mapValues(v -> v), (v, vt) -> v + vt).to("out");
        });
        m.put("process-window-stores", b -> {
            b.addStateStore(Stores.windowStoreBuilder(Stores.persistentWindowStore("win-store", Duration.ofHours(1), Duration.ofSeconds(10), false), S, S));
            b.addStateStore(Stores.sessionStoreBuilder(Stores.persistentSessionStore("sess-store", Duration.ofHours(1)), S, S));
            b.addStateStore(Stores.windowStoreBuilder(Stores.inMemoryWindowStore("dup-store", Duration.ofMinutes(1), Duration.ofSeconds(10), true), S, S));
            in(b).process(Describe::pass, Named.as("windows"), "win-store", "sess-store").to("out");
            in2(b).process(Describe::pass, "dup-store").to("out2");
        });
        m.put("named-aggregations", b -> {
            KGroupedStream<String, String> g = in(b).groupByKey();
            g.count(Named.as("counter"), Materialized.as("counts")).toStream().to("out");
            g.reduce((a, c) -> a + c, Named.as("reducer"), Materialized.as("reduced")).toStream().to("out");
            g.aggregate(() -> "", (k, v, a) -> a + v, Named.as("aggregator"), Materialized.as("aggregated")).toStream().to("out");
            g.windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofSeconds(10)))
                    .count(Named.as("win-counter"), Materialized.as("win-counts")).toStream().to("out");
            g.windowedBy(SessionWindows.ofInactivityGapWithNoGrace(Duration.ofSeconds(5)))
                    .reduce((a, c) -> a + c, Named.as("sess-reducer"), Materialized.as("sess-reduced")).toStream().to("out");
        });
        m.put("named-rekeyed-aggregation", b -> in(b).selectKey((k, v) -> v).groupByKey()
                .aggregate(() -> "", (k, v, a) -> a + v, Named.as("by-value-agg"), Materialized.as("by-value")).toStream().to("out"));
        m.put("named-table-aggregations", b -> {
            KGroupedTable<String, String> g = table(b, "table", "table-store").groupBy((k, v) -> KeyValue.pair(v, k));
            g.count(Named.as("tcounter"), Materialized.as("tcounts")).toStream().to("out");
            g.reduce((a, c) -> a + c, (a, c) -> a, Named.as("treducer"), Materialized.as("treduced")).toStream().to("out");
        });
        m.put("named-totable", b -> in(b).selectKey((k, v) -> v)
                .toTable(Named.as("as-table"), Materialized.as("tt-store")).toStream().to("out"));
        m.put("mapvalues-serde-suppress", b -> in(b).groupByKey()
                .windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofSeconds(10))).count(Materialized.as("wcounts"))
                .filter((k, n) -> n > 0, Materialized.<Windowed<String>, Long, KeyValueStore<Bytes, byte[]>>with(null, Serdes.Long()))
                .mapValues(n -> "n=" + n, Materialized.<Windowed<String>, String, KeyValueStore<Bytes, byte[]>>with(null, S))
                .suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()))
                .toStream().to("out"));
        m.put("wordcount", b -> {
            KStream<String, String> lines = b.stream("text-lines", Consumed.with(S, S));
            lines.flatMapValues(line -> List.of(line.split(" ")))
                    .groupBy((k, w) -> w, Grouped.as("by-word"))
                    .count(Materialized.as("word-counts"))
                    .toStream().to("word-counts");
        });
        return m;
    }

    static Processor<String, String, String, String> pass() {
        return new Processor<String, String, String, String>() {
            private ProcessorContext<String, String> ctx;
            @Override
            public void init(ProcessorContext<String, String> c) { ctx = c; }
            @Override
            public void process(Record<String, String> r) { ctx.forward(r); }
        };
    }

    static FixedKeyProcessor<String, String, String> passValues() {
        return new FixedKeyProcessor<String, String, String>() {
            private FixedKeyProcessorContext<String, String> ctx;
            @Override
            public void init(FixedKeyProcessorContext<String, String> c) { ctx = c; }
            @Override
            public void process(FixedKeyRecord<String, String> r) { ctx.forward(r); }
        };
    }

    static KStream<String, String> in2(StreamsBuilder b) {
        return b.stream("in2", Consumed.with(S, S));
    }

    public static void main(String[] args) {
        String mode = args.length > 0 ? args[0] : "all";
        java.util.Set<String> only = new java.util.HashSet<>();
        for (int i = 1; i < args.length; i++) {
            only.add(args[i]);
        }
        for (Map.Entry<String, Consumer<StreamsBuilder>> e : topologies().entrySet()) {
            if (!only.isEmpty() && !only.contains(e.getKey())) {
                continue;
            }
            Properties props = new Properties();
            props.put(StreamsConfig.APPLICATION_ID_CONFIG, "describe");
            props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "dummy:1234");
            props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
            props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
            if (mode.equals("all")) {
                props.put(StreamsConfig.TOPOLOGY_OPTIMIZATION_CONFIG, StreamsConfig.OPTIMIZE);
            }
            // kstream treats process() as key- and value-changing, as Java does with the
            // KAFKA-19668 fix enabled.
            props.put("__enable.process.processValue.fix__", true);
            StreamsBuilder b = new StreamsBuilder(new org.apache.kafka.streams.TopologyConfig(new StreamsConfig(props)));
            String text;
            try {
                e.getValue().accept(b);
                text = b.build(props).describe().toString();
            } catch (RuntimeException ex) {
                text = "ERROR: " + ex;
            }
            System.out.print("=== " + e.getKey() + "\n" + text + "=== end\n");
        }
    }
}
