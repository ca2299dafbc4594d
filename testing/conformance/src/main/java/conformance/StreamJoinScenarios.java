package conformance;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.ValueJoiner;

/**
 * The conformance scenarios of stream-stream windowed joins, registered with {@link Main#add} and mirrored in
 * kstreamtest. Their input topics are this family's own, so that no other scenario's input
 * changes.
 *
 * <p>The scenarios join sleft with sright (or sleft with itself) over JoinWindows and write
 * "l+r" to out, with "-" for a missing side (a non-match of a left or outer join) and "" for
 * a Kafka null (as kstream's string lambdas see it). Every key is a, b or k, which all go to
 * partition 0 of 4, so that the run with 4 partitions has one stream time, as this one.
 */
final class StreamJoinScenarios {
    private StreamJoinScenarios() {}

    private static KStream<String, String> sleft(StreamsBuilder b) {
        return b.stream("sleft", Consumed.with(Main.STRING, Main.STRING));
    }

    private static KStream<String, String> sright(StreamsBuilder b) {
        return b.stream("sright", Consumed.with(Main.STRING, Main.STRING));
    }

    private static void out(KStream<String, String> s) {
        s.to("out", Produced.with(Main.STRING, Main.STRING));
    }

    private static String side(String s) {
        return s == null ? "-" : s;
    }

    // Inner joins see no missing side; a null value never reaches a joiner.
    private static final ValueJoiner<String, String, String> INNER = (l, r) -> l + "+" + r;
    private static final ValueJoiner<String, String, String> OUTER = (l, r) -> side(l) + "+" + side(r);

    private static final JoinWindows GRACE = JoinWindows.ofTimeDifferenceAndGrace(Duration.ofSeconds(5), Duration.ofSeconds(3));
    private static final JoinWindows NO_GRACE = JoinWindows.ofTimeDifferenceWithNoGrace(Duration.ofSeconds(5));
    private static final JoinWindows ASYM = JoinWindows.ofTimeDifferenceAndGrace(Duration.ofSeconds(5), Duration.ofSeconds(1))
            .before(Duration.ofSeconds(2)).after(Duration.ofSeconds(6));

    // A key-changing operator that keeps the key (a null key becomes "a", as "" does in Go).
    private static KStream<String, String> rekey(KStream<String, String> s) {
        return s.selectKey((k, v) -> k == null ? "a" : k);
    }

    /** Registers the scenarios, in the order of the Go side. */
    static void scenarios() {
        Main.add("sj-inner", b -> out(sleft(b).join(sright(b), INNER, GRACE)));
        Main.add("sj-inner-nograce", b -> out(sleft(b).join(sright(b), INNER, NO_GRACE)));
        Main.add("sj-left", b -> out(sleft(b).leftJoin(sright(b), OUTER, GRACE)));
        Main.add("sj-left-nograce", b -> out(sleft(b).leftJoin(sright(b), OUTER, NO_GRACE)));
        Main.add("sj-outer", b -> out(sleft(b).outerJoin(sright(b), OUTER, GRACE)));
        Main.add("sj-outer-nograce", b -> out(sleft(b).outerJoin(sright(b), OUTER, NO_GRACE)));
        Main.add("sj-left-asym", b -> out(sleft(b).leftJoin(sright(b), OUTER, ASYM)));
        Main.add("sj-outer-asym", b -> out(sleft(b).outerJoin(sright(b), OUTER, ASYM)));
        Main.add("sj-named", b -> out(sleft(b).leftJoin(sright(b), OUTER, GRACE,
                StreamJoined.with(Main.STRING, Main.STRING, Main.STRING).withName("pay").withStoreName("paystore"))));
        Main.add("sj-named-outer", b -> out(sleft(b).outerJoin(sright(b), OUTER, GRACE,
                StreamJoined.<String, String, String>with(Main.STRING, Main.STRING, Main.STRING).withName("both"))));
        Main.add("sj-rekeyed", b -> out(rekey(sleft(b)).join(rekey(sright(b)), INNER, GRACE)));
        Main.add("sj-rekeyed-named", b -> out(rekey(sleft(b)).leftJoin(sright(b), OUTER, GRACE,
                StreamJoined.with(Main.STRING, Main.STRING, Main.STRING).withName("rk"))));
        Main.add("sj-self", b -> {
            KStream<String, String> s = sleft(b);
            out(s.join(s, INNER, GRACE));
        });
        Main.add("sj-self-nograce", b -> {
            KStream<String, String> s = sleft(b);
            out(s.join(s, INNER, NO_GRACE));
        });
        // Java's self-join rewrite takes any join of a stream with itself, left and outer too.
        Main.add("sj-self-left", b -> {
            KStream<String, String> s = sleft(b);
            out(s.leftJoin(s, OUTER, GRACE));
        });
        // A re-keyed stream joined with itself: one repartition (a named join's -left and
        // -right merge with topology.optimization=all) and a self-join.
        Main.add("sj-self-rekeyed", b -> {
            KStream<String, String> s = rekey(sleft(b));
            out(s.join(s, INNER, GRACE));
        });
        Main.add("sj-self-rekeyed-named", b -> {
            KStream<String, String> s = rekey(sleft(b));
            out(s.join(s, INNER, GRACE, StreamJoined.with(Main.STRING, Main.STRING, Main.STRING).withName("sr")));
        });
    }

    private static final long T0 = Main.T0;

    private static void add(List<Main.In> recs, String topic, String key, String value, long offset) {
        recs.add(new Main.In(topic, key, value, T0 + offset, String.valueOf(recs.size())));
    }

    /**
     * The records of this family's input topics, piped after Main's own, in this order; record
     * i has header i. Mirrored by confStreamJoinInput in kstreamtest.
     */
    static List<Main.In> input() {
        List<Main.In> recs = new ArrayList<>();
        add(recs, "sleft", "a", "L0", 1_000);
        add(recs, "sright", "a", "R1", 2_000);
        add(recs, "sleft", "b", "L2", 3_000);
        add(recs, "sright", "k", "R3", 4_000);
        add(recs, "sleft", "a", "L4", 9_000);
        add(recs, "sright", "a", "R5", 12_000);
        add(recs, "sright", "b", "R6", 7_000);
        add(recs, "sleft", null, "L7", 8_000);
        add(recs, "sright", null, "R8", 8_500);
        add(recs, "sleft", "a", null, 9_500);
        add(recs, "sright", "b", null, 10_000);
        add(recs, "sleft", "k", "L11", 16_000);
        add(recs, "sleft", "b", "L12", 21_000);
        add(recs, "sright", "a", "R13", 14_000);
        add(recs, "sright", "k", "R14", 30_000);
        add(recs, "sleft", "k", "L15", 33_000);
        add(recs, "sleft", "a", "L16", 24_000);
        add(recs, "sleft", "a", "L17", 26_500);
        add(recs, "sright", "a", "R18", 27_000);
        add(recs, "sleft", "b", "L19", 100_000);
        add(recs, "sright", "b", "R20", 101_000);
        add(recs, "sright", "b", "R21", 5_000);
        add(recs, "sleft", "a", "L22", 2_000);
        add(recs, "sleft", "k", "L23", 102_000);
        add(recs, "sright", "k", "R24", 103_500);
        add(recs, "sleft", "k", "L25", 103_500);
        add(recs, "sright", "a", "R26", 104_000);
        add(recs, "sleft", "a", "L27", 110_000);
        add(recs, "sright", "b", "R28", 111_000);
        add(recs, "sleft", "b", "L29", 200_000);
        return recs;
    }
}
