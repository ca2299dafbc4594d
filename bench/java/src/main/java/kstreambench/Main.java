package kstreambench;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * The Kafka Streams contestant of {@code go run ./bench/compare}: one scenario of
 * {@code go run ./bench} as a Kafka Streams 4.4 application, run until the application has
 * committed the end offsets of its input.
 *
 * <pre>
 * java -cp target/classes:target/lib/* kstreambench.Main SCENARIO --brokers HOST:PORT
 *     --in TOPIC --out TOPIC --app-id ID --state-dir DIR
 *     [--timeout-s 300] [--poll-ms 20] [--commit-ms 100] [--serve 1] [--prop key=value]...
 * </pre>
 *
 * Scenarios:
 * <ul>
 * <li>{@code passthrough}: stream(in, bytes, bytes).to(out);</li>
 * <li>{@code filter-mapvalues}: filter(value[0] != 0).mapValues(copy with the last byte
 * flipped).to(out);</li>
 * <li>{@code count}: stream(in, String, bytes).groupByKey().count(RocksDB store "counts")
 * .toStream().to(out, String, Long), with the record cache off
 * (statestore.cache.max.bytes=0): an output record per input record;</li>
 * <li>{@code count-cache}: the same with Kafka Streams' default 10 MiB record cache;</li>
 * <li>{@code count-eos}: {@code count} under exactly_once_v2;</li>
 * <li>{@code latency-count}: {@code count} with linger.ms=0 (a latency scenario, below);</li>
 * <li>{@code latency-eos-20ms}: {@code count-eos} with linger.ms=0 (the driver passes
 * {@code --commit-ms 20}).</li>
 * </ul>
 *
 * Every scenario runs with commit.interval.ms=100 (go run ./bench's commit interval;
 * {@code --commit-ms} changes it) and
 * Kafka Streams' other defaults (one stream thread, producer linger.ms 100, no compression,
 * max.poll.records 1000); {@code --prop} overrides any of them.
 *
 * <p>Once every input partition's committed offset (read with an Admin client every
 * {@code --poll-ms}) is its end offset (read once at the start: the input is complete
 * before the program starts), the program prints one line to stdout,
 * <pre>
 * RESULT contestant=java scenario=S done_ms=D start_ms=T running_ms=R
 * </pre>
 * (milliseconds since the JVM started: done, streams.start() called, state RUNNING first
 * reached), closes the application, prints {@code PEAK vmhwm_kib=N} (the peak resident set
 * of the process, VmHWM of /proc/self/status) and exits 0. On an error it prints
 * {@code ERROR ...} to stderr and exits 1.
 *
 * <p>With {@code --serve 1} (the latency scenarios) the input is empty at the start: the
 * program prints {@code READY contestant=java scenario=S running_ms=R} once the application
 * is RUNNING with an active task per input partition, and runs until its stdin ends (the
 * driver closes it once it has read every output); then it prints the RESULT line and
 * closes as above.
 */
public final class Main {
    private Main() {
    }

    /** The store of the count scenarios: its changelog is "APP_ID-counts-changelog". */
    static final String COUNT_STORE = "counts";

    public static void main(String[] args) throws Exception {
        int code = 0;
        try {
            run(args);
        } catch (Exception e) {
            System.err.println("ERROR " + e);
            e.printStackTrace(System.err);
            code = 1;
        }
        long peak = peakRSSKiB();
        if (peak >= 0) {
            System.out.println("PEAK vmhwm_kib=" + peak);
        }
        System.out.flush();
        System.exit(code); // do not wait for lingering non-daemon threads
    }

    /** peakRSSKiB is VmHWM of /proc/self/status (the peak resident set), -1 if unknown. */
    static long peakRSSKiB() {
        try {
            for (String line : java.nio.file.Files.readAllLines(java.nio.file.Path.of("/proc/self/status"))) {
                if (line.startsWith("VmHWM:")) {
                    return Long.parseLong(line.substring(6).replace("kB", "").trim());
                }
            }
        } catch (Exception e) {
            // not Linux: no figure
        }
        return -1;
    }

    private static void usage(String msg) {
        throw new IllegalArgumentException(msg + "; usage: Main SCENARIO --brokers B --in T --out T"
                + " --app-id ID --state-dir DIR [--timeout-s S] [--poll-ms MS] [--commit-ms MS] [--serve 1]"
                + " [--prop k=v]...");
    }

    static void run(String[] args) throws Exception {
        if (args.length < 1) {
            usage("no scenario");
        }
        String scenario = args[0];
        Map<String, String> opts = new HashMap<>();
        List<String> extra = new ArrayList<>();
        for (int i = 1; i < args.length; i++) {
            String a = args[i];
            if (!a.startsWith("--") || i + 1 >= args.length) {
                usage("bad argument " + a);
            }
            String v = args[++i];
            if (a.equals("--prop")) {
                extra.add(v);
            } else {
                opts.put(a.substring(2), v);
            }
        }
        for (String req : new String[] {"brokers", "in", "out", "app-id", "state-dir"}) {
            if (!opts.containsKey(req)) {
                usage("missing --" + req);
            }
        }
        String brokers = opts.get("brokers");
        String in = opts.get("in");
        String out = opts.get("out");
        String appId = opts.get("app-id");
        long timeoutMs = Long.parseLong(opts.getOrDefault("timeout-s", "300")) * 1000;
        long pollMs = Long.parseLong(opts.getOrDefault("poll-ms", "20"));
        long commitMs = Long.parseLong(opts.getOrDefault("commit-ms", "100"));
        boolean serve = opts.getOrDefault("serve", "0").equals("1");

        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, brokers);
        props.put(StreamsConfig.STATE_DIR_CONFIG, opts.get("state-dir"));
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, commitMs);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.ByteArraySerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.ByteArraySerde.class);

        StreamsBuilder b = new StreamsBuilder();
        switch (scenario) {
            case "passthrough":
                b.stream(in, Consumed.with(Serdes.ByteArray(), Serdes.ByteArray()))
                        .to(out, Produced.with(Serdes.ByteArray(), Serdes.ByteArray()));
                break;
            case "filter-mapvalues":
                b.stream(in, Consumed.with(Serdes.ByteArray(), Serdes.ByteArray()))
                        .filter((k, v) -> v == null || v.length == 0 || v[0] != 0)
                        .mapValues(Main::flipLast)
                        .to(out, Produced.with(Serdes.ByteArray(), Serdes.ByteArray()));
                break;
            case "count":
            case "count-cache":
            case "count-eos":
            case "latency-count":
            case "latency-eos-20ms":
                KStream<String, byte[]> s = b.stream(in, Consumed.with(Serdes.String(), Serdes.ByteArray()));
                s.groupByKey()
                        .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as(COUNT_STORE))
                        .toStream()
                        .to(out, Produced.with(Serdes.String(), Serdes.Long()));
                break;
            default:
                usage("unknown scenario " + scenario);
        }
        if (!scenario.equals("count-cache")) {
            // Every update is forwarded, as kstream's count does; count-cache keeps the
            // 10 MiB default.
            props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0L);
        }
        if (scenario.equals("count-eos") || scenario.equals("latency-eos-20ms")) {
            props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        }
        if (scenario.startsWith("latency-")) {
            // A batch leaves when it is produced, as kstream's Config.Linger = NoLinger
            // (Kafka Streams' own default is 100 ms).
            props.put(ProducerConfig.LINGER_MS_CONFIG, 0);
        }
        for (String kv : extra) {
            int eq = kv.indexOf('=');
            if (eq <= 0) {
                usage("bad --prop " + kv);
            }
            props.put(kv.substring(0, eq), kv.substring(eq + 1));
        }

        long jvmStart = java.lang.management.ManagementFactory.getRuntimeMXBean().getStartTime();
        Map<String, Object> adminProps = new HashMap<>();
        adminProps.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, brokers);
        try (Admin admin = Admin.create(adminProps)) {
            Map<TopicPartition, Long> ends = endOffsets(admin, in);
            AtomicReference<Throwable> failure = new AtomicReference<>();
            AtomicReference<Long> runningAt = new AtomicReference<>();
            KafkaStreams streams = new KafkaStreams(b.build(), props);
            streams.setUncaughtExceptionHandler(e -> {
                failure.compareAndSet(null, e);
                return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
            });
            streams.setStateListener((now, old) -> {
                if (now == KafkaStreams.State.RUNNING) {
                    runningAt.compareAndSet(null, System.currentTimeMillis());
                }
            });
            long startedAt = System.currentTimeMillis();
            streams.start();
            long deadline = startedAt + timeoutMs;
            try {
                if (serve) {
                    serve(streams, scenario, ends.size(), failure, deadline, jvmStart);
                }
                while (!serve && !committedAll(admin, appId, ends)) {
                    check(streams, failure, deadline, "input not committed after " + timeoutMs + " ms");
                    Thread.sleep(pollMs);
                }
                long doneAt = System.currentTimeMillis();
                Long running = runningAt.get();
                System.out.println("RESULT contestant=java scenario=" + scenario
                        + " done_ms=" + (doneAt - jvmStart)
                        + " start_ms=" + (startedAt - jvmStart)
                        + " running_ms=" + (running == null ? -1 : running - jvmStart));
                System.out.flush();
            } finally {
                streams.close(Duration.ofSeconds(30));
            }
        }
    }

    /**
     * check throws if the application failed or stopped, or (with timeoutMsg) after the
     * deadline, and returns its state.
     */
    static KafkaStreams.State check(KafkaStreams streams, AtomicReference<Throwable> failure, long deadline,
            String timeoutMsg) {
        Throwable f = failure.get();
        if (f != null) {
            throw new IllegalStateException("the application failed", f);
        }
        KafkaStreams.State st = streams.state();
        if (st == KafkaStreams.State.ERROR || st == KafkaStreams.State.NOT_RUNNING
                || st == KafkaStreams.State.PENDING_SHUTDOWN) {
            throw new IllegalStateException("the application stopped early in state " + st);
        }
        if (System.currentTimeMillis() > deadline) {
            throw new IllegalStateException(timeoutMsg);
        }
        return st;
    }

    /**
     * serve prints READY once streams is RUNNING with an active task per input partition
     * and returns when stdin ends; it throws if the application fails or stops, or at the
     * deadline.
     */
    static void serve(KafkaStreams streams, String scenario, int partitions, AtomicReference<Throwable> failure,
            long deadline, long jvmStart) throws Exception {
        java.util.concurrent.CountDownLatch eof = new java.util.concurrent.CountDownLatch(1);
        Thread reader = new Thread(() -> {
            try {
                System.in.transferTo(java.io.OutputStream.nullOutputStream());
            } catch (java.io.IOException e) {
                // the driver went away: stop as at the end of stdin
            }
            eof.countDown();
        }, "stdin");
        reader.setDaemon(true);
        reader.start();
        boolean announced = false;
        while (!eof.await(5, TimeUnit.MILLISECONDS)) {
            KafkaStreams.State st = check(streams, failure, deadline, "still serving at the timeout");
            if (!announced && st == KafkaStreams.State.RUNNING) {
                int active = 0;
                for (org.apache.kafka.streams.ThreadMetadata t : streams.metadataForLocalThreads()) {
                    active += t.activeTasks().size();
                }
                if (active == partitions) {
                    announced = true;
                    System.out.println("READY contestant=java scenario=" + scenario
                            + " running_ms=" + (System.currentTimeMillis() - jvmStart));
                    System.out.flush();
                }
            }
        }
    }

    /** flipLast is a copy of v with its last byte inverted. */
    static byte[] flipLast(byte[] v) {
        if (v == null) {
            return null;
        }
        byte[] out = v.clone();
        if (out.length > 0) {
            out[out.length - 1] ^= (byte) 0xff;
        }
        return out;
    }

    /** endOffsets reads the end offset of every partition of topic. */
    static Map<TopicPartition, Long> endOffsets(Admin admin, String topic) throws Exception {
        TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS).get(topic);
        Map<TopicPartition, OffsetSpec> req = new HashMap<>();
        for (TopicPartitionInfo p : d.partitions()) {
            req.put(new TopicPartition(topic, p.partition()), OffsetSpec.latest());
        }
        Map<TopicPartition, Long> ends = new HashMap<>();
        admin.listOffsets(req).all().get(30, TimeUnit.SECONDS)
                .forEach((tp, info) -> ends.put(tp, info.offset()));
        return ends;
    }

    /** committedAll reports whether group has committed every partition's end offset. */
    static boolean committedAll(Admin admin, String group, Map<TopicPartition, Long> ends) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> c = admin.listConsumerGroupOffsets(group)
                .partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
        for (Map.Entry<TopicPartition, Long> e : ends.entrySet()) {
            OffsetAndMetadata o = c.get(e.getKey());
            if (o == null || o.offset() < e.getValue()) {
                return false;
            }
        }
        return true;
    }
}
