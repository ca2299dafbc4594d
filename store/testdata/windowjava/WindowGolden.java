import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.LongSerializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.kstream.SessionWindowedDeserializer;
import org.apache.kafka.streams.kstream.SessionWindowedSerializer;
import org.apache.kafka.streams.kstream.TimeWindowedDeserializer;
import org.apache.kafka.streams.kstream.TimeWindowedSerializer;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.kstream.internals.SessionWindow;
import org.apache.kafka.streams.kstream.internals.TimeWindow;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.SessionStore;
import org.apache.kafka.streams.state.StoreBuilder;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.streams.state.WindowStore;
import org.apache.kafka.streams.state.WindowStoreIterator;
import org.apache.kafka.streams.state.internals.RocksDbWindowBytesStoreSupplier;

/**
 * Produces store/testdata/window_golden.txt, the expected results of kstream's window and
 * session stores (window_golden_test.go), with Kafka Streams 4.4's RocksDB stores:
 *
 *   javac -cp "$LIB/*" -d /tmp/wg WindowGolden.java
 *   java -cp "/tmp/wg:$LIB/*" WindowGolden ../window_script.txt > ../window_golden.txt
 *
 * where LIB holds kafka-streams, kafka-streams-test-utils, kafka-clients, rocksdbjni,
 * slf4j-api and slf4j-nop 4.4-compatible jars (those of testing/conformance's target/lib).
 *
 * The script (window_script.txt) has "serdes" lines and scenarios: "scenario NAME window
 * RETENTION SEGMENT_INTERVAL SIZE DUPS" or "scenario NAME session RETENTION", then commands.
 * Each command runs in a processor of a TopologyTestDriver against a persistent store with
 * logging on and caching off; the output is "> command", the changelog records the command
 * wrote ("changelog KEYHEX VALUEHEX|null"), then the result lines. Keys and values may hold
 * \xNN escapes (ASCII); output escapes control characters the same way. Trailing "!expired"
 * and "!differs" tokens, and lines starting with "=", are kstream's annotations (see
 * window_script.txt) and are ignored here.
 */
public final class WindowGolden {
    private static final HexFormat HEX = HexFormat.of();

    public static void main(String[] args) throws Exception {
        List<String> lines = Files.readAllLines(Path.of(args[0]));
        List<String> scenario = new ArrayList<>();
        String header = null;
        for (String raw : lines) {
            String line = raw.strip();
            if (line.isEmpty() || line.startsWith("#") || line.startsWith("=")) {
                continue;
            }
            if (line.startsWith("serdes ")) {
                System.out.println("> " + line);
                serdes(line.split(" "));
                continue;
            }
            if (line.startsWith("scenario ")) {
                if (header != null) {
                    run(header, scenario);
                }
                header = line;
                scenario = new ArrayList<>();
                continue;
            }
            scenario.add(line);
        }
        if (header != null) {
            run(header, scenario);
        }
    }

    static String unescape(String s) {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < s.length(); i++) {
            if (s.charAt(i) == '\\' && i + 3 < s.length() && s.charAt(i + 1) == 'x') {
                b.append((char) Integer.parseInt(s.substring(i + 2, i + 4), 16));
                i += 3;
            } else {
                b.append(s.charAt(i));
            }
        }
        return b.toString();
    }

    static String escape(String s) {
        StringBuilder b = new StringBuilder();
        for (char c : s.toCharArray()) {
            if (c < 0x20 || c == 0x7f) {
                b.append(String.format("\\x%02x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.toString();
    }

    // serdes time STRKEY START SIZE | serdes timelong LONGKEY START SIZE | serdes session STRKEY START END
    // | serdes sessionlong LONGKEY START END | serdes timedecode HEX SIZE
    static void serdes(String[] f) {
        switch (f[1]) {
            case "time": {
                TimeWindowedSerializer<String> ser = new TimeWindowedSerializer<>(new StringSerializer());
                long start = Long.parseLong(f[3]);
                long size = Long.parseLong(f[4]);
                byte[] b = ser.serialize("t", new Windowed<>(unescape(f[2]), new TimeWindow(start, start + size)));
                System.out.println(HEX.formatHex(b));
                TimeWindowedDeserializer<String> de = new TimeWindowedDeserializer<>(new StringDeserializer(), size);
                System.out.println(escape(de.deserialize("t", b).toString()));
                break;
            }
            case "timelong": {
                TimeWindowedSerializer<Long> ser = new TimeWindowedSerializer<>(new LongSerializer());
                long start = Long.parseLong(f[3]);
                long size = Long.parseLong(f[4]);
                byte[] b = ser.serialize("t", new Windowed<>(Long.parseLong(f[2]), new TimeWindow(start, start + size)));
                System.out.println(HEX.formatHex(b));
                break;
            }
            case "timedecode": {
                TimeWindowedDeserializer<String> de = new TimeWindowedDeserializer<>(new StringDeserializer(), Long.parseLong(f[3]));
                System.out.println(escape(de.deserialize("t", HEX.parseHex(f[2])).toString()));
                break;
            }
            case "session": {
                SessionWindowedSerializer<String> ser = new SessionWindowedSerializer<>(new StringSerializer());
                byte[] b = ser.serialize("t", new Windowed<>(unescape(f[2]), new SessionWindow(Long.parseLong(f[3]), Long.parseLong(f[4]))));
                System.out.println(HEX.formatHex(b));
                SessionWindowedDeserializer<String> de = new SessionWindowedDeserializer<>(new StringDeserializer());
                System.out.println(escape(de.deserialize("t", b).toString()));
                break;
            }
            case "sessionlong": {
                SessionWindowedSerializer<Long> ser = new SessionWindowedSerializer<>(new LongSerializer());
                byte[] b = ser.serialize("t", new Windowed<>(Long.parseLong(f[2]), new SessionWindow(Long.parseLong(f[3]), Long.parseLong(f[4]))));
                System.out.println(HEX.formatHex(b));
                break;
            }
            default:
                throw new IllegalArgumentException("unknown serdes line " + String.join(" ", f));
        }
    }

    static void run(String header, List<String> commands) throws Exception {
        System.out.println("> " + header);
        String[] h = header.split(" ");
        boolean window = h[2].equals("window");
        StoreBuilder<?> sb;
        long size = 0;
        if (window) {
            long retention = Long.parseLong(h[3]);
            long interval = Long.parseLong(h[4]);
            size = Long.parseLong(h[5]);
            boolean dups = Boolean.parseBoolean(h[6]);
            sb = Stores.windowStoreBuilder(
                    new RocksDbWindowBytesStoreSupplier("store", retention, interval, size, dups,
                            RocksDbWindowBytesStoreSupplier.WindowStoreTypes.DEFAULT_WINDOW_STORE),
                    Serdes.String(), Serdes.String())
                .withCachingDisabled().withLoggingEnabled(Map.of());
        } else {
            sb = Stores.sessionStoreBuilder(Stores.persistentSessionStore("store", Duration.ofMillis(Long.parseLong(h[3]))),
                    Serdes.String(), Serdes.String())
                .withCachingDisabled().withLoggingEnabled(Map.of());
        }
        final long windowSize = size;
        Topology t = new Topology();
        t.addSource("src", new StringDeserializer(), new StringDeserializer(), "cmd");
        t.addProcessor("exec", () -> new Exec(window, windowSize), "src");
        t.addStateStore(sb, "exec");
        t.addSink("sink", "out", new StringSerializer(), new StringSerializer(), "exec");
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, "golden");
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "dummy:1234");
        p.put(StreamsConfig.STATE_DIR_CONFIG, Files.createTempDirectory("wg").toString());
        try (TopologyTestDriver d = new TopologyTestDriver(t, p)) {
            TestInputTopic<String, String> in = d.createInputTopic("cmd", new StringSerializer(), new StringSerializer());
            TestOutputTopic<String, String> out = d.createOutputTopic("out", new StringDeserializer(), new StringDeserializer());
            TestOutputTopic<byte[], byte[]> cl = d.createOutputTopic("golden-store-changelog", new ByteArrayDeserializer(), new ByteArrayDeserializer());
            for (String c : commands) {
                System.out.println("> " + c);
                in.pipeInput("", c, 0L);
                for (KeyValue<byte[], byte[]> r : cl.readKeyValuesToList()) {
                    System.out.println("changelog " + HEX.formatHex(r.key) + " " + (r.value == null ? "null" : HEX.formatHex(r.value)));
                }
                String res = out.readValue();
                if (!res.isEmpty()) {
                    System.out.println(res);
                }
            }
        }
    }

    static final class Exec implements Processor<String, String, String, String> {
        private final boolean window;
        private final long size;
        private ProcessorContext<String, String> ctx;
        private WindowStore<String, String> w;
        private SessionStore<String, String> s;

        Exec(boolean window, long size) {
            this.window = window;
            this.size = size;
        }

        @Override
        public void init(ProcessorContext<String, String> context) {
            ctx = context;
            if (window) {
                w = context.getStateStore("store");
            } else {
                s = context.getStateStore("store");
            }
        }

        @Override
        public void process(Record<String, String> r) {
            List<String> out = new ArrayList<>();
            String[] f = r.value().split(" ");
            for (int i = 0; i < f.length; i++) {
                f[i] = unescape(f[i]);
            }
            switch (f[0]) {
                case "put":
                    w.put(f[1], val(f[3]), Long.parseLong(f[2]));
                    break;
                case "fetch": {
                    String v = w.fetch(f[1], Long.parseLong(f[2]));
                    out.add(v == null ? "null" : v);
                    break;
                }
                case "range":
                case "brange": {
                    long from = Long.parseLong(f[2]), to = Long.parseLong(f[3]);
                    try (WindowStoreIterator<String> it = f[0].equals("range") ? w.fetch(f[1], from, to) : w.backwardFetch(f[1], from, to)) {
                        while (it.hasNext()) {
                            KeyValue<Long, String> kv = it.next();
                            out.add(new Windowed<>(f[1], new TimeWindow(kv.key, kv.key + size)) + "=" + kv.value);
                        }
                    }
                    break;
                }
                case "keys":
                case "bkeys": {
                    long from = Long.parseLong(f[3]), to = Long.parseLong(f[4]);
                    drain(out, f[0].equals("keys") ? w.fetch(f[1], f[2], from, to) : w.backwardFetch(f[1], f[2], from, to));
                    break;
                }
                case "fetchall":
                    drain(out, w.fetchAll(Long.parseLong(f[1]), Long.parseLong(f[2])));
                    break;
                case "bfetchall":
                    drain(out, w.backwardFetchAll(Long.parseLong(f[1]), Long.parseLong(f[2])));
                    break;
                case "all":
                    drain(out, w.all());
                    break;
                case "ball":
                    drain(out, w.backwardAll());
                    break;
                case "sput":
                    s.put(new Windowed<>(f[1], new SessionWindow(Long.parseLong(f[2]), Long.parseLong(f[3]))), val(f[4]));
                    break;
                case "sremove":
                    s.remove(new Windowed<>(f[1], new SessionWindow(Long.parseLong(f[2]), Long.parseLong(f[3]))));
                    break;
                case "sfetch": {
                    String v = s.fetchSession(f[1], Long.parseLong(f[2]), Long.parseLong(f[3]));
                    out.add(v == null ? "null" : v);
                    break;
                }
                case "find":
                    drain(out, s.findSessions(f[1], Long.parseLong(f[2]), Long.parseLong(f[3])));
                    break;
                case "bfind":
                    drain(out, s.backwardFindSessions(f[1], Long.parseLong(f[2]), Long.parseLong(f[3])));
                    break;
                case "findkeys":
                    drain(out, s.findSessions(f[1], f[2], Long.parseLong(f[3]), Long.parseLong(f[4])));
                    break;
                case "bfindkeys":
                    drain(out, s.backwardFindSessions(f[1], f[2], Long.parseLong(f[3]), Long.parseLong(f[4])));
                    break;
                case "sfetchkey":
                    drain(out, s.fetch(f[1]));
                    break;
                case "sbfetchkey":
                    drain(out, s.backwardFetch(f[1]));
                    break;
                case "sfetchkeys":
                    drain(out, s.fetch(f[1], f[2]));
                    break;
                case "sbfetchkeys":
                    drain(out, s.backwardFetch(f[1], f[2]));
                    break;
                default:
                    throw new IllegalArgumentException("unknown command " + r.value());
            }
            List<String> esc = new ArrayList<>();
            for (String o : out) {
                esc.add(escape(o));
            }
            ctx.forward(new Record<>("", String.join("\n", esc), r.timestamp()));
        }

        static String val(String v) {
            return v.equals("null") ? null : v;
        }

        static void drain(List<String> out, KeyValueIterator<Windowed<String>, String> it) {
            try (it) {
                while (it.hasNext()) {
                    KeyValue<Windowed<String>, String> kv = it.next();
                    out.add(kv.key + "=" + kv.value);
                }
            }
        }
    }
}
