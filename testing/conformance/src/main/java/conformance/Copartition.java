package conformance;

import java.io.IOException;
import java.io.PrintWriter;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.processor.internals.InternalTopologyBuilder;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * Writes the golden file of kstream's copartition_internal_test.go: for ten join topologies
 * and a cogroup
 * and many topic names, the co-partition groups as Kafka Streams lists them
 * (InternalTopologyBuilder.copartitionGroups, with topology.optimization=all, as kstream's
 * topologies are), the lists a streams-group member declares in its heartbeat
 * (StreamThread.initBrokerTopology). The groups and their topics are HashSets iterated as
 * they are, so their order depends on the names' hash codes; a kstream member whose
 * declaration differs is refused by the group.
 *
 * <pre>testing/conformance/run.sh copartition [FILE]</pre>
 *
 * Each line is {@code KIND APP TOPIC... : GROUP...}, a group being its topics joined by commas.
 */
public final class Copartition {
    private Copartition() {}

    static final String[][] KINDS = {
        // kind, topic count
        {"st", "2"}, {"ss", "2"}, {"tt", "2"}, {"s2t", "3"}, {"multi", "3"}, {"rekey", "2"}, {"fk", "2"},
        {"cogroup", "3"}, {"merge", "3"}, {"self", "1"}, {"rekey2", "2"},
    };
    static final String[] BASES = {"in", "table", "orders", "left", "right", "t"};

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            throw new IllegalArgumentException("usage: Copartition FILE");
        }
        List<String> lines = new ArrayList<>();
        lines.add("# Written by testing/conformance/run.sh copartition (conformance.Copartition): Kafka Streams 4.4's");
        lines.add("# co-partition groups (InternalTopologyBuilder.copartitionGroups, topology.optimization=all).");
        lines.add("# KIND APP TOPIC... : GROUP...   (a group's topics joined by commas, in Java's order)");
        // The names of the mixed Java and Go join that a streams group refused before kstream
        // ordered a HashSet bucket shared by two topics as Java does.
        lines.add(line("st", "app", "in-TestMixedJavaGoJoinOnKafka-9fc14c-644", "table-TestMixedJavaGoJoinOnKafka-9fc14c-646"));
        for (String[] kind : KINDS) {
            int n = Integer.parseInt(kind[1]);
            for (int i = 0; i < 150; i++) {
                String[] topics = new String[n];
                for (int j = 0; j < n; j++) {
                    topics[j] = BASES[(i + 2 * j) % BASES.length] + "-" + kind[0] + "-" + i + "-" + j;
                }
                lines.add(line(kind[0], "app-" + kind[0] + "-" + (i % 7), topics));
            }
        }
        try (PrintWriter w = new PrintWriter(Files.newBufferedWriter(Path.of(args[0]), StandardCharsets.UTF_8))) {
            for (String l : lines) {
                w.println(l);
            }
        }
    }

    static String line(String kind, String app, String... topics) throws Exception {
        StringBuilder sb = new StringBuilder(kind).append(' ').append(app);
        for (String t : topics) {
            sb.append(' ').append(t);
        }
        sb.append(" :");
        for (Set<String> group : groups(kind, app, topics)) {
            sb.append(' ').append(String.join(",", group));
        }
        return sb.toString();
    }

    static Collection<Set<String>> groups(String kind, String app, String[] f) throws Exception {
        Consumed<String, String> c = Consumed.with(Serdes.String(), Serdes.String());
        StreamsBuilder b = new StreamsBuilder();
        switch (kind) {
            case "st": {
                KStream<String, String> s = b.stream(f[0], c);
                s.join(table(b, f[1], "tbl"), (x, y) -> x + y).to("out");
                break;
            }
            case "ss": {
                KStream<String, String> s = b.stream(f[0], c);
                KStream<String, String> s2 = b.stream(f[1], c);
                s.join(s2, (x, y) -> x + y, JoinWindows.ofTimeDifferenceWithNoGrace(Duration.ofSeconds(5))).to("out");
                break;
            }
            case "tt":
                table(b, f[0], "t1").join(table(b, f[1], "t2"), (x, y) -> x + y).toStream().to("out");
                break;
            case "s2t": {
                KStream<String, String> s = b.stream(f[0], c);
                KTable<String, String> t1 = table(b, f[1], "t1");
                KTable<String, String> t2 = table(b, f[2], "t2");
                s.join(t1, (x, y) -> x + y).join(t2, (x, y) -> x + y).to("out");
                break;
            }
            case "multi": {
                KStream<String, String> s = b.stream(List.of(f[0], f[1]), c);
                s.join(table(b, f[2], "tbl"), (x, y) -> x + y).to("out");
                break;
            }
            case "rekey": {
                KStream<String, String> s = b.stream(f[0], c);
                KTable<String, String> t = table(b, f[1], "tbl");
                s.selectKey((k, v) -> v).join(t, (x, y) -> x + y).to("out");
                break;
            }
            case "fk": {
                KTable<String, String> l = table(b, f[0], "l");
                KTable<String, String> r = table(b, f[1], "r");
                l.join(r, v -> v, (x, y) -> x + y).toStream().to("out");
                break;
            }
            case "cogroup": {
                KGroupedStream<String, String> g1 = b.stream(f[0], c).groupByKey();
                KGroupedStream<String, String> g2 = b.stream(f[1], c).groupByKey();
                KGroupedStream<String, String> g3 = b.stream(f[2], c).groupByKey();
                g1.<String>cogroup((k, v, agg) -> agg + v)
                    .cogroup(g2, (k, v, agg) -> agg + v)
                    .cogroup(g3, (k, v, agg) -> agg + v)
                    .aggregate(() -> "", Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("co")
                        .withValueSerde(Serdes.String()))
                    .toStream().to("out");
                break;
            }
            case "merge": {
                KStream<String, String> s = b.stream(f[0], c).merge(b.stream(f[1], c));
                s.join(table(b, f[2], "tbl"), (x, y) -> x + y).to("out");
                break;
            }
            case "self": {
                KStream<String, String> s = b.stream(f[0], c);
                s.join(s, (x, y) -> x + y, JoinWindows.ofTimeDifferenceWithNoGrace(Duration.ofSeconds(5))).to("out");
                break;
            }
            case "rekey2": {
                KStream<String, String> l = b.stream(f[0], c).selectKey((k, v) -> v);
                KStream<String, String> r = b.stream(f[1], c).selectKey((k, v) -> v);
                l.leftJoin(r, (x, y) -> x + y, JoinWindows.ofTimeDifferenceWithNoGrace(Duration.ofSeconds(5))).to("out");
                break;
            }
            default:
                throw new IllegalArgumentException(kind);
        }
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, app);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "127.0.0.1:1");
        props.put(StreamsConfig.TOPOLOGY_OPTIMIZATION_CONFIG, StreamsConfig.OPTIMIZE);
        Topology built = b.build(props);
        // The builder a KafkaStreams instance would use, with the application id set.
        Field f0 = Topology.class.getDeclaredField("internalTopologyBuilder");
        f0.setAccessible(true);
        InternalTopologyBuilder itb = (InternalTopologyBuilder) f0.get(built);
        itb.rewriteTopology(new StreamsConfig(props));
        return itb.copartitionGroups();
    }

    static KTable<String, String> table(StreamsBuilder b, String topic, String store) {
        return b.table(topic, Consumed.with(Serdes.String(), Serdes.String()),
            Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as(store));
    }
}
