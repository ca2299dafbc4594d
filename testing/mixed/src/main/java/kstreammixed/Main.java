package kstreammixed;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.WindowStore;

/**
 * One Kafka Streams 4.4 instance with group.protocol=streams, for the mixed Java and Go test
 * (mixed_java_test.go). Configured by the environment:
 * <ul>
 * <li>APP_ID, BROKERS, STATE_DIR, IN, OUT, and TABLE (the join's table topic);</li>
 * <li>TOPOLOGY: {@code count} (groupBy to the same key, count "counts"), {@code windowed}
 * (groupByKey, 10 s tumbling windows without grace, count "wcounts", output key
 * {@code <key>@<window start ms>}), {@code join} (stream IN inner-joined with the table TABLE
 * materialized as "tbl", value {@code <stream value>+<table value>}), {@code self} (stream IN
 * joined with itself over 10 s without grace, value {@code <value>+<value>}; with
 * topology.optimization=all Java makes it a single-store self-join, as kstream does);</li>
 * <li>GUARANTEE: {@code eos} for exactly_once_v2;</li>
 * <li>OPTIMIZE: topology.optimization, e.g. {@code reuse.ktable.source.topics} (the table's
 * source topic is its changelog, as kstream's tables have it).</li>
 * </ul>
 * It prints "STATE old->new" on every state change and "TASKS [0_0, 1_0, ...]" (its active
 * tasks, then "STANDBY [...]" and its standby tasks if it has any) whenever they change, and the stack of a fatal error; it runs until killed or its
 * standard input closes.
 */
public final class Main {
    public static void main(String[] args) throws Exception {
        String topology = env("TOPOLOGY");
        String in = env("IN");
        String out = env("OUT");
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, env("APP_ID"));
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, env("BROKERS"));
        props.put(StreamsConfig.STATE_DIR_CONFIG, env("STATE_DIR"));
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0L); // every update, as kstream without a cache
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        if ("eos".equals(System.getenv("GUARANTEE"))) {
            props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        }
        String optimize = System.getenv("OPTIMIZE");
        if (optimize != null && !optimize.isEmpty()) {
            props.put(StreamsConfig.TOPOLOGY_OPTIMIZATION_CONFIG, optimize);
        }

        StreamsBuilder b = new StreamsBuilder();
        switch (topology) {
            case "count": {
                KStream<String, String> s = b.stream(in, Consumed.with(Serdes.String(), Serdes.String()));
                s.groupBy((k, v) -> k, Grouped.with(Serdes.String(), Serdes.String()))
                        .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts"))
                        .toStream()
                        .to(out, Produced.with(Serdes.String(), Serdes.Long()));
                break;
            }
            case "windowed": {
                KStream<String, String> s = b.stream(in, Consumed.with(Serdes.String(), Serdes.String()));
                s.groupByKey(Grouped.with(Serdes.String(), Serdes.String()))
                        .windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofSeconds(10)))
                        .count(Materialized.<String, Long, WindowStore<Bytes, byte[]>>as("wcounts"))
                        .toStream((wk, v) -> wk.key() + "@" + wk.window().start())
                        .to(out, Produced.with(Serdes.String(), Serdes.Long()));
                break;
            }
            case "join": {
                KStream<String, String> s = b.stream(in, Consumed.with(Serdes.String(), Serdes.String()));
                KTable<String, String> t = b.table(env("TABLE"), Consumed.with(Serdes.String(), Serdes.String()),
                        Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("tbl"));
                s.join(t, (sv, tv) -> sv + "+" + tv).to(out, Produced.with(Serdes.String(), Serdes.String()));
                break;
            }
            case "self": {
                KStream<String, String> s = b.stream(in, Consumed.with(Serdes.String(), Serdes.String()));
                s.join(s, (a, c) -> a + "+" + c, JoinWindows.ofTimeDifferenceWithNoGrace(Duration.ofSeconds(10)),
                        StreamJoined.with(Serdes.String(), Serdes.String(), Serdes.String()))
                        .to(out, Produced.with(Serdes.String(), Serdes.String()));
                break;
            }
            default:
                throw new IllegalArgumentException("unknown TOPOLOGY " + topology);
        }

        Topology built = b.build(props);
        KafkaStreams streams = new KafkaStreams(built, props);
        CountDownLatch done = new CountDownLatch(1);
        streams.setUncaughtExceptionHandler(e -> {
            System.out.println("FATAL " + e);
            e.printStackTrace(System.out);
            System.out.flush();
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.setStateListener((now, old) -> {
            System.out.println("STATE " + old + "->" + now);
            System.out.flush();
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                done.countDown();
            }
        });
        System.out.println("DESCRIBE " + built.describe().toString().replace('\n', '|'));
        streams.start();
        // Standard input closed (the test ended): close.
        Thread stdin = new Thread(() -> {
            try {
                while (System.in.read() >= 0) {
                    // nothing
                }
            } catch (Exception e) {
                // closed
            }
            done.countDown();
        });
        stdin.setDaemon(true);
        stdin.start();
        String last = "";
        while (done.getCount() > 0) {
            String tasks = "";
            try {
                TreeSet<String> ids = new TreeSet<>();
                TreeSet<String> standbys = new TreeSet<>();
                for (ThreadMetadata t : streams.metadataForLocalThreads()) {
                    for (TaskMetadata tm : t.activeTasks()) {
                        ids.add(tm.taskId().toString());
                    }
                    for (TaskMetadata tm : t.standbyTasks()) {
                        standbys.add(tm.taskId().toString());
                    }
                }
                List<String> l = new ArrayList<>(ids);
                tasks = l.toString();
                if (!standbys.isEmpty()) {
                    tasks += " STANDBY " + new ArrayList<>(standbys);
                }
            } catch (Exception e) {
                tasks = "?";
            }
            if (!tasks.equals(last)) {
                System.out.println("TASKS " + tasks);
                System.out.flush();
                last = tasks;
            }
            Thread.sleep(200);
        }
        streams.close(Duration.ofSeconds(10));
        System.out.println("CLOSED");
        System.out.flush();
    }

    private static String env(String name) {
        String v = System.getenv(name);
        if (v == null || v.isEmpty()) {
            throw new IllegalArgumentException("missing environment variable " + name);
        }
        return v;
    }
}
