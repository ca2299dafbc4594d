package nulls;

import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.function.Consumer;

import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.GlobalKTable;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Repartitioned;
import org.apache.kafka.streams.test.TestRecord;

/** Null-key / null-value scenarios in TopologyTestDriver (kafka-streams 4.4.0). */
public final class Main {
    private static final Serde<String> S = Serdes.String();
    private static final long T0 = 1_700_000_000_000L;

    // table, global, then stream input: {topic, key, value}; null = Kafka null.
    private static final String[][] INPUT = {
        {"table", "a", "TA"},
        {"table", null, "TN"},
        {"table", "b", "TB"},
        {"table", "b", null},
        {"table", "c", null},
        {"global", "a", "GA"},
        {"global", null, "GN"},
        {"global", "x", "GX"},
        {"in", "a", "x"},
        {"in", null, "y"},
        {"in", "b", null},
        {"in", null, null},
        {"in", "a", "z"},
    };

    public static void main(String[] args) {
        Map<String, Consumer<StreamsBuilder>> sc = new LinkedHashMap<>();
        sc.put("stateless", b -> {
            KStream<String, String> s = in(b);
            s.filter((k, v) -> true).peek((k, v) -> {}).to("out");
            s.mapValues(v -> v == null ? "mv-null" : "mv-" + v).to("out");
            s.selectKey((k, v) -> k == null ? "sk-null" : "sk-" + k).to("out");
            s.flatMapValues(v -> List.of(v == null ? "fmv-null" : "fmv-" + v)).to("out");
            s.split().branch((k, v) -> true).noDefaultBranch().values().forEach(x -> x.to("out"));
        });
        sc.put("merge-self", b -> {
            KStream<String, String> s = in(b);
            s.merge(s).to("out");
        });
        sc.put("merge-two", b -> {
            KStream<String, String> s = in(b);
            s.merge(s.filter((k, v) -> true)).to("out");
        });
        sc.put("repartition", b -> in(b).repartition(Repartitioned.as("rp")).to("out"));
        sc.put("selectkey-null-repartition", b -> in(b).selectKey((k, v) -> v == null ? null : k).repartition(Repartitioned.as("rp")).to("out"));
        sc.put("count", b -> in(b).groupByKey().count(Materialized.as("cnt")).toStream().mapValues(n -> "" + n).to("out"));
        sc.put("reduce", b -> in(b).groupByKey().reduce((a, v) -> a + "+" + v, Materialized.as("red")).toStream().to("out"));
        sc.put("aggregate", b -> in(b).groupByKey().aggregate(() -> "", (k, v, a) -> a + "+" + v, Materialized.as("agg")).toStream().to("out"));
        sc.put("groupby-count", b -> in(b).groupBy((k, v) -> k, Grouped.as("gb")).count(Materialized.as("cnt")).toStream().mapValues(n -> "" + n).to("out"));
        sc.put("groupby-value-count", b -> in(b).groupBy((k, v) -> v, Grouped.as("gb")).count(Materialized.as("cnt")).toStream().mapValues(n -> "" + n).to("out"));
        sc.put("join", b -> in(b).join(table(b), (v, t) -> v + "/" + t).to("out"));
        sc.put("leftjoin", b -> in(b).leftJoin(table(b), (v, t) -> v + "/" + t).to("out"));
        sc.put("selectkey-leftjoin", b -> in(b).selectKey((k, v) -> k).leftJoin(table(b), (v, t) -> v + "/" + t).to("out"));
        sc.put("repartition-leftjoin-sibling", b -> {
            KStream<String, String> r = in(b).repartition(Repartitioned.as("rp"));
            r.to("out");
            r.leftJoin(table(b), (v, t) -> v + "/" + t).to("out");
        });
        sc.put("repartition-rekey-leftjoin", b -> in(b).repartition(Repartitioned.as("rp")).selectKey((k, v) -> k)
                .leftJoin(table(b), (v, t) -> v + "/" + t).to("out"));
        sc.put("rekey-count-and-leftjoin", b -> {
            KStream<String, String> s = in(b).selectKey((k, v) -> k);
            s.groupByKey().count(Materialized.as("cnt")).toStream().mapValues(n -> "" + n).to("out");
            s.leftJoin(table(b), (v, t) -> v + "/" + t).to("out");
        });
        sc.put("global-join-key", b -> in(b).join(global(b), (k, v) -> k, (v, g) -> v + "/" + g).to("out"));
        sc.put("global-leftjoin-key", b -> in(b).leftJoin(global(b), (k, v) -> k, (v, g) -> v + "/" + g).to("out"));
        sc.put("global-join-const", b -> in(b).join(global(b), (k, v) -> "a", (v, g) -> v + "/" + g).to("out"));
        sc.put("global-leftjoin-const", b -> in(b).leftJoin(global(b), (k, v) -> "a", (v, g) -> v + "/" + g).to("out"));
        sc.put("totable", b -> in(b).toTable(Materialized.as("tt")).toStream().to("out"));
        sc.put("selectkey-totable", b -> in(b).selectKey((k, v) -> k).toTable(Materialized.as("tt")).toStream().to("out"));
        sc.put("table-source", b -> table(b).toStream().to("out"));
        sc.put("table-reduce-null-adder", b -> b.table("table", Consumed.with(S, S), Materialized.as("t"))
                .groupBy((k, v) -> KeyValue.pair("g", v))
                .reduce((a, v) -> v.equals("TB") ? null : a + "+" + v, (a, v) -> a + "-" + v, Materialized.as("tr"))
                .toStream().to("out"));
        sc.put("table-aggregate-null-adder", b -> b.table("table", Consumed.with(S, S), Materialized.as("t"))
                .groupBy((k, v) -> KeyValue.pair("g", v))
                .aggregate(() -> "", (k, v, a) -> v.equals("TB") ? null : a + "+" + v, (k, v, a) -> a + "-" + v, Materialized.as("tr"))
                .toStream().to("out"));

        String only = args.length > 0 ? args[0] : null;
        for (Map.Entry<String, Consumer<StreamsBuilder>> e : sc.entrySet()) {
            if (only != null && !e.getKey().equals(only)) {
                continue;
            }
            System.out.println("== " + e.getKey());
            try {
                run(e.getValue(), INPUT);
            } catch (Exception ex) {
                System.out.println("  EXCEPTION " + ex);
            }
        }
        if (only == null || only.equals("table-reduce-seq")) {
            // reduce: the adder returns null for "TB", then "TC" is added: does it start fresh?
            System.out.println("== table-reduce-seq");
            String[][] seq = {{"table", "a", "TA"}, {"table", "b", "TB"}, {"table", "c", "TC"}};
            run(b -> b.table("table", Consumed.with(S, S), Materialized.as("t"))
                    .groupBy((k, v) -> KeyValue.pair("g", v))
                    .reduce((a, v) -> v.equals("TB") ? null : a + "+" + v, (a, v) -> a + "-" + v, Materialized.as("tr"))
                    .toStream().to("out"), seq);
            System.out.println("== table-aggregate-seq");
            run(b -> b.table("table", Consumed.with(S, S), Materialized.as("t"))
                    .groupBy((k, v) -> KeyValue.pair("g", v))
                    .aggregate(() -> "", (k, v, a) -> v.equals("TB") ? null : a + "+" + v, (k, v, a) -> a + "-" + v, Materialized.as("tr"))
                    .toStream().to("out"), seq);
        }
    }

    private static KStream<String, String> in(StreamsBuilder b) {
        return b.stream("in", Consumed.with(S, S));
    }

    private static KTable<String, String> table(StreamsBuilder b) {
        return b.table("table", Consumed.with(S, S), Materialized.as("tbl"));
    }

    private static GlobalKTable<String, String> global(StreamsBuilder b) {
        return b.globalTable("global", Consumed.with(S, S), Materialized.as("glb"));
    }

    private static void run(Consumer<StreamsBuilder> build, String[][] input) {
        StreamsBuilder builder = new StreamsBuilder();
        build.accept(builder);
        Properties props = new Properties();
        props.put(StreamsConfig.TOPOLOGY_OPTIMIZATION_CONFIG, StreamsConfig.OPTIMIZE);
        var topo = builder.build(props);
        String desc = topo.describe().toString();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, "nulls");
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "dummy:1234");
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0L);
        try (TopologyTestDriver d = new TopologyTestDriver(topo, props)) {
            Map<String, TestInputTopic<String, String>> ins = new LinkedHashMap<>();
            TestOutputTopic<String, String> out = d.createOutputTopic("out", new StringDeserializer(), new StringDeserializer());
            long ts = T0;
            for (String[] r : input) {
                if (!desc.contains(r[0] + "]")) {
                    continue;
                }
                TestInputTopic<String, String> t = ins.computeIfAbsent(r[0], x -> d.createInputTopic(x, new StringSerializer(), new StringSerializer()));
                t.pipeInput(new TestRecord<>(r[1], r[2], Instant.ofEpochMilli(ts)));
                ts += 1000;
                List<String> lines = new ArrayList<>();
                for (TestRecord<String, String> o : out.readRecordsToList()) {
                    lines.add(str(o.key()) + "|" + str(o.value()) + "|" + (o.timestamp() - T0));
                }
                System.out.println("  " + r[0] + " " + str(r[1]) + "|" + str(r[2]) + " -> " + lines);
            }
            double dropped = 0;
            for (Map.Entry<MetricName, ? extends Metric> m : d.metrics().entrySet()) {
                if (m.getKey().name().equals("dropped-records-total")) {
                    dropped += ((Number) m.getValue().metricValue()).doubleValue();
                }
            }
            System.out.println("  dropped-records-total=" + dropped);
        }
    }

    private static String str(String s) {
        return s == null ? "<null>" : s;
    }
}
