package conformance;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.function.Consumer;

import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.TopologyDescription;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.kstream.Branched;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Named;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Repartitioned;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.test.TestRecord;

/**
 * Runs each conformance scenario in TopologyTestDriver and writes its output to
 * {@code <outdir>/<scenario>.txt}, one line per output record:
 * {@code key|value|timestampMillis|name=value,name=value}.
 *
 * <p>The scenarios mirror kstreamtest/conformance_test.go; keep the two in step. Stream
 * scenarios read topic {@code in}; table scenarios read topics {@code left} and {@code right}
 * (see {@link #tableInput()}). Caching is disabled, so every table update is emitted.
 */
public final class Main {
    private static final Serde<String> STRING = Serdes.String();
    private static final String[] WORDS = {"kafka", "streams", "go", "", "exactly", "once", "tables", "joins"};
    private static final long T0 = 1_700_000_000_000L;

    private Main() {}

    public static void main(String[] args) throws IOException {
        if (args.length != 1) {
            System.err.println("usage: conformance.Main OUTDIR");
            System.exit(2);
        }
        Path outDir = Path.of(args[0]);
        Files.createDirectories(outDir);

        Map<String, Consumer<KStream<String, String>>> scenarios = new LinkedHashMap<>();
        scenarios.put("stateless", s -> stateless(s, false));
        scenarios.put("repartition", s -> stateless(s, true));
        scenarios.put("siblings", Main::siblings);
        scenarios.put("flatmap-selectkey", Main::flatMapSelectKey);

        for (Map.Entry<String, Consumer<KStream<String, String>>> e : scenarios.entrySet()) {
            write(outDir, e.getKey(), run(e.getValue()));
        }

        Map<String, Consumer<StreamsBuilder>> tables = new LinkedHashMap<>();
        tables.put("table-filter-mapvalues", Main::tableFilterMapValues);
        tables.put("table-groupby-count", Main::tableGroupByCount);
        tables.put("table-groupby-aggregate", Main::tableGroupByAggregate);
        tables.put("table-groupby-reduce", Main::tableGroupByReduce);
        tables.put("table-join-inner", b -> tableJoin(b, "inner"));
        tables.put("table-join-left", b -> tableJoin(b, "left"));
        tables.put("table-join-outer", b -> tableJoin(b, "outer"));
        tables.put("table-join-derived", Main::tableJoinDerived);
        tables.put("stream-totable", Main::streamToTable);
        tables.put("stream-totable-join", Main::streamToTableJoin);
        tables.put("stream-table-join-derived", Main::streamTableJoinDerived);
        tables.put("stream-count-filter", Main::streamCountFilter);
        tables.put("stream-groupby-reduce", Main::streamGroupByReduce);
        for (Map.Entry<String, Consumer<StreamsBuilder>> e : tables.entrySet()) {
            write(outDir, e.getKey(), runTables(e.getValue()));
        }
    }

    private static void write(Path outDir, String name, List<String> lines) throws IOException {
        Path file = outDir.resolve(name + ".txt");
        StringBuilder sb = new StringBuilder();
        for (String line : lines) {
            sb.append(line).append('\n');
        }
        Files.writeString(file, sb.toString(), StandardCharsets.UTF_8);
        System.out.println("wrote " + file + " (" + lines.size() + " records)");
    }

    private static KTable<String, String> left(StreamsBuilder b) {
        return b.table("left", Consumed.with(STRING, STRING), Materialized.as("left-store"));
    }

    private static KTable<String, String> right(StreamsBuilder b) {
        return b.table("right", Consumed.with(STRING, STRING), Materialized.as("right-store"));
    }

    private static Materialized<String, String, KeyValueStore<Bytes, byte[]>> store(String name) {
        return Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as(name).withKeySerde(STRING).withValueSerde(STRING);
    }

    private static String orDash(String s) {
        return s == null ? "-" : s;
    }

    // The first letter of a value; "_" for an empty or null one.
    private static String letter(String v) {
        return v == null || v.isEmpty() ? "_" : v.substring(0, 1);
    }

    // table-filter-mapvalues: filter, filterNot and mapValues (with and without key) on a
    // source table; filtered-out updates and deletes reach the topic as tombstones.
    private static void tableFilterMapValues(StreamsBuilder b) {
        KTable<String, String> t = left(b);
        t.filter((k, v) -> v.length() > 4).mapValues(v -> v.toUpperCase()).toStream().to("out");
        t.filterNot((k, v) -> v.startsWith("s")).mapValues((k, v) -> k + ":" + v).filter((k, v) -> !v.endsWith(":"))
                .toStream().to("out");
    }

    // table-groupby-count: regroup by the value's first letter and count.
    private static void tableGroupByCount(StreamsBuilder b) {
        left(b).groupBy((k, v) -> KeyValue.pair(letter(v), v))
                .count(Materialized.as("letters"))
                .mapValues(n -> String.valueOf(n))
                .toStream().to("out");
    }

    // table-groupby-aggregate: regroup the keys by their value's length, with an adder and a
    // subtractor that record what they did.
    private static void tableGroupByAggregate(StreamsBuilder b) {
        left(b).groupBy((k, v) -> KeyValue.pair("len" + v.length(), k))
                .aggregate(() -> "", (g, k, agg) -> agg + "+" + k, (g, k, agg) -> agg + "-" + k, store("by-length"))
                .toStream().to("out");
    }

    // table-groupby-reduce: regroup by first letter, reduce with an adder and a subtractor.
    private static void tableGroupByReduce(StreamsBuilder b) {
        left(b).groupBy((k, v) -> KeyValue.pair(letter(v), k + "=" + v))
                .reduce((agg, v) -> agg + "+" + v, (agg, v) -> agg + "-" + v, store("reduced"))
                .toStream().to("out");
    }

    // table-join-*: a primary-key table-table join of the two source tables.
    private static void tableJoin(StreamsBuilder b, String kind) {
        KTable<String, String> l = left(b);
        KTable<String, String> r = right(b);
        KTable<String, String> j;
        switch (kind) {
            case "inner":
                j = l.join(r, (a, c) -> a + "/" + c);
                break;
            case "left":
                j = l.leftJoin(r, (a, c) -> a + "/" + orDash(c));
                break;
            default:
                j = l.outerJoin(r, (a, c) -> orDash(a) + "/" + orDash(c));
        }
        j.toStream().to("out");
    }

    // table-join-derived: joins of tables without stores of their own (read through their
    // parents), a materialized filter and join, and a join of a join.
    private static void tableJoinDerived(StreamsBuilder b) {
        KTable<String, String> l = left(b);
        KTable<String, String> r = right(b);
        KTable<String, String> lf = l.filter((k, v) -> v.length() > 2);
        KTable<String, String> rm = r.mapValues(v -> v.toUpperCase());
        KTable<String, String> j1 = lf.leftJoin(rm, (a, c) -> a + "/" + orDash(c), store("j1"));
        j1.toStream().to("out");
        KTable<String, String> rf = r.filter((k, v) -> !v.isEmpty(), store("right-filtered"));
        j1.outerJoin(rf.mapValues((k, v) -> k + v.length()), (a, c) -> orDash(a) + "&" + orDash(c))
                .filter((k, v) -> !v.startsWith("-"))
                .toStream().to("out");
    }

    // stream-totable: a re-keyed stream read as a table (through a repartition topic).
    private static void streamToTable(StreamsBuilder b) {
        b.stream("left", Consumed.with(STRING, STRING))
                .selectKey((k, v) -> letter(v))
                .toTable(Named.as("by-letter"), store("by-letter"))
                .toStream().to("out");
    }

    // stream-totable-join: a stream read as a table, joined with a source table.
    private static void streamToTableJoin(StreamsBuilder b) {
        KTable<String, String> t = b.stream("left", Consumed.with(STRING, STRING)).toTable(store("as-table"));
        t.join(right(b), (a, c) -> a + "*" + c).toStream().to("out");
    }

    // stream-table-join-derived: stream-table joins with a filtered table; stream records with
    // a null value are dropped.
    private static void streamTableJoinDerived(StreamsBuilder b) {
        KStream<String, String> s = b.stream("left", Consumed.with(STRING, STRING));
        KTable<String, String> rt = right(b).filter((k, v) -> !v.isEmpty());
        s.join(rt, (a, c) -> a + "|" + c).to("out");
        s.leftJoin(rt, (a, c) -> a + "|" + orDash(c)).to("out");
    }

    // stream-count-filter: a stream count (skipping null values; each update has the largest
    // timestamp so far) and a filter of the count table, which sees the initial 0 as the old
    // value of a key's first count.
    private static void streamCountFilter(StreamsBuilder b) {
        KTable<String, Long> counts = b.stream("left", Consumed.with(STRING, STRING)).groupByKey().count(Materialized.as("counts"));
        counts.mapValues(n -> "count " + n).toStream().to("out");
        counts.filter((k, n) -> n % 2 == 0).mapValues(n -> "even " + n).toStream().to("out");
    }

    // stream-groupby-reduce: a re-keyed stream reduced after a repartition; null values are
    // repartitioned as nulls and skipped by the reduce.
    private static void streamGroupByReduce(StreamsBuilder b) {
        b.stream("left", Consumed.with(STRING, STRING))
                .groupBy((k, v) -> letter(v))
                .reduce((agg, v) -> agg + "+" + v, store("reduced-stream"))
                .toStream().to("out");
    }

    // The input of every table scenario, for i = 0..59: topic "right" when i % 3 == 2, else
    // "left"; key "k" + (i * 7 % 5); value null when i % 7 == 5, else WORDS[i % 8]; timestamp
    // T0 + ((i * 13) % 40) * 1000 (out of order); header i when i % 4 == 0.
    private static List<String[]> tableInput() {
        List<String[]> recs = new ArrayList<>();
        for (int i = 0; i < 60; i++) {
            String topic = i % 3 == 2 ? "right" : "left";
            String value = i % 7 == 5 ? null : WORDS[i % WORDS.length];
            String ts = String.valueOf(T0 + ((i * 13L) % 40) * 1000L);
            String header = i % 4 == 0 ? String.valueOf(i) : null;
            recs.add(new String[] {topic, "k" + (i * 7 % 5), value, ts, header});
        }
        return recs;
    }

    private static List<String> runTables(Consumer<StreamsBuilder> build) {
        StreamsBuilder builder = new StreamsBuilder();
        build.accept(builder);
        Topology topology = builder.build();
        // Records of an input topic that the scenario does not read are not piped.
        Set<String> sources = new HashSet<>();
        for (TopologyDescription.Subtopology sub : topology.describe().subtopologies()) {
            for (TopologyDescription.Node n : sub.nodes()) {
                if (n instanceof TopologyDescription.Source) {
                    sources.addAll(((TopologyDescription.Source) n).topicSet());
                }
            }
        }
        List<String> lines = new ArrayList<>();
        try (TopologyTestDriver driver = new TopologyTestDriver(topology, props())) {
            Map<String, TestInputTopic<String, String>> ins = new LinkedHashMap<>();
            TestOutputTopic<String, String> out = driver.createOutputTopic("out", new StringDeserializer(), new StringDeserializer());
            for (String[] r : tableInput()) {
                if (!sources.contains(r[0])) {
                    continue;
                }
                TestInputTopic<String, String> in = ins.computeIfAbsent(r[0],
                        t -> driver.createInputTopic(t, new StringSerializer(), new StringSerializer()));
                RecordHeaders headers = new RecordHeaders();
                if (r[4] != null) {
                    headers.add("i", r[4].getBytes(StandardCharsets.UTF_8));
                }
                in.pipeInput(new TestRecord<>(r[1], r[2], headers, Instant.ofEpochMilli(Long.parseLong(r[3]))));
            }
            for (TestRecord<String, String> r : out.readRecordsToList()) {
                lines.add(format(r));
            }
        }
        return lines;
    }

    private static Properties props() {
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, "conformance");
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "dummy:1234");
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0L); // every update is emitted
        return props;
    }

    // stateless: filter, split into two named branches, mapValues / flatMapValues, merge;
    // with repartition, also selectKey and a named repartition topic.
    private static void stateless(KStream<String, String> s, boolean repartition) {
        Map<String, KStream<String, String>> br = s.filter((k, v) -> !v.isEmpty())
                .split(Named.as("len-"))
                .branch((k, v) -> v.length() <= 5, Branched.as("short"))
                .defaultBranch(Branched.as("long"));
        KStream<String, String> shortOnes = need(br, "len-short").mapValues(v -> v.toUpperCase());
        KStream<String, String> longOnes = need(br, "len-long").flatMapValues(v -> List.of(v.substring(0, 3), v.substring(3)));
        KStream<String, String> merged = shortOnes.merge(longOnes);
        if (repartition) {
            merged = merged.selectKey((k, v) -> k + "/" + v.substring(0, 1))
                    .repartition(Repartitioned.<String, String>as("eq").withKeySerde(STRING).withValueSerde(STRING));
        }
        merged.to("out", Produced.with(STRING, STRING));
    }

    // siblings: three sinks to the same topic from one source, two of which never write.
    private static void siblings(KStream<String, String> s) {
        s.filter((k, v) -> false).to("out");
        Map<String, KStream<String, String>> br = s.split()
                .branch((k, v) -> false, Branched.as("never"))
                .noDefaultBranch();
        // Without Named the map key is the generated splitter name followed by "never".
        if (br.size() != 1 || !br.keySet().iterator().next().endsWith("never")) {
            throw new IllegalStateException("unexpected split branches: " + br.keySet());
        }
        br.values().iterator().next().to("out");
        s.mapValues(v -> v.toUpperCase()).to("out");
    }

    // flatmap-selectkey: a key-changing flatMap, then selectKey, straight to the sink.
    private static void flatMapSelectKey(KStream<String, String> s) {
        s.<String, String>flatMap((k, v) -> v.isEmpty()
                        ? List.<KeyValue<String, String>>of()
                        : List.of(KeyValue.pair(v.substring(0, 1), k), KeyValue.pair(k, v)))
                .selectKey((k, v) -> k + "!")
                .to("out");
    }

    private static KStream<String, String> need(Map<String, KStream<String, String>> br, String name) {
        KStream<String, String> s = br.get(name);
        if (s == null) {
            throw new IllegalStateException("no branch " + name + " in " + br.keySet());
        }
        return s;
    }

    private static List<TestRecord<String, String>> input() {
        List<TestRecord<String, String>> recs = new ArrayList<>();
        for (int i = 0; i < 40; i++) {
            RecordHeaders headers = new RecordHeaders();
            if (i % 3 == 0) {
                headers.add("i", String.valueOf(i).getBytes(StandardCharsets.UTF_8));
            }
            recs.add(new TestRecord<>("k" + (i % 7), WORDS[i % WORDS.length], headers, Instant.ofEpochMilli(T0 + i * 1000L)));
        }
        return recs;
    }

    private static List<String> run(Consumer<KStream<String, String>> build) {
        StreamsBuilder builder = new StreamsBuilder();
        build.accept(builder.stream("in", Consumed.with(STRING, STRING)));

        List<String> lines = new ArrayList<>();
        try (TopologyTestDriver driver = new TopologyTestDriver(builder.build(), props())) {
            TestInputTopic<String, String> in = driver.createInputTopic("in", new StringSerializer(), new StringSerializer());
            TestOutputTopic<String, String> out = driver.createOutputTopic("out", new StringDeserializer(), new StringDeserializer());
            for (TestRecord<String, String> r : input()) {
                in.pipeInput(r);
            }
            for (TestRecord<String, String> r : out.readRecordsToList()) {
                lines.add(format(r));
            }
        }
        return lines;
    }

    private static String format(TestRecord<String, String> r) {
        StringBuilder hs = new StringBuilder();
        for (Header h : r.headers()) {
            if (hs.length() > 0) {
                hs.append(',');
            }
            hs.append(h.key()).append('=');
            if (h.value() != null) {
                hs.append(new String(h.value(), StandardCharsets.UTF_8));
            }
        }
        return str(r.key()) + "|" + str(r.value()) + "|" + r.timestamp() + "|" + hs;
    }

    // A Kafka null (a tombstone, for the table scenarios) is written as <null>.
    private static String str(String s) {
        return s == null ? "<null>" : s;
    }
}
