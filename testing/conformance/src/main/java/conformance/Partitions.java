package conformance;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;

import org.apache.kafka.clients.producer.internals.BuiltInPartitioner;
import org.apache.kafka.common.serialization.LongSerializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Writes the golden file of kstream's query_partition_test.go: for deterministic String keys
 * (serialized by StringSerializer: "key-0".."key-9999", non-ASCII keys and the empty string)
 * and Long keys (serialized by LongSerializer), the partition that the Java producer chooses
 * for a keyed record among 12 and among 7 partitions, computed by kafka-clients' own
 * BuiltInPartitioner.partitionForKey(byte[], int) (murmur2, made positive, modulo the
 * partition count), the code path of KafkaProducer.partition for a record with a key and no
 * explicit partition.
 *
 * <pre>testing/conformance/run.sh partitions [FILE]</pre>
 *
 * Each line is {@code string HEX P12 P7} or {@code long VALUE HEX P12 P7}, HEX being the
 * serialized key in hex ("-" when empty).
 */
public final class Partitions {
    private Partitions() {}

    static final int[] COUNTS = {12, 7};

    public static void main(String[] args) throws IOException {
        if (args.length != 1) {
            throw new IllegalArgumentException("usage: Partitions FILE");
        }
        List<String> strings = new ArrayList<>();
        for (int i = 0; i < 10_000; i++) {
            strings.add("key-" + i);
        }
        strings.add("");
        String[] fixed = {"é", "naïve", "Ünïcödé-schlüssel", "ключ", "键", "キー", "مفتاح", "🔑", "a🔑b", "\u0000", "tab\tkey", "line\nkey", "ß", "Ω≈ç√∫"};
        for (String s : fixed) {
            strings.add(s);
        }
        for (int i = 0; i < 100; i++) {
            strings.add("ключ-" + i);
            strings.add("键-" + i);
            strings.add("🔑-" + i);
        }
        List<Long> longs = new ArrayList<>();
        for (long i = -100; i <= 100; i++) {
            longs.add(i);
        }
        longs.add(Long.MIN_VALUE);
        longs.add(Long.MAX_VALUE);
        longs.add((long) Integer.MIN_VALUE);
        longs.add((long) Integer.MAX_VALUE);
        for (long i = 0; i < 200; i++) {
            longs.add(i * 1_000_000_007L * 7919L);
        }

        HexFormat hex = HexFormat.of();
        try (StringSerializer ss = new StringSerializer(); LongSerializer ls = new LongSerializer();
             PrintWriter w = new PrintWriter(Files.newBufferedWriter(Path.of(args[0]), StandardCharsets.UTF_8))) {
            w.println("# Written by testing/conformance/run.sh partitions (conformance.Partitions): the partition that");
            w.println("# kafka-clients 4.4.0's BuiltInPartitioner.partitionForKey(serializedKey, n) chooses for n = 12 and 7.");
            w.println("# string HEX P12 P7   (StringSerializer, UTF-8; HEX \"-\" when empty)");
            w.println("# long VALUE HEX P12 P7   (LongSerializer, 8 bytes big-endian)");
            for (String s : strings) {
                byte[] b = ss.serialize("t", s);
                w.printf("string %s%s%n", b.length == 0 ? "-" : hex.formatHex(b), parts(b));
            }
            for (long v : longs) {
                byte[] b = ls.serialize("t", v);
                w.printf("long %d %s%s%n", v, hex.formatHex(b), parts(b));
            }
        }
    }

    private static String parts(byte[] b) {
        StringBuilder sb = new StringBuilder();
        for (int n : COUNTS) {
            sb.append(' ').append(BuiltInPartitioner.partitionForKey(b, n));
        }
        return sb.toString();
    }
}
