package conformance;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
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
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.kstream.Branched;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Named;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Repartitioned;
import org.apache.kafka.streams.test.TestRecord;

/**
 * Runs each conformance scenario in TopologyTestDriver and writes its output to
 * {@code <outdir>/<scenario>.txt}, one line per output record:
 * {@code key|value|timestampMillis|name=value,name=value}.
 *
 * <p>The scenarios mirror kstreamtest/conformance_test.go; keep the two in step.
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
            List<String> lines = run(e.getValue());
            Path file = outDir.resolve(e.getKey() + ".txt");
            StringBuilder sb = new StringBuilder();
            for (String line : lines) {
                sb.append(line).append('\n');
            }
            Files.writeString(file, sb.toString(), StandardCharsets.UTF_8);
            System.out.println("wrote " + file + " (" + lines.size() + " records)");
        }
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

        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, "conformance");
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "dummy:1234");
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);

        List<String> lines = new ArrayList<>();
        try (TopologyTestDriver driver = new TopologyTestDriver(builder.build(), props)) {
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

    // A Kafka null is written as <null>; the Go side never produces it for these scenarios.
    private static String str(String s) {
        return s == null ? "<null>" : s;
    }
}
