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
        // The shop (issue 25 item 5): orders left-joined with their payments within 5
        // minutes, over the topics shop-orders and shop-payments (shop()), to record when Java emits each
        // unpaid order: it looks for closed windows only once stream time is past the
        // timestamp it last read from the non-match store (minTime) plus the window, and
        // that is the latest order then waiting, not the earliest.
        Main.add("sj-shop-left", b -> out(orders(b).leftJoin(payments(b), OUTER, SHOP_NO_GRACE)));
        Main.add("sj-shop-left-grace", b -> out(orders(b).leftJoin(payments(b), OUTER, SHOP_GRACE)));
        Main.add("sj-shop-outer", b -> out(orders(b).outerJoin(payments(b), OUTER, SHOP_GRACE)));
    }

    private static KStream<String, String> orders(StreamsBuilder b) {
        return b.stream("shop-orders", Consumed.with(Main.STRING, Main.STRING));
    }

    private static KStream<String, String> payments(StreamsBuilder b) {
        return b.stream("shop-payments", Consumed.with(Main.STRING, Main.STRING));
    }

    private static final JoinWindows SHOP_NO_GRACE = JoinWindows.ofTimeDifferenceWithNoGrace(Duration.ofMinutes(5));
    private static final JoinWindows SHOP_GRACE = JoinWindows.ofTimeDifferenceAndGrace(Duration.ofMinutes(5), Duration.ofMinutes(1));

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
        recs.addAll(shop());
        return recs;
    }

    /** A time of the shop's day as a timestamp: T0 stands for 10:00:00. */
    private static long at(int h, int m, int s) {
        return T0 + (((h - 10) * 60L + m) * 60L + s) * 1000L;
    }

    /**
     * The shop's orders and payments (topics shop-orders and shop-payments), piped after the records
     * above; record i of this list has header i. The keys are order ids chosen to go to
     * partition 0 of 4, as a, b and k do. Mirrored by confShopRecords in kstreamtest.
     */
    private static List<Main.In> shop() {
        String[][] rows = {
            // topic, key, value, time of day
            {"shop-orders", "o4", "o4:book", "09:56:30"}, // unpaid; its window closes at 10:01:30
            {"shop-orders", "o9", "o9:pen", "10:01:05"}, // unpaid: due once stream time passes 10:06:05
            {"shop-orders", "o11", "o11:lamp", "10:01:20"}, // paid at 10:02:00
            {"shop-orders", "o17", "o17:cup", "10:01:40"}, // unpaid; closes o4's window
            {"shop-payments", "o11", "card", "10:02:00"},
            {"shop-orders", "o29", "o29:desk", "10:03:30"},
            {"shop-payments", "o29", "cash", "10:04:10"},
            {"shop-orders", "o31", "o31:mug", "10:05:50"}, // paid at 10:08:00
            {"shop-orders", "o36", "o36:chair", "10:06:10"}, // stream time passes o9's 10:06:05
            {"shop-payments", "o40", "card", "10:06:15"}, // paid before its order came
            {"shop-orders", "o40", "o40:rug", "10:06:25"},
            {"shop-orders", "o42", "o42:vase", "10:06:50"}, // stream time passes o17's 10:06:40
            {"shop-payments", "o17", "card", "10:06:00"}, // o17's payment, late without grace
            {"shop-payments", "o77", "refund", "10:07:30"}, // a payment of no order
            {"shop-payments", "o31", "card", "10:08:00"},
            {"shop-orders", "o44", "o44:fork", "10:09:00"},
            {"shop-orders", "o49", "o49:bowl", "10:11:00"},
            {"shop-orders", "o54", "o54:sofa", "10:11:30"}, // passes o36's 10:11:10
            {"shop-orders", "o55", "o55:bed", "10:12:00"}, // passes o42's 10:11:50
            {"shop-orders", "o29", "o29:shelf", "10:12:30"}, // a second order o29, unpaid
            {"shop-orders", "o66", "o66:tray", "10:14:30"}, // passes o44's 10:14:00
            {"shop-orders", "o67", "o67:jar", "10:16:30"}, // passes o49's 10:16:00
            {"shop-orders", "o70", "o70:clock", "10:30:00"}, // closes every window above
        };
        List<Main.In> recs = new ArrayList<>();
        for (String[] r : rows) {
            String[] hms = r[3].split(":");
            long ts = at(Integer.parseInt(hms[0]), Integer.parseInt(hms[1]), Integer.parseInt(hms[2]));
            recs.add(new Main.In(r[0], r[1], r[2], ts, String.valueOf(recs.size())));
        }
        return recs;
    }
}
