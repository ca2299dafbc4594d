package conformance;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Consumer;
import java.util.regex.Pattern;

import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.Bytes;
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
import org.apache.kafka.streams.kstream.EmitStrategy;
import org.apache.kafka.streams.kstream.GlobalKTable;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.KGroupedTable;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Named;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Repartitioned;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.SlidingWindows;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.Suppressed.BufferConfig;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.processor.RecordContext;
import org.apache.kafka.streams.processor.TopicNameExtractor;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.streams.test.TestRecord;

/**
 * Runs each conformance scenario in TopologyTestDriver and writes, per scenario,
 * {@code <outdir>/<scenario>.txt}, its output records, one line per record read from topic
 * {@code out}: {@code key|value|timestampMillis|name=value,name=value}; and
 * {@code <outdir>/<scenario>.describe.txt}, {@code topology.describe().toString()}.
 *
 * <p>The scenarios mirror kstreamtest/conformance_test.go one for one, in the same order and
 * with the same store, operator and topic names; keep the two in step. Every scenario gets the
 * same input ({@link #input()}): the records of the topics {@code in}, {@code left},
 * {@code right}, {@code global} and {@code win} that its topology reads, in one fixed order.
 * Caching is disabled, so every table update is emitted, and topologies are built with
 * {@code topology.optimization=all}.
 *
 * <p>Kafka nulls reach the lambdas here (a null key or value of {@code in}); kstream's lambdas
 * over strings see "" instead. So that both sides compute the same thing, the lambdas here
 * treat null as "" ({@link #nz}) and never return null unless the Go side returns a nil
 * pointer at the same place.
 */
public final class Main {
    static final Serde<String> STRING = Serdes.String();
    private static final String[] WORDS = {"kafka", "streams", "go", "", "exactly", "once", "tables", "joins"};
    static final long T0 = 1_700_000_000_000L;

    private Main() {}

    private static final Map<String, Consumer<StreamsBuilder>> SCENARIOS = new LinkedHashMap<>();

    static void add(String name, Consumer<StreamsBuilder> build) {
        if (SCENARIOS.put(name, build) != null) {
            throw new IllegalStateException("scenario " + name + " defined twice");
        }
    }

    public static void main(String[] args) throws IOException {
        if (args.length != 1) {
            System.err.println("usage: conformance.Main OUTDIR");
            System.exit(2);
        }
        Path outDir = Path.of(args[0]);
        Files.createDirectories(outDir);
        scenarios();
        for (Map.Entry<String, Consumer<StreamsBuilder>> e : SCENARIOS.entrySet()) {
            StreamsBuilder builder = new StreamsBuilder();
            e.getValue().accept(builder);
            Topology topology = builder.build(props(e.getKey())); // with its optimizations
            String describe = topology.describe().toString();
            List<String> lines;
            try {
                lines = run(e.getKey(), topology);
            } catch (RuntimeException ex) {
                throw new IllegalStateException("scenario " + e.getKey() + ": " + ex, ex);
            }
            write(outDir, e.getKey(), lines, describe);
        }
        System.out.println("wrote " + SCENARIOS.size() + " scenarios");
    }

    private static void write(Path outDir, String name, List<String> lines, String describe) throws IOException {
        StringBuilder sb = new StringBuilder();
        for (String line : lines) {
            sb.append(line).append('\n');
        }
        Files.writeString(outDir.resolve(name + ".txt"), sb.toString(), StandardCharsets.UTF_8);
        Files.writeString(outDir.resolve(name + ".describe.txt"), describe, StandardCharsets.UTF_8);
    }

    // ---- Sources and helpers (mirrored by conf* in conformance_test.go) ----

    private static KStream<String, String> in(StreamsBuilder b) {
        return b.stream("in", Consumed.with(STRING, STRING));
    }

    private static KTable<String, String> left(StreamsBuilder b) {
        return b.table("left", Consumed.with(STRING, STRING), Materialized.as("left-store"));
    }

    private static KTable<String, String> right(StreamsBuilder b) {
        return b.table("right", Consumed.with(STRING, STRING), Materialized.as("right-store"));
    }

    private static GlobalKTable<String, String> global(StreamsBuilder b) {
        return b.globalTable("global", Consumed.with(STRING, STRING), Materialized.as("global-store"));
    }

    private static Materialized<String, String, KeyValueStore<Bytes, byte[]>> store(String name) {
        return Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as(name).withKeySerde(STRING).withValueSerde(STRING);
    }

    private static Materialized<String, Long, KeyValueStore<Bytes, byte[]>> longStore(String name) {
        return Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as(name).withKeySerde(STRING).withValueSerde(Serdes.Long());
    }

    // A Kafka null as the "" that kstream's string lambdas see.
    private static String nz(String s) {
        return s == null ? "" : s;
    }

    private static String orDash(String s) {
        return s == null ? "-" : s;
    }

    // The first letter of a value; "_" for an empty or null one.
    private static String letter(String v) {
        return v == null || v.isEmpty() ? "_" : v.substring(0, 1);
    }

    private static KStream<String, String> need(Map<String, KStream<String, String>> br, String name) {
        KStream<String, String> s = br.get(name);
        if (s == null) {
            throw new IllegalStateException("no branch " + name + " in " + br.keySet());
        }
        return s;
    }

    private static KStream<String, String> win(StreamsBuilder b) {
        return b.stream("win", Consumed.with(STRING, STRING));
    }

    private static Duration secs(long n) {
        return Duration.ofSeconds(n);
    }

    /**
     * Writes a windowed table's updates to topic out: the key becomes
     * {@code <key>@<start - T0>/<end - T0>} (window bounds in ms after T0), the value a string,
     * and a tombstone stays a tombstone.
     */
    private static <V> void winOut(KTable<Windowed<String>, V> t) {
        t.toStream()
                .map((wk, v) -> KeyValue.pair(wk.key() + "@" + (wk.window().start() - T0) + "/" + (wk.window().end() - T0),
                        v == null ? null : String.valueOf(v)))
                .to("out");
    }

    /**
     * The stream partitioner of the partitioner-* scenarios (KIP-837): a null or empty value
     * goes nowhere (the record is dropped), a value longer than 5 to partitions 0 and 1
     * (multicast, in ascending order: a TreeSet, since Set.of's order varies from run to
     * run), any other to the default partitioner. TopologyTestDriver's topics have one
     * partition, but its producer takes partition 1 too; the Go side gives the topics 2.
     */
    private static Optional<Set<Integer>> multicast(String topic, String key, String value, int n) {
        String v = nz(value);
        if (v.isEmpty()) {
            return Optional.of(Set.of());
        }
        if (v.length() > 5) {
            return Optional.of(new TreeSet<>(List.of(0, 1)));
        }
        return Optional.empty();
    }

    /** The topic extractor of scenario to-topic-func: every record goes to "out". */
    private static final class OutTopic implements TopicNameExtractor<String, String> {
        @Override
        public String extract(String key, String value, RecordContext ctx) {
            return "out";
        }

        @Override
        public String toString() {
            return "topic function";
        }
    }

    // ---- The scenarios ----

    private static void scenarios() {
        // ==== Stateless stream operators (topic in: null keys, null values, "" values) ====

        // stateless: filter, split into two named branches, mapValues / flatMapValues, merge.
        add("stateless", b -> stateless(in(b), false));
        // repartition: the same, then selectKey and a named repartition topic.
        add("repartition", b -> stateless(in(b), true));
        // siblings: three sinks to the same topic from one source, two of which never write.
        add("siblings", b -> {
            KStream<String, String> s = in(b);
            s.filter((k, v) -> false).to("out");
            Map<String, KStream<String, String>> br = s.split()
                    .branch((k, v) -> false, Branched.as("never"))
                    .noDefaultBranch();
            // Without Named the map key is the generated splitter name followed by "never".
            if (br.size() != 1 || !br.keySet().iterator().next().endsWith("never")) {
                throw new IllegalStateException("unexpected split branches: " + br.keySet());
            }
            br.values().iterator().next().to("out");
            s.mapValues(v -> nz(v).toUpperCase()).to("out");
        });
        // flatmap-selectkey: a key-changing flatMap, then selectKey, straight to the sink.
        add("flatmap-selectkey", b -> in(b).<String, String>flatMap((k, v) -> nz(v).isEmpty()
                        ? List.<KeyValue<String, String>>of()
                        : List.of(KeyValue.pair(v.substring(0, 1), nz(k)), KeyValue.pair(nz(k), v)))
                .selectKey((k, v) -> k + "!")
                .to("out"));
        // filter-tombstones: a filter that keeps null and "" values; tombstones pass as
        // tombstones, null keys as null keys.
        add("filter-tombstones", b -> in(b).filter((k, v) -> nz(v).isEmpty() || v.length() > 4).to("out"));
        // filternot-peek: filterNot, then peek counting what it saw; mapValues reads the count.
        add("filternot-peek", b -> {
            int[] seen = {0};
            in(b).filterNot((k, v) -> nz(v).startsWith("s"))
                    .peek((k, v) -> seen[0]++)
                    .mapValues(v -> nz(v) + "#" + seen[0])
                    .to("out");
        });
        // map-swap: map swaps key and value (a null one becomes "").
        add("map-swap", b -> in(b).map((k, v) -> KeyValue.pair(nz(v), nz(k) + "@")).to("out"));
        // mapvalues-withkey: mapValues with the key; null keys stay null.
        add("mapvalues-withkey", b -> in(b).mapValues((k, v) -> nz(k) + ":" + nz(v)).to("out"));
        // flatmapvalues: flatMapValues without and with the key, merged.
        add("flatmapvalues", b -> {
            KStream<String, String> s = in(b);
            KStream<String, String> a = s.flatMapValues(v -> nz(v).isEmpty() ? List.<String>of() : List.of(v, v.toUpperCase()));
            KStream<String, String> c = s.flatMapValues((k, v) -> List.of(nz(k), "=" + nz(v)));
            a.merge(c).to("out");
        });
        // foreach-sibling: foreach counts every record; its sibling mapValues reads the count.
        add("foreach-sibling", b -> {
            int[] seen = {0};
            KStream<String, String> s = in(b);
            s.foreach((k, v) -> seen[0]++);
            s.mapValues(v -> nz(v) + "#" + seen[0]).to("out");
        });
        // merge-self: a stream merged with itself.
        add("merge-self", b -> {
            KStream<String, String> s = in(b);
            s.merge(s).to("out");
        });
        // merge-three: three derived streams merged in two steps.
        add("merge-three", b -> {
            KStream<String, String> s = in(b);
            KStream<String, String> shortOnes = s.filter((k, v) -> nz(v).length() <= 4);
            KStream<String, String> longOnes = s.filterNot((k, v) -> nz(v).length() <= 4).mapValues(v -> v.toUpperCase());
            shortOnes.merge(longOnes).merge(s.mapValues((k, v) -> "m:" + nz(k))).to("out");
        });
        // merge-sources: two source topics merged (one sub-topology).
        add("merge-sources", b -> {
            KStream<String, String> l = b.stream("left", Consumed.with(STRING, STRING));
            in(b).merge(l.mapValues(v -> "L" + nz(v))).to("out");
        });
        // stream-topics: one source reading two topics.
        add("stream-topics", b -> b.stream(List.of("in", "left"), Consumed.with(STRING, STRING))
                .mapValues((k, v) -> nz(k) + "/" + nz(v))
                .to("out"));
        // split-keys-values: split by empty key (null keys), empty value (null and "" values),
        // and the rest; every branch is marked and merged back.
        add("split-keys-values", b -> {
            Map<String, KStream<String, String>> br = in(b).split(Named.as("kv-"))
                    .branch((k, v) -> nz(k).isEmpty(), Branched.as("nokey"))
                    .branch((k, v) -> nz(v).isEmpty(), Branched.as("novalue"))
                    .defaultBranch(Branched.as("rest"));
            need(br, "kv-nokey").mapValues(v -> "nokey:" + nz(v))
                    .merge(need(br, "kv-novalue").mapValues((k, v) -> "novalue:" + k))
                    .merge(need(br, "kv-rest"))
                    .to("out");
        });
        // split-unnamed: split without a name, with a default branch.
        add("split-unnamed", b -> {
            Map<String, KStream<String, String>> br = in(b).split()
                    .branch((k, v) -> nz(v).length() > 5, Branched.as("long"))
                    .defaultBranch(Branched.as("other"));
            // Without Named the map keys are the generated splitter name followed by the
            // branch names; take them in a fixed order.
            KStream<String, String> lng = null;
            KStream<String, String> other = null;
            for (Map.Entry<String, KStream<String, String>> e : br.entrySet()) {
                if (e.getKey().endsWith("long")) {
                    lng = e.getValue();
                } else if (e.getKey().endsWith("other")) {
                    other = e.getValue();
                }
            }
            if (br.size() != 2 || lng == null || other == null) {
                throw new IllegalStateException("unexpected split branches: " + br.keySet());
            }
            lng.mapValues(v -> "L:" + nz(v)).to("out");
            other.mapValues(v -> "O:" + nz(v)).to("out");
        });
        // to-topic-func: a sink whose topic is chosen per record.
        add("to-topic-func", b -> in(b).filter((k, v) -> !nz(v).isEmpty()).to(new OutTopic()));
        // selectkey: a new key from the old key and the value (null keys become non-null).
        add("selectkey", b -> in(b).selectKey((k, v) -> nz(k) + letter(v)).to("out"));
        // repartition-null-keys: a repartition of the source stream as it is.
        add("repartition-null-keys", b -> in(b)
                .repartition(Repartitioned.<String, String>as("rk").withKeySerde(STRING).withValueSerde(STRING))
                .mapValues(v -> "r:" + nz(v))
                .to("out"));
        // repartition-partitions: a re-keyed stream repartitioned with a partition count.
        add("repartition-partitions", b -> in(b)
                .selectKey((k, v) -> letter(v))
                .repartition(Repartitioned.<String, String>as("rp").withKeySerde(STRING).withValueSerde(STRING).withNumberOfPartitions(3))
                .to("out"));
        // partitioner-multicast: a sink with a stream partitioner that drops, multicasts and
        // leaves records to the default (Main.multicast).
        add("partitioner-multicast", b -> in(b).to("out", Produced.streamPartitioner(Main::multicast)));
        // partitioner-repartition: a repartition with that stream partitioner.
        add("partitioner-repartition", b -> in(b)
                .selectKey((k, v) -> letter(v))
                .repartition(Repartitioned.<String, String>as("pp").withKeySerde(STRING).withValueSerde(STRING)
                        .withNumberOfPartitions(2).withStreamPartitioner(Main::multicast))
                .mapValues(v -> "p:" + nz(v))
                .to("out"));
        // pattern-source: a source subscribed by a pattern that matches topics left and right.
        add("pattern-source", b -> b.stream(Pattern.compile("le.*|righ."), Consumed.with(STRING, STRING))
                .mapValues((k, v) -> "P" + nz(v))
                .to("out"));
        // mapvalues-to-null: mapValues returning null for long values (Go: a nil *string).
        add("mapvalues-to-null", b -> in(b).mapValues(v -> nz(v).length() > 5 ? null : nz(v) + "!")
                .filter((k, v) -> v == null || !v.equals("!"))
                .to("out"));

        // named-operators: stateless operators with explicit names (source, filter,
        // mapValues, selectKey, peek, merge, sink).
        add("named-operators", b -> {
            KStream<String, String> s = b.stream("in", Consumed.with(STRING, STRING).withName("in-source"));
            KStream<String, String> f = s.filter((k, v) -> !nz(v).isEmpty(), Named.as("nonempty"));
            KStream<String, String> m = f.mapValues(v -> v.toUpperCase(), Named.as("upper"));
            KStream<String, String> k = s.selectKey((key, v) -> letter(v), Named.as("by-letter")).peek((key, v) -> { }, Named.as("look"));
            m.merge(k, Named.as("both")).to("out", Produced.<String, String>as("out-sink").withKeySerde(STRING).withValueSerde(STRING));
        });
        // through-topic: the topology writes topic mid and reads it back.
        add("through-topic", b -> {
            in(b).mapValues((k, v) -> "mid:" + nz(v)).to("mid");
            b.stream("mid", Consumed.with(STRING, STRING)).filter((k, v) -> v.length() > 6).to("out");
        });
        // merge-with-repartitioned: a stream merged with its own re-keyed, repartitioned copy
        // (the repartition topic is read in the sub-topology that writes it).
        add("merge-with-repartitioned", b -> {
            KStream<String, String> s = in(b);
            KStream<String, String> r = s.selectKey((k, v) -> letter(v))
                    .repartition(Repartitioned.<String, String>as("mr").withKeySerde(STRING).withValueSerde(STRING));
            s.merge(r.mapValues(v -> "R" + nz(v))).to("out");
        });

        // ==== Stream aggregations ====

        // stream-count: groupByKey().count() of in.
        add("stream-count", b -> in(b).groupByKey().count(Materialized.as("counts-in"))
                .toStream().mapValues(n -> String.valueOf(n)).to("out"));
        // stream-reduce: groupByKey().reduce() of in.
        add("stream-reduce", b -> in(b).groupByKey().reduce((agg, v) -> agg + "+" + v, store("reduce-in"))
                .toStream().to("out"));
        // stream-aggregate: groupByKey().aggregate() of in.
        add("stream-aggregate", b -> in(b).groupByKey()
                .aggregate(() -> "^", (k, v, agg) -> agg + v.length(), store("agg-in"))
                .toStream().to("out"));
        // stream-groupby-count: groupBy the value's letter (null values group under "_",
        // then are skipped by count).
        add("stream-groupby-count", b -> in(b).groupBy((k, v) -> letter(v)).count(Materialized.as("letter-counts"))
                .toStream().mapValues(n -> String.valueOf(n)).to("out"));
        // stream-groupby-nokey: groupBy that turns null keys into a real key "nokey".
        add("stream-groupby-nokey", b -> in(b).groupBy((k, v) -> nz(k).isEmpty() ? "nokey" : k)
                .aggregate(() -> "", (k, v, agg) -> agg + letter(v), store("nokey-agg"))
                .toStream().to("out"));
        // stream-groupby-null-key: groupBy that returns a null key for long values (Go: a
        // nil *string key); those records are dropped.
        add("stream-groupby-null-key", b -> in(b).groupBy((k, v) -> nz(v).length() > 5 ? null : letter(v))
                .count(Materialized.as("short-counts"))
                .toStream().mapValues(n -> String.valueOf(n)).to("out"));
        // stream-groupby-empty-key: groupBy the value itself: the empty word groups under the
        // empty key "" (zero bytes, not a null), which the repartition keeps and count counts.
        add("stream-groupby-empty-key", b -> in(b).groupBy((k, v) -> nz(v)).count(Materialized.as("value-counts"))
                .toStream().mapValues(n -> String.valueOf(n)).to("out"));
        // selectkey-count: selectKey, then groupByKey().count() through a repartition topic.
        add("selectkey-count", b -> in(b).selectKey((k, v) -> letter(v)).groupByKey().count(Materialized.as("sk-counts"))
                .toStream().mapValues(n -> String.valueOf(n)).to("out"));
        // two-aggregations-rekeyed: a count and a reduce of one re-keyed grouped stream.
        add("two-aggregations-rekeyed", b -> {
            KGroupedStream<String, String> g = in(b).selectKey((k, v) -> letter(v)).groupByKey();
            g.count(Materialized.as("two-count")).toStream().mapValues(n -> "count " + n).to("out");
            g.reduce((agg, v) -> agg + "+" + v, store("two-reduce")).toStream().to("out");
        });
        // chain-subtopologies: count by letter, re-key the counts by parity, sum them: three
        // sub-topologies.
        add("chain-subtopologies", b -> in(b).selectKey((k, v) -> letter(v)).groupByKey()
                .count(Materialized.as("chain-count"))
                .toStream()
                .selectKey((k, n) -> n % 2 == 0 ? "even" : "odd")
                .groupByKey(Grouped.with(STRING, Serdes.Long()))
                .reduce(Long::sum, longStore("chain-sum"))
                .toStream().mapValues(n -> String.valueOf(n)).to("out"));
        // flatmap-count: every letter of the value becomes a record keyed by the letter.
        add("flatmap-count", b -> in(b).<String, String>flatMap((k, v) -> {
                    List<KeyValue<String, String>> out = new ArrayList<>();
                    for (char c : nz(v).toCharArray()) {
                        out.add(KeyValue.pair(String.valueOf(c), nz(k)));
                    }
                    return out;
                })
                .groupByKey().count(Materialized.as("char-counts"))
                .toStream().mapValues(n -> String.valueOf(n)).to("out"));
        // stream-aggregate-null: an aggregator returning null (a delete) for "once" (Go: a
        // nil *string); the next value starts again from the initializer. Null keys and
        // empty values are filtered out first.
        add("stream-aggregate-null", b -> in(b).filter((k, v) -> k != null && !nz(v).isEmpty())
                .groupByKey()
                .aggregate(() -> "^", (k, v, agg) -> v.equals("once") ? null : agg + letter(v), store("agg-null"))
                .toStream().to("out"));
        // stream-reduce-null: a reducer returning null (a delete) when it adds "tables" (Go: a
        // nil *string); the next value starts the reduction again.
        add("stream-reduce-null", b -> in(b).filter((k, v) -> k != null && !nz(v).isEmpty())
                .mapValues(v -> v) // Go: to a *string
                .groupByKey()
                .reduce((agg, v) -> v.equals("tables") ? null : agg + "+" + v, store("reduce-null"))
                .toStream().to("out"));
        // stream-count-filter (topic left as a stream): a count and a filter of the count
        // table, which sees the initial 0 as the old value of a key's first count.
        add("stream-count-filter", b -> {
            KTable<String, Long> counts = b.stream("left", Consumed.with(STRING, STRING)).groupByKey().count(Materialized.as("counts"));
            counts.mapValues(n -> "count " + n).toStream().to("out");
            counts.filter((k, n) -> n % 2 == 0).mapValues(n -> "even " + n).toStream().to("out");
        });
        // stream-groupby-reduce (topic left as a stream): a re-keyed stream reduced after a
        // repartition; null values are repartitioned as nulls and skipped by the reduce.
        add("stream-groupby-reduce", b -> b.stream("left", Consumed.with(STRING, STRING))
                .groupBy((k, v) -> letter(v))
                .reduce((agg, v) -> agg + "+" + v, store("reduced-stream"))
                .toStream().to("out"));
        // stream-join-own-count: a stream joined with its own count table (the count is
        // updated first: it was added first).
        add("stream-join-own-count", b -> {
            KStream<String, String> s = in(b);
            KTable<String, Long> counts = s.groupByKey().count(Materialized.as("self-counts"));
            s.join(counts, (v, n) -> nz(v) + "#" + n).to("out");
        });

        // repartition-then-join: a re-keyed stream repartitioned by hand, then joined (no
        // second repartition).
        add("repartition-then-join", b -> {
            KStream<String, String> s = in(b).selectKey((k, v) -> "k" + (nz(v).length() % 5))
                    .repartition(Repartitioned.<String, String>as("rj").withKeySerde(STRING).withValueSerde(STRING));
            s.leftJoin(left(b), (v, t) -> nz(v) + "|" + orDash(t)).to("out");
        });

        // merge-sources-count: two source streams merged, then counted without a repartition
        // (null keys filtered out first).
        add("merge-sources-count", b -> {
            KStream<String, String> l = b.stream("left", Consumed.with(STRING, STRING));
            in(b).merge(l).filter((k, v) -> k != null).groupByKey().count(Materialized.as("merged-counts"))
                    .toStream().mapValues(n -> String.valueOf(n)).to("out");
        });
        // stream-join-repartitioned-table: a re-keyed stream joined with a table that is an
        // aggregation of a re-keyed table: both sides come through repartition topics.
        add("stream-join-repartitioned-table", b -> {
            KStream<String, String> s = in(b).selectKey((k, v) -> letter(v));
            KTable<String, String> t = left(b).groupBy((k, v) -> KeyValue.pair(letter(v), k))
                    .reduce((agg, v) -> agg + "+" + v, (agg, v) -> agg + "-" + v, store("letter-keys"));
            s.leftJoin(t, (v, tv) -> nz(v) + "|" + orDash(tv)).to("out");
        });

        // ==== Tables (topics left and right) ====

        // table-source: a source table as a stream of updates.
        add("table-source", b -> left(b).toStream().to("out"));
        // table-filter-mapvalues: filter, filterNot and mapValues (with and without key) on a
        // source table; filtered-out updates and deletes reach the topic as tombstones.
        add("table-filter-mapvalues", b -> {
            KTable<String, String> t = left(b);
            t.filter((k, v) -> v.length() > 4).mapValues(v -> v.toUpperCase()).toStream().to("out");
            t.filterNot((k, v) -> v.startsWith("s")).mapValues((k, v) -> k + ":" + v).filter((k, v) -> !v.endsWith(":"))
                    .toStream().to("out");
        });
        // table-filter-sendold: a filter whose old values are asked for by a groupBy, so it
        // sends no tombstones for keys it never forwarded; its toStream sibling shows that.
        add("table-filter-sendold", b -> {
            KTable<String, String> f = left(b).filter((k, v) -> v.length() > 4);
            f.toStream().to("out");
            f.groupBy((k, v) -> KeyValue.pair(letter(v), v)).count(Materialized.as("f-count"))
                    .toStream().mapValues(n -> "n" + n).to("out");
        });
        // table-mapvalues-null: mapValues returning null (a delete) for long values, then a
        // regroup that sees the deletes as old values.
        add("table-mapvalues-null", b -> {
            KTable<String, String> m = left(b).mapValues(v -> v.length() > 5 ? null : v + "!");
            m.toStream().to("out");
            m.groupBy((k, v) -> KeyValue.pair(letter(v), k)).count(Materialized.as("mn-count"))
                    .toStream().mapValues(n -> "n" + n).to("out");
        });
        // table-filter-materialized-tostream: a materialized filter as a stream (no operator
        // downstream asks for old values).
        add("table-filter-materialized-tostream", b -> left(b).filter((k, v) -> v.length() > 4, store("f-mat"))
                .toStream().to("out"));
        // table-mapvalues-materialized-null: a materialized mapValues returning null (a
        // delete) for long values (Go: a nil *string), as a stream.
        add("table-mapvalues-materialized-null", b -> left(b).mapValues(v -> v.length() > 5 ? null : v + "?", store("mv-mat"))
                .toStream().to("out"));
        // table-join-filter-materialized: a left join filtered into a store, as a stream.
        add("table-join-filter-materialized", b -> left(b).leftJoin(right(b), (a, c) -> a + "/" + orDash(c))
                .filter((k, v) -> v.length() > 7, store("jf"))
                .toStream().to("out"));
        // table-mapvalues-materialized-join: a materialized mapValues joined with right.
        add("table-mapvalues-materialized-join", b -> left(b).mapValues(v -> v.toUpperCase(), store("upper"))
                .join(right(b), (a, c) -> a + "=" + c).toStream().to("out"));
        // table-filter-materialized-reduce: a materialized filter regrouped and reduced.
        add("table-filter-materialized-reduce", b -> left(b).filter((k, v) -> !v.isEmpty(), store("nonempty"))
                .groupBy((k, v) -> KeyValue.pair(v.substring(0, 1), k))
                .reduce((agg, v) -> agg + "+" + v, (agg, v) -> agg + "-" + v, store("fm-reduce"))
                .toStream().to("out"));
        // table-chain-aggregate: filter -> mapValues -> groupBy -> aggregate, old values all
        // the way.
        add("table-chain-aggregate", b -> left(b).filter((k, v) -> v.length() > 2).mapValues(v -> v.toUpperCase())
                .groupBy((k, v) -> KeyValue.pair(v.substring(0, 1), k))
                .aggregate(() -> "", (g, k, agg) -> agg + "+" + k, (g, k, agg) -> agg + "-" + k, store("chain-agg"))
                .toStream().to("out"));
        // table-groupby-count: regroup by the value's first letter and count.
        add("table-groupby-count", b -> left(b).groupBy((k, v) -> KeyValue.pair(letter(v), v))
                .count(Materialized.as("letters"))
                .mapValues(n -> String.valueOf(n))
                .toStream().to("out"));
        // table-groupby-aggregate: regroup the keys by their value's length, with an adder and
        // a subtractor that record what they did.
        add("table-groupby-aggregate", b -> left(b).groupBy((k, v) -> KeyValue.pair("len" + v.length(), k))
                .aggregate(() -> "", (g, k, agg) -> agg + "+" + k, (g, k, agg) -> agg + "-" + k, store("by-length"))
                .toStream().to("out"));
        // table-groupby-reduce: regroup by first letter, reduce with an adder and a subtractor.
        add("table-groupby-reduce", b -> left(b).groupBy((k, v) -> KeyValue.pair(letter(v), k + "=" + v))
                .reduce((agg, v) -> agg + "+" + v, (agg, v) -> agg + "-" + v, store("reduced"))
                .toStream().to("out"));
        // table-groupby-same-key: a regroup that keeps the key (one change with old and new
        // value per update), then a join with right.
        add("table-groupby-same-key", b -> left(b).groupBy((k, v) -> KeyValue.pair(k, v.toUpperCase()))
                .reduce((agg, v) -> agg + "+" + v, (agg, v) -> agg + "-" + v, store("same-key"))
                .join(right(b), (a, c) -> a + "|" + c)
                .toStream().to("out"));
        // table-groupby-null-key: a regroup whose selector returns a null key for values
        // starting with "e" (Go: a nil *string key); those rows are skipped.
        add("table-groupby-null-key", b -> left(b).groupBy((k, v) -> KeyValue.pair(v.startsWith("e") ? null : letter(v), k))
                .count(Materialized.as("nk-count"))
                .toStream().mapValues(n -> String.valueOf(n)).to("out"));
        // table-groupby-null-value: a regroup whose selector returns a null value for long
        // values (Go: a nil *string); those rows are skipped.
        add("table-groupby-null-value", b -> left(b).groupBy((k, v) -> KeyValue.pair(letter(v), v.length() > 5 ? null : k))
                .aggregate(() -> "", (g, k, agg) -> agg + "+" + k, (g, k, agg) -> agg + "-" + k, store("nv-agg"))
                .toStream().to("out"));
        // table-reduce-null-adder: a table reduce whose adder returns null (a delete) when it
        // adds "once" (Go: a nil *string); the next add starts again from the value.
        add("table-reduce-null-adder", b -> left(b).groupBy((k, v) -> KeyValue.pair(letter(v), v))
                .reduce((agg, v) -> v.equals("once") ? null : agg + "+" + v, (agg, v) -> agg + "-" + v, store("null-adder"))
                .toStream().to("out"));
        // table-aggregate-null: a table aggregate whose subtractor returns null (a delete)
        // when the aggregate empties and whose adder returns null for "joins" (Go: nil
        // *string); the next add starts again from the initializer.
        add("table-aggregate-null", b -> left(b).groupBy((k, v) -> KeyValue.pair("len" + v.length(), v))
                .aggregate(() -> "0",
                        (g, v, agg) -> v.equals("joins") ? null : agg + "+" + v,
                        (g, v, agg) -> agg.equals("0+" + v) ? null : agg + "-" + v,
                        store("null-agg"))
                .toStream().to("out"));
        // table-count-filter: a filter and mapValues of a table count (old values from the
        // aggregation).
        add("table-count-filter", b -> left(b).groupBy((k, v) -> KeyValue.pair(letter(v), v))
                .count(Materialized.as("lc"))
                .filter((k, n) -> n > 1)
                .mapValues(n -> String.valueOf(n))
                .toStream().to("out"));
        // table-groupby-two-aggregates: a count and a reduce of one grouped table.
        add("table-groupby-two-aggregates", b -> {
            KGroupedTable<String, String> g = left(b).groupBy((k, v) -> KeyValue.pair(letter(v), v));
            g.count(Materialized.as("g2-count")).toStream().mapValues(n -> "n" + n).to("out");
            g.reduce((agg, v) -> agg + "+" + v, (agg, v) -> agg + "-" + v, store("g2-reduce")).toStream().to("out");
        });
        // table-tostream-ops: a table's updates as a stream: filter (tombstones kept),
        // mapValues (a tombstone becomes "").
        add("table-tostream-ops", b -> left(b).toStream()
                .filter((k, v) -> nz(v).length() != 2)
                .mapValues((k, v) -> k + "=" + nz(v))
                .to("out"));
        // table-tostream-groupbykey-count: a table's updates counted as a stream (tombstones
        // are skipped).
        add("table-tostream-groupbykey-count", b -> left(b).toStream().groupByKey().count(Materialized.as("updates"))
                .toStream().mapValues(n -> String.valueOf(n)).to("out"));
        // table-tostream-repartition-totable: a table's updates re-keyed, repartitioned and
        // read as a table again (tombstones delete under their new key).
        add("table-tostream-repartition-totable", b -> left(b).toStream()
                .selectKey((k, v) -> letter(v))
                .repartition(Repartitioned.<String, String>as("tr").withKeySerde(STRING).withValueSerde(STRING))
                .toTable(store("tr-table"))
                .toStream().to("out"));
        // named-table-operators: table operators with explicit names.
        add("named-table-operators", b -> {
            left(b).filter((k, v) -> v.length() > 2, Named.as("t-filter"))
                    .mapValues(v -> v + "!", Named.as("t-map"))
                    .toStream(Named.as("t-stream"))
                    .to("out");
        });
        // table-join-inner, -left, -outer: primary-key table-table joins of the two sources.
        add("table-join-inner", b -> left(b).join(right(b), (a, c) -> a + "/" + c).toStream().to("out"));
        add("table-join-left", b -> left(b).leftJoin(right(b), (a, c) -> a + "/" + orDash(c)).toStream().to("out"));
        add("table-join-outer", b -> left(b).outerJoin(right(b), (a, c) -> orDash(a) + "/" + orDash(c)).toStream().to("out"));
        // table-join-derived: joins of tables without stores of their own (read through their
        // parents), a materialized filter and join, and a join of a join.
        add("table-join-derived", b -> {
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
        });
        // table-join-null-joiner: a join whose joiner returns null (a delete) when both
        // values have the same length (Go: a nil *string), then regrouped and counted.
        add("table-join-null-joiner", b -> {
            KTable<String, String> j = left(b).join(right(b), (a, c) -> a.length() == c.length() ? null : a + "/" + c);
            j.toStream().to("out");
            j.groupBy((k, v) -> KeyValue.pair(letter(v), k)).count(Materialized.as("nj-count"))
                    .toStream().mapValues(n -> "n" + n).to("out");
        });
        // table-join-self: a table joined with itself.
        add("table-join-self", b -> {
            KTable<String, String> l = left(b);
            l.join(l, (a, c) -> a + "&" + c).toStream().to("out");
        });
        // table-leftjoin-self-filtered: a table left-joined with a filter of itself.
        add("table-leftjoin-self-filtered", b -> {
            KTable<String, String> l = left(b);
            l.leftJoin(l.filter((k, v) -> v.length() > 4), (a, c) -> a + "&" + orDash(c)).toStream().to("out");
        });
        // table-outerjoin-self-mapped: a table outer-joined with a mapValues of itself.
        add("table-outerjoin-self-mapped", b -> {
            KTable<String, String> l = left(b);
            l.outerJoin(l.mapValues(v -> v.toUpperCase()), (a, c) -> orDash(a) + "&" + orDash(c)).toStream().to("out");
        });
        // table-join-of-joins: an outer join of an inner join and a left join.
        add("table-join-of-joins", b -> {
            KTable<String, String> l = left(b);
            KTable<String, String> r = right(b);
            KTable<String, String> j1 = l.join(r, (a, c) -> a + "*" + c);
            KTable<String, String> j2 = l.filter((k, v) -> v.length() > 3).leftJoin(r.mapValues(v -> v.toUpperCase()), (a, c) -> a + "+" + orDash(c));
            j1.outerJoin(j2, (a, c) -> orDash(a) + "|" + orDash(c)).toStream().to("out");
        });
        // table-join-groupby-count: a join regrouped and counted (old values through the join).
        add("table-join-groupby-count", b -> left(b).join(right(b), (a, c) -> a + c)
                .groupBy((k, v) -> KeyValue.pair(letter(v), v))
                .count(Materialized.as("jc"))
                .toStream().mapValues(n -> String.valueOf(n)).to("out"));
        // table-leftjoin-groupby-aggregate: a left join regrouped and aggregated.
        add("table-leftjoin-groupby-aggregate", b -> left(b).leftJoin(right(b), (a, c) -> a + "/" + orDash(c))
                .groupBy((k, v) -> KeyValue.pair("len" + v.length(), k))
                .aggregate(() -> "", (g, k, agg) -> agg + "+" + k, (g, k, agg) -> agg + "-" + k, store("lj-agg"))
                .toStream().to("out"));
        // table-outerjoin-filter-mapvalues: an outer join, filtered and mapped, then
        // regrouped (old values through filter and mapValues).
        add("table-outerjoin-filter-mapvalues", b -> {
            KTable<String, String> m = left(b).outerJoin(right(b), (a, c) -> orDash(a) + "/" + orDash(c))
                    .filter((k, v) -> !v.startsWith("-"))
                    .mapValues((k, v) -> k + ":" + v);
            m.toStream().to("out");
            m.groupBy((k, v) -> KeyValue.pair(v.substring(3, 4), k)).count(Materialized.as("oj-count"))
                    .toStream().mapValues(n -> "n" + n).to("out");
        });
        // table-join-named-materialized: a named, materialized join, filtered.
        add("table-join-named-materialized", b -> left(b).join(right(b), (a, c) -> a + "~" + c, Named.as("lr"), store("lr-store"))
                .filter((k, v) -> v.length() > 8)
                .toStream().to("out"));
        // table-filternot-materialized-join: two materialized filterNots joined.
        add("table-filternot-materialized-join", b -> left(b).filterNot((k, v) -> v.startsWith("k"), store("not-k"))
                .leftJoin(right(b).filterNot((k, v) -> v.isEmpty()), (a, c) -> a + "/" + orDash(c))
                .toStream().to("out"));
        // table-join-aggregate: a table aggregate (keyed like left) joined with left.
        add("table-join-aggregate", b -> {
            KTable<String, String> l = left(b);
            KTable<String, String> agg = right(b).groupBy((k, v) -> KeyValue.pair(k, v))
                    .aggregate(() -> "", (k, v, a) -> a + letter(v), (k, v, a) -> a + "-", store("r-agg"));
            l.outerJoin(agg, (a, c) -> orDash(a) + "^" + orDash(c)).toStream().to("out");
        });

        // ==== Streams as tables, stream-table joins ====

        // stream-totable: a re-keyed stream read as a table (through a repartition topic).
        add("stream-totable", b -> b.stream("left", Consumed.with(STRING, STRING))
                .selectKey((k, v) -> letter(v))
                .toTable(Named.as("by-letter"), store("by-letter"))
                .toStream().to("out"));
        // stream-totable-in: topic in as a table: null keys dropped, null values delete.
        add("stream-totable-in", b -> in(b).toTable(store("in-table")).toStream().to("out"));
        // stream-totable-unnamed: a re-keyed stream as a table without a processor name.
        add("stream-totable-unnamed", b -> in(b).selectKey((k, v) -> letter(v)).toTable(store("letter-table"))
                .toStream().to("out"));
        // mapvalues-null-totable: a stream whose mapValues returns null for long values (Go:
        // a nil *string) read as a table: those records delete their key.
        add("mapvalues-null-totable", b -> in(b).mapValues(v -> nz(v).length() > 5 ? null : nz(v) + "!")
                .toTable(store("mn-table"))
                .toStream().to("out"));
        // stream-totable-groupby: a stream read as a table, regrouped and aggregated.
        add("stream-totable-groupby", b -> in(b).toTable(store("in-t"))
                .groupBy((k, v) -> KeyValue.pair(letter(v), k))
                .aggregate(() -> "", (g, k, agg) -> agg + "+" + k, (g, k, agg) -> agg + "-" + k, store("in-t-agg"))
                .toStream().to("out"));
        // stream-totable-join: a stream read as a table, joined with a source table.
        add("stream-totable-join", b -> {
            KTable<String, String> t = b.stream("left", Consumed.with(STRING, STRING)).toTable(store("as-table"));
            t.join(right(b), (a, c) -> a + "*" + c).toStream().to("out");
        });
        // stream-totable-self-join: a stream left-joined with its own table (updated first).
        add("stream-totable-self-join", b -> {
            KStream<String, String> s = in(b);
            KTable<String, String> t = s.toTable(store("self-table"));
            s.leftJoin(t, (v, tv) -> nz(v) + "|" + orDash(tv)).to("out");
        });
        // stream-table-join-derived (topic left as a stream): stream-table joins with a
        // filtered table; stream records with a null value are dropped.
        add("stream-table-join-derived", b -> {
            KStream<String, String> s = b.stream("left", Consumed.with(STRING, STRING));
            KTable<String, String> rt = right(b).filter((k, v) -> !v.isEmpty());
            s.join(rt, (a, c) -> nz(a) + "|" + c).to("out");
            s.leftJoin(rt, (a, c) -> nz(a) + "|" + orDash(c)).to("out");
        });
        // stream-table-join: in joined with left (inner).
        add("stream-table-join", b -> {
            KStream<String, String> s = in(b);
            s.join(left(b), (v, t) -> nz(v) + "|" + t).to("out");
        });
        // stream-table-leftjoin: in left-joined with right.
        add("stream-table-leftjoin", b -> {
            KStream<String, String> s = in(b);
            s.leftJoin(right(b), (v, t) -> nz(v) + "|" + orDash(t)).to("out");
        });
        // stream-table-join-rekeyed: a re-keyed stream joined with left (repartition first).
        add("stream-table-join-rekeyed", b -> {
            KStream<String, String> s = in(b).selectKey((k, v) -> "k" + (nz(v).length() % 5));
            s.join(left(b), (v, t) -> nz(v) + "|" + t).to("out");
        });
        // stream-table-two-joins-rekeyed: a join and a left join of one re-keyed stream with
        // one table.
        add("stream-table-two-joins-rekeyed", b -> {
            KStream<String, String> s = in(b).selectKey((k, v) -> "k" + (nz(v).length() % 5));
            KTable<String, String> t = left(b);
            s.join(t, (v, tv) -> nz(v) + "|" + tv).to("out");
            s.leftJoin(t, (v, tv) -> nz(v) + "|" + orDash(tv)).to("out");
        });
        // rekeyed-two-joins-count: two joins and a count over one re-keyed stream.
        add("rekeyed-two-joins-count", b -> {
            KStream<String, String> s = in(b).selectKey((k, v) -> "k" + (nz(v).length() % 5));
            KTable<String, String> t = left(b);
            s.join(t, (v, tv) -> nz(v) + "|" + tv).to("out");
            s.leftJoin(t, (v, tv) -> nz(v) + "|" + orDash(tv)).to("out");
            s.groupByKey().count(Materialized.as("rk-count")).toStream().mapValues(n -> "n" + n).to("out");
        });
        // map-join: a key-changing map, then a join with right.
        add("map-join", b -> in(b).map((k, v) -> KeyValue.pair("k" + (nz(v).length() % 5), nz(k)))
                .join(right(b), (v, t) -> v + "|" + t).to("out"));
        // stream-join-mapped-table: in joined with a mapValues of left (no store: read through).
        add("stream-join-mapped-table", b -> {
            KStream<String, String> s = in(b);
            s.join(left(b).mapValues(v -> v.toUpperCase()), (v, t) -> nz(v) + "|" + t).to("out");
        });
        // stream-join-joined-table: in left-joined with a table-table join.
        add("stream-join-joined-table", b -> {
            KStream<String, String> s = in(b);
            KTable<String, String> j = left(b).join(right(b), (a, c) -> a + "+" + c);
            s.leftJoin(j, (v, t) -> nz(v) + "|" + orDash(t)).to("out");
        });

        // ==== Global tables (topic global) ====

        // global-join: in joined with the global table on the value's letter.
        add("global-join", b -> {
            KStream<String, String> s = in(b);
            s.join(global(b), (k, v) -> letter(v), (v, g) -> nz(v) + "@" + g).to("out");
        });
        // global-leftjoin: the same as a left join.
        add("global-leftjoin", b -> {
            KStream<String, String> s = in(b);
            s.leftJoin(global(b), (k, v) -> letter(v), (v, g) -> nz(v) + "@" + orDash(g)).to("out");
        });
        // global-leftjoin-missing-key: a left join whose key mapper gives a key that is never
        // in the table (null in Java, "" in Go) for long values.
        add("global-leftjoin-missing-key", b -> {
            KStream<String, String> s = in(b);
            s.leftJoin(global(b), (k, v) -> nz(v).length() > 5 ? null : letter(v), (k, v, g) -> nz(k) + ":" + nz(v) + "@" + orDash(g)).to("out");
        });
        // global-join-rekeyed: a re-keyed stream joined with the global table (no
        // repartition), then counted (a repartition).
        add("global-join-rekeyed", b -> {
            KStream<String, String> s = in(b).selectKey((k, v) -> letter(v));
            s.join(global(b), (k, v) -> k, (v, g) -> g)
                    .groupByKey().count(Materialized.as("g-count"))
                    .toStream().mapValues(n -> String.valueOf(n)).to("out");
        });
        // global-two-joins-and-table: a global join, a global left join and a table left join
        // in one topology.
        add("global-two-joins-and-table", b -> {
            KStream<String, String> s = in(b);
            GlobalKTable<String, String> g = global(b);
            KTable<String, String> r = right(b);
            s.join(g, (k, v) -> letter(v), (v, gv) -> "J" + gv).to("out");
            s.leftJoin(g, (k, v) -> letter(v), (v, gv) -> "L" + orDash(gv))
                    .leftJoin(r, (v, rv) -> v + "|" + orDash(rv)).to("out");
        });

        // ==== Processor API ====

        // process-store: a processor that counts records per key in a store (null keys are
        // not counted) and forwards the count with the value.
        add("process-store", b -> {
            b.addStateStore(Stores.keyValueStoreBuilder(Stores.inMemoryKeyValueStore("proc-store"), STRING, Serdes.Long()));
            in(b).process(CountingProcessor::new, "proc-store").to("out");
        });
        // process-shared-store: two processors connected to one store: the first counts per
        // key, the second (its sibling, called next) reads the count.
        add("process-shared-store", b -> {
            b.addStateStore(Stores.keyValueStoreBuilder(Stores.inMemoryKeyValueStore("shared-store"), STRING, Serdes.Long()));
            KStream<String, String> s = in(b);
            s.process(IncProcessor::new, "shared-store");
            s.process(ReadProcessor::new, "shared-store").to("out");
        });
        // process-rekey-count: a processor that re-keys records, then a count (the processor
        // may change keys, so the count repartitions).
        add("process-rekey-count", b -> in(b).process(RekeyProcessor::new)
                .groupByKey().count(Materialized.as("proc-count"))
                .toStream().mapValues(n -> String.valueOf(n)).to("out"));
        // process-forward-to: a processor that forwards short values to one named child and
        // the others to another.
        add("process-forward-to", b -> {
            KStream<String, String> p = in(b).process(ForwardToProcessor::new);
            p.mapValues(v -> "short:" + nz(v), Named.as("short-child")).to("out");
            p.mapValues(v -> "long:" + nz(v), Named.as("long-child")).to("out");
        });
        // process-tombstones: a processor that forwards a tombstone for "go", a record with a
        // new header for others.
        add("process-tombstones", b -> in(b).process(TombstoneProcessor::new).to("out"));

        // ==== Several sub-topologies ====

        // independent-subtopologies: two unconnected sub-topologies writing one topic.
        add("independent-subtopologies", b -> {
            in(b).filter((k, v) -> nz(v).length() == 5).to("out");
            left(b).toStream().mapValues((k, v) -> "t:" + nz(v)).to("out");
        });

        // ==== Windowed aggregations and suppress (topic win) ====
        //
        // Each windowed table is written by winOut: key "<key>@<start-T0>/<end-T0>", value as
        // a string, tombstones as tombstones. Aggregators and reducers treat a null value as ""
        // (nz).

        // win-tumbling-count: tumbling windows of 10s with a grace of 5s, counted.
        add("win-tumbling-count", b -> winOut(win(b).groupByKey()
                .windowedBy(TimeWindows.ofSizeAndGrace(secs(10), secs(5)))
                .count(Materialized.as("win-counts"))));
        // win-tumbling-nograce-count: tumbling windows of 10s without grace, counted.
        add("win-tumbling-nograce-count", b -> winOut(win(b).groupByKey()
                .windowedBy(TimeWindows.ofSizeWithNoGrace(secs(10)))
                .count(Materialized.as("win-nograce-counts"))));
        // win-hopping-reduce: hopping windows of 10s every 5s with a grace of 3s, reduced.
        add("win-hopping-reduce", b -> winOut(win(b).groupByKey()
                .windowedBy(TimeWindows.ofSizeAndGrace(secs(10), secs(3)).advanceBy(secs(5)))
                .reduce((agg, v) -> agg + "+" + nz(v), Materialized.as("win-hop-reduce"))));
        // win-hopping-aggregate: the same windows, aggregated from "".
        add("win-hopping-aggregate", b -> winOut(win(b).groupByKey()
                .windowedBy(TimeWindows.ofSizeAndGrace(secs(10), secs(3)).advanceBy(secs(5)))
                .aggregate(() -> "", (k, v, agg) -> agg + "," + nz(v), Materialized.as("win-hop-agg"))));
        // win-tumbling-emit-final: tumbling windows of 10s with a grace of 5s, counted, one
        // final result per window when it closes.
        add("win-tumbling-emit-final", b -> winOut(win(b).groupByKey()
                .windowedBy(TimeWindows.ofSizeAndGrace(secs(10), secs(5)))
                .emitStrategy(EmitStrategy.onWindowClose())
                .count(Materialized.as("win-final-counts"))));
        // win-hopping-emit-final: hopping windows of 10s every 5s with a grace of 2s, counted,
        // on window close.
        add("win-hopping-emit-final", b -> winOut(win(b).groupByKey()
                .windowedBy(TimeWindows.ofSizeAndGrace(secs(10), secs(2)).advanceBy(secs(5)))
                .emitStrategy(EmitStrategy.onWindowClose())
                .count(Materialized.as("win-hop-final-counts"))));
        // win-sliding-count: sliding windows with a time difference of 10s and a grace of 5s,
        // counted.
        add("win-sliding-count", b -> winOut(win(b).groupByKey()
                .windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(secs(10), secs(5)))
                .count(Materialized.as("win-slide-counts"))));
        // win-sliding-emit-final: the same sliding windows, aggregated from "", on window
        // close.
        add("win-sliding-emit-final", b -> winOut(win(b).groupByKey()
                .windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(secs(10), secs(5)))
                .emitStrategy(EmitStrategy.onWindowClose())
                .aggregate(() -> "", (k, v, agg) -> agg + "," + nz(v), Materialized.as("win-slide-final-agg"))));
        // win-session-count: sessions with an inactivity gap of 5s and a grace of 5s, counted.
        add("win-session-count", b -> winOut(win(b).groupByKey()
                .windowedBy(SessionWindows.ofInactivityGapAndGrace(secs(5), secs(5)))
                .count(Materialized.as("win-session-counts"))));
        // win-session-aggregate: the same sessions, aggregated from "", merged with "|".
        add("win-session-aggregate", b -> winOut(win(b).groupByKey()
                .windowedBy(SessionWindows.ofInactivityGapAndGrace(secs(5), secs(5)))
                .aggregate(() -> "", (k, v, agg) -> agg + "," + nz(v), (k, a1, a2) -> a1 + "|" + a2,
                        Materialized.as("win-session-agg"))));
        // win-session-emit-final: the same sessions, counted, on window close.
        add("win-session-emit-final", b -> winOut(win(b).groupByKey()
                .windowedBy(SessionWindows.ofInactivityGapAndGrace(secs(5), secs(5)))
                .emitStrategy(EmitStrategy.onWindowClose())
                .count(Materialized.as("win-session-final-counts"))));
        // win-suppress-final: a tumbling count (10s, grace 5s) suppressed until its windows
        // close.
        add("win-suppress-final", b -> winOut(win(b).groupByKey()
                .windowedBy(TimeWindows.ofSizeAndGrace(secs(10), secs(5)))
                .count(Materialized.as("win-sup-counts"))
                .suppress(Suppressed.untilWindowCloses(BufferConfig.unbounded()))));
        // win-suppress-final-hopping: a hopping count (10s every 5s, grace 3s) suppressed until
        // its windows close.
        add("win-suppress-final-hopping", b -> winOut(win(b).groupByKey()
                .windowedBy(TimeWindows.ofSizeAndGrace(secs(10), secs(3)).advanceBy(secs(5)))
                .count(Materialized.as("win-sup-hop-counts"))
                .suppress(Suppressed.untilWindowCloses(BufferConfig.unbounded()))));
        // win-suppress-session: a session count (gap 5s, grace 5s) suppressed until its
        // sessions close.
        add("win-suppress-session", b -> winOut(win(b).groupByKey()
                .windowedBy(SessionWindows.ofInactivityGapAndGrace(secs(5), secs(5)))
                .count(Materialized.as("win-sup-session-counts"))
                .suppress(Suppressed.untilWindowCloses(BufferConfig.unbounded()))));
        // win-suppress-timelimit: a count of win (not windowed) suppressed for 7s of stream
        // time, with an unbounded buffer.
        add("win-suppress-timelimit", b -> win(b).groupByKey()
                .count(Materialized.as("win-tl-counts"))
                .suppress(Suppressed.untilTimeLimit(secs(7), BufferConfig.unbounded()))
                .toStream().mapValues(n -> String.valueOf(n)).to("out"));
        // win-suppress-timelimit-emit-early: the same with a buffer of 2 records that emits
        // the oldest early when full.
        add("win-suppress-timelimit-emit-early", b -> win(b).groupByKey()
                .count(Materialized.as("win-tle-counts"))
                .suppress(Suppressed.untilTimeLimit(secs(7), BufferConfig.maxRecords(2).emitEarlyWhenFull()))
                .toStream().mapValues(n -> String.valueOf(n)).to("out"));
        // win-suppress-named: win-suppress-final with a named suppression (its processor and
        // its buffer store are named after it).
        add("win-suppress-named", b -> winOut(win(b).groupByKey()
                .windowedBy(TimeWindows.ofSizeAndGrace(secs(10), secs(5)))
                .count(Materialized.as("win-named-counts"))
                .suppress(Suppressed.untilWindowCloses(BufferConfig.unbounded()).withName("final"))));
        // win-groupby-count: win re-keyed by the value's letter (a named repartition topic),
        // counted in tumbling windows of 10s with a grace of 5s.
        add("win-groupby-count", b -> winOut(win(b).groupBy((k, v) -> letter(v), Grouped.<String, String>as("byletter"))
                .windowedBy(TimeWindows.ofSizeAndGrace(secs(10), secs(5)))
                .count(Materialized.as("win-letter-counts"))));

        // The join scenarios, each family in a file of its own (with its own input topics).
        StreamJoinScenarios.scenarios();
        FkJoinScenarios.scenarios();
        CogroupScenarios.scenarios();
        VersionedScenarios.scenarios();

        // The record cache: scenarios above again, run with statestore.cache.max.bytes of
        // 10 MiB (props): the driver commits after each record, so that a cached store
        // forwards one update per key per record, with the old value last forwarded.
        for (String base : CACHED) {
            Consumer<StreamsBuilder> build = SCENARIOS.get(base);
            if (build == null) {
                throw new IllegalStateException("cached scenario of unknown " + base);
            }
            add(CACHED_PREFIX + base, build);
        }
    }

    /** CACHED_PREFIX names the scenarios run with the record cache on (see props). */
    static final String CACHED_PREFIX = "cached-";
    private static final List<String> CACHED = List.of("stream-count", "flatmap-count", "stream-count-filter",
            "stream-aggregate-null", "chain-subtopologies", "table-groupby-aggregate", "table-groupby-same-key",
            "table-count-filter", "table-aggregate-null", "table-groupby-two-aggregates",
            "table-source", "table-filter-materialized-tostream", "table-mapvalues-materialized-null", "table-join-filter-materialized",
            "table-join-inner", "table-join-outer", "table-join-named-materialized", "table-join-groupby-count",
            "fk-join-inner", "fk-join-left", "fk-join-named-materialized", "fk-join-groupby-count",
            "stream-totable", "table-tostream-repartition-totable",
            "win-tumbling-count", "win-tumbling-nograce-count", "win-hopping-reduce", "win-hopping-aggregate",
            "win-suppress-final", "win-suppress-timelimit", "win-groupby-count",
            "win-session-count", "win-session-aggregate", "win-sliding-count");

    // stateless: filter, split into two named branches, mapValues / flatMapValues, merge;
    // with repartition, also selectKey and a named repartition topic.
    private static void stateless(KStream<String, String> s, boolean repartition) {
        Map<String, KStream<String, String>> br = s.filter((k, v) -> !nz(v).isEmpty())
                .split(Named.as("len-"))
                .branch((k, v) -> v.length() <= 5, Branched.as("short"))
                .defaultBranch(Branched.as("long"));
        KStream<String, String> shortOnes = need(br, "len-short").mapValues(v -> v.toUpperCase());
        KStream<String, String> longOnes = need(br, "len-long").flatMapValues(v -> List.of(v.substring(0, 3), v.substring(3)));
        KStream<String, String> merged = shortOnes.merge(longOnes);
        if (repartition) {
            merged = merged.selectKey((k, v) -> nz(k) + "/" + v.substring(0, 1))
                    .repartition(Repartitioned.<String, String>as("eq").withKeySerde(STRING).withValueSerde(STRING));
        }
        merged.to("out", Produced.with(STRING, STRING));
    }

    /** process-store's processor. */
    private static final class CountingProcessor implements Processor<String, String, String, String> {
        private ProcessorContext<String, String> ctx;
        private KeyValueStore<String, Long> store;

        @Override
        public void init(ProcessorContext<String, String> ctx) {
            this.ctx = ctx;
            this.store = ctx.getStateStore("proc-store");
        }

        @Override
        public void process(Record<String, String> r) {
            if (r.key() == null) {
                ctx.forward(r.withValue("nokey:" + nz(r.value())));
                return;
            }
            Long n = store.get(r.key());
            long next = n == null ? 1 : n + 1;
            store.put(r.key(), next);
            ctx.forward(r.withValue(nz(r.value()) + "#" + next));
        }
    }

    /** process-shared-store's first processor: counts per key, forwards nothing. */
    private static final class IncProcessor implements Processor<String, String, String, String> {
        private KeyValueStore<String, Long> store;

        @Override
        public void init(ProcessorContext<String, String> ctx) {
            this.store = ctx.getStateStore("shared-store");
        }

        @Override
        public void process(Record<String, String> r) {
            if (r.key() == null) {
                return;
            }
            Long n = store.get(r.key());
            store.put(r.key(), n == null ? 1 : n + 1);
        }
    }

    /** process-shared-store's second processor: forwards the count with the value. */
    private static final class ReadProcessor implements Processor<String, String, String, String> {
        private ProcessorContext<String, String> ctx;
        private KeyValueStore<String, Long> store;

        @Override
        public void init(ProcessorContext<String, String> ctx) {
            this.ctx = ctx;
            this.store = ctx.getStateStore("shared-store");
        }

        @Override
        public void process(Record<String, String> r) {
            if (r.key() == null) {
                return;
            }
            ctx.forward(r.withValue(nz(r.value()) + "@" + store.get(r.key())));
        }
    }

    /** process-rekey-count's processor: the key becomes the value's letter. */
    private static final class RekeyProcessor implements Processor<String, String, String, String> {
        private ProcessorContext<String, String> ctx;

        @Override
        public void init(ProcessorContext<String, String> ctx) {
            this.ctx = ctx;
        }

        @Override
        public void process(Record<String, String> r) {
            ctx.forward(r.withKey(letter(r.value())));
        }
    }

    /** process-forward-to's processor. */
    private static final class ForwardToProcessor implements Processor<String, String, String, String> {
        private ProcessorContext<String, String> ctx;

        @Override
        public void init(ProcessorContext<String, String> ctx) {
            this.ctx = ctx;
        }

        @Override
        public void process(Record<String, String> r) {
            ctx.forward(r, nz(r.value()).length() <= 4 ? "short-child" : "long-child");
        }
    }

    /** process-tombstones' processor. */
    private static final class TombstoneProcessor implements Processor<String, String, String, String> {
        private ProcessorContext<String, String> ctx;

        @Override
        public void init(ProcessorContext<String, String> ctx) {
            this.ctx = ctx;
        }

        @Override
        public void process(Record<String, String> r) {
            if ("go".equals(r.value())) {
                ctx.forward(r.withValue(null));
                return;
            }
            Record<String, String> out = r.withValue("p:" + nz(r.value()));
            out.headers().add("p", nz(r.key()).getBytes(StandardCharsets.UTF_8));
            ctx.forward(out);
        }
    }

    // ---- Input ----

    /** One input record; a null key or value is a Kafka null. */
    record In(String topic, String key, String value, long ts, String header) {}

    /**
     * The input of every scenario, in this order, for i = 0..59 (see the README beside the
     * golden files):
     * <ol>
     * <li>when i < 48, a record of topic in: key null when i % 9 == 4, else "k" + (i % 7);
     * value null when i % 10 == 7 or i == 40, else WORDS[i % 8]; timestamp
     * T0 + ((i * 11) % 48) * 1000 (out of order); header i when i % 3 == 0;
     * <li>a record of topic right when i % 3 == 2, else left: key null when i % 11 == 7,
     * else "k" + (i * 7 % 5); value null when i % 7 == 5, else WORDS[i % 8]; timestamp
     * T0 + ((i * 13) % 40) * 1000 (out of order); header i when i % 4 == 0;
     * <li>when i % 4 == 0, a record of topic global, with g = i / 4: key null when
     * g % 7 == 6, else letter(WORDS[(g * 3) % 8]); value null when g % 5 == 3, else "G" + g;
     * timestamp T0 + g * 1000; no header.
     * </ol>
     * then, for i = 0..26, a record of topic win (the windowed scenarios' topic): key
     * WIN_KEYS[i]; value null when i is in WIN_NULL_VALUES, else "lmy".charAt(i % 3) + i;
     * timestamp T0 + WIN_OFFSETS[i]; header i on every record.
     */
    private static List<In> input() {
        List<In> recs = new ArrayList<>();
        for (int i = 0; i < 60; i++) {
            if (i < 48) {
                recs.add(new In("in",
                        i % 9 == 4 ? null : "k" + (i % 7),
                        i % 10 == 7 || i == 40 ? null : WORDS[i % 8],
                        T0 + ((i * 11L) % 48) * 1000L,
                        i % 3 == 0 ? String.valueOf(i) : null));
            }
            recs.add(new In(i % 3 == 2 ? "right" : "left",
                    i % 11 == 7 ? null : "k" + (i * 7 % 5),
                    i % 7 == 5 ? null : WORDS[i % 8],
                    T0 + ((i * 13L) % 40) * 1000L,
                    i % 4 == 0 ? String.valueOf(i) : null));
            if (i % 4 == 0) {
                int g = i / 4;
                recs.add(new In("global",
                        g % 7 == 6 ? null : letter(WORDS[(g * 3) % 8]),
                        g % 5 == 3 ? null : "G" + g,
                        T0 + g * 1000L,
                        null));
            }
        }
        for (int i = 0; i < WIN_KEYS.length; i++) {
            recs.add(new In("win",
                    WIN_KEYS[i],
                    WIN_NULL_VALUES.contains(i) ? null : "lmy".charAt(i % 3) + String.valueOf(i),
                    T0 + WIN_OFFSETS[i],
                    String.valueOf(i)));
        }
        // Then the topics of the join scenarios, family by family.
        recs.addAll(StreamJoinScenarios.input());
        recs.addAll(FkJoinScenarios.input());
        recs.addAll(CogroupScenarios.input());
        recs.addAll(VersionedScenarios.input());
        return recs;
    }

    /**
     * The keys of topic win's records (null: a Kafka null), chosen by hand for the window
     * scenarios; "a", "b" and "k" all go to partition 0 of 4, so that the Go side's run with
     * 4 partitions has one stream time for them, as Java's with one.
     */
    private static final String[] WIN_KEYS = {
        "a", "b", "a", "k", "a", "k", "b", "a", null, "b",
        "k", "a", "k", "a", "b", "a", "k", "b", "a", "k",
        "b", "a", "b", "k", "b", "a", "k",
    };

    /** The timestamps of topic win's records, in ms after T0 (see the README). */
    private static final long[] WIN_OFFSETS = {
        1_000, 2_000, 4_000, 9_999, 10_000, 9_990, 11_000, 7_000, 13_000, 14_000,
        14_999, 9_500, 15_000, 9_800, 6_500, 20_000, 18_000, 23_000, 25_000, 19_999,
        21_000, 600_000, 30_000, 599_000, 601_000, 605_000, 1_000,
    };

    /** The records of topic win with a null value (a tombstone). */
    private static final Set<Integer> WIN_NULL_VALUES = Set.of(9, 24);

    // The topics the topology reads: its sources' and its global stores'.
    private static Set<String> sources(TopologyDescription d) {
        Set<String> out = new HashSet<>();
        for (TopologyDescription.Subtopology sub : d.subtopologies()) {
            for (TopologyDescription.Node n : sub.nodes()) {
                if (n instanceof TopologyDescription.Source) {
                    TopologyDescription.Source s = (TopologyDescription.Source) n;
                    if (s.topicSet() != null) {
                        out.addAll(s.topicSet());
                    } else {
                        // A pattern source: the input topics whose whole name matches.
                        for (In r : input()) {
                            if (s.topicPattern().matcher(r.topic()).matches()) {
                                out.add(r.topic());
                            }
                        }
                    }
                }
            }
        }
        for (TopologyDescription.GlobalStore g : d.globalStores()) {
            out.addAll(g.source().topicSet());
        }
        return out;
    }

    private static List<String> run(String name, Topology topology) {
        Set<String> sources = sources(topology.describe());
        List<String> lines = new ArrayList<>();
        try (TopologyTestDriver driver = new TopologyTestDriver(topology, props(name))) {
            Map<String, TestInputTopic<String, String>> ins = new LinkedHashMap<>();
            TestOutputTopic<String, String> out = driver.createOutputTopic("out", new StringDeserializer(), new StringDeserializer());
            for (In r : input()) {
                // Records of an input topic that the scenario does not read are not piped.
                if (!sources.contains(r.topic())) {
                    continue;
                }
                TestInputTopic<String, String> in = ins.computeIfAbsent(r.topic(),
                        t -> driver.createInputTopic(t, new StringSerializer(), new StringSerializer()));
                RecordHeaders headers = new RecordHeaders();
                if (r.header() != null) {
                    headers.add("i", r.header().getBytes(StandardCharsets.UTF_8));
                }
                in.pipeInput(new TestRecord<>(r.key(), r.value(), headers, Instant.ofEpochMilli(r.ts())));
            }
            for (TestRecord<String, String> r : out.readRecordsToList()) {
                lines.add(format(r));
            }
        }
        return lines;
    }

    private static Properties props(String name) {
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, "conformance");
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "dummy:1234");
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        // Every update is emitted, but in the cached scenarios.
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, name.startsWith(CACHED_PREFIX) ? 10L << 20 : 0L);
        // kstream builds what Java builds with every optimization: a source table's topic is
        // its changelog, and the repartition topics of one re-keyed stream are merged.
        props.put(StreamsConfig.TOPOLOGY_OPTIMIZATION_CONFIG, StreamsConfig.OPTIMIZE);
        // Windowed aggregations with EmitStrategy.onWindowClose look for closed windows on
        // every record, not at most once a second of wall-clock time, so that their output
        // does not depend on the wall clock (kstream looks on every record).
        props.put(StreamsConfig.InternalConfig.EMIT_INTERVAL_MS_KSTREAMS_WINDOWED_AGGREGATION, 0L);
        props.put(StreamsConfig.InternalConfig.EMIT_INTERVAL_MS_KSTREAMS_OUTER_JOIN_SPURIOUS_RESULTS_FIX, 0L); // stream-stream non-matches too
        return props;
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

    // A Kafka null key or value is written as <null>.
    private static String str(String s) {
        return s == null ? "<null>" : s;
    }
}
