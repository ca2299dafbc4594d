package conformance;

import java.util.ArrayList;
import java.util.List;

import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.TableJoined;

/**
 * The conformance scenarios of foreign-key table-table joins, registered with {@link Main#add} and mirrored in
 * kstreamtest (conformance_fkjoin_test.go). Their input topics are this family's own, so that no other scenario's input
 * changes: orders (key: order id, value "customer|item"; an empty customer is a null
 * foreign key) and customers (key: customer id, value: a name).
 */
final class FkJoinScenarios {
    private FkJoinScenarios() {}

    private static KTable<String, String> orders(StreamsBuilder b) {
        return b.table("orders", Consumed.with(Main.STRING, Main.STRING), Materialized.as("orders-store"));
    }

    private static KTable<String, String> customers(StreamsBuilder b) {
        return b.table("customers", Consumed.with(Main.STRING, Main.STRING), Materialized.as("customers-store"));
    }

    /** The foreign key of an order: its customer, or null when empty. */
    static String customer(String order) {
        String c = order.split("\\|", -1)[0];
        return c.isEmpty() ? null : c;
    }

    private static String orDash(String s) {
        return s == null ? "-" : s;
    }

    /** Registers the scenarios, in the order of the Go side. */
    static void scenarios() {
        // fk-join-inner, fk-join-left: the plain joins; the input changes foreign keys,
        // deletes orders and customers, and has null foreign keys and null keys.
        Main.add("fk-join-inner", b -> orders(b)
                .join(customers(b), FkJoinScenarios::customer, (o, c) -> o + "/" + c)
                .toStream().to("out"));
        Main.add("fk-join-left", b -> orders(b)
                .leftJoin(customers(b), FkJoinScenarios::customer, (o, c) -> o + "/" + orDash(c))
                .toStream().to("out"));
        // fk-join-named-materialized: TableJoined.as names every operator, store and topic.
        Main.add("fk-join-named-materialized", b -> orders(b)
                .join(customers(b), FkJoinScenarios::customer, (o, c) -> o + "/" + c,
                        TableJoined.as("fkj"), Materialized.as("fkj-store"))
                .toStream().to("out"));
        // fk-join-left-named: a named left join without a result store.
        Main.add("fk-join-left-named", b -> orders(b)
                .leftJoin(customers(b), FkJoinScenarios::customer, (o, c) -> o + "/" + orDash(c),
                        TableJoined.as("fkl"))
                .toStream().to("out"));
        // fk-join-key-extractor: the KIP-1104 extractor of key and value (order o6 always
        // belongs to c1), and a mapValues after the join.
        Main.add("fk-join-key-extractor", b -> orders(b)
                .join(customers(b), (k, v) -> k.equals("o6") ? "c1" : customer(v), (o, c) -> o + "/" + c)
                .mapValues(v -> v.toUpperCase())
                .toStream().to("out"));
        // fk-join-groupby-count: a regrouping below an unmaterialized result forces its
        // materialization (KTableSource.materialize with the generated store name).
        Main.add("fk-join-groupby-count", b -> orders(b)
                .join(customers(b), FkJoinScenarios::customer, (o, c) -> c)
                .groupBy((k, v) -> KeyValue.pair(v, k))
                .count(Materialized.as("fk-counts"))
                .mapValues(n -> String.valueOf(n))
                .toStream().to("out"));
        // fk-join-chain: the materialized result of one FK join is the left side of another
        // (customer -> region), and the regions table is also joined by primary key.
        Main.add("fk-join-then-left", b -> {
            KTable<String, String> cust = customers(b);
            KTable<String, String> j = orders(b).join(cust, FkJoinScenarios::customer, (o, c) -> o + "/" + c,
                    Materialized.as("fk-first"));
            j.leftJoin(cust, (k, v) -> k.equals("o1") ? "c1" : "c3", (v, c) -> v + "+" + orDash(c))
                    .toStream().to("out");
        });
    }

    private static final Object[][] RECORDS = {
        // topic, key, value, seconds after T0, header
        {"customers", "c1", "Ann", 1, null},
        {"customers", "c2", "Bob", 2, null},
        {"orders", "o1", "c1|apple", 3, "h3"},
        {"orders", "o2", "c2|pear", 4, null},
        {"orders", "o3", "c3|fig", 5, null},
        {"customers", "c3", "Cid", 6, null},
        {"orders", "o1", "c2|apple", 7, null},
        {"customers", "c2", "Bobby", 8, "h8"},
        {"orders", "o4", "|kiwi", 9, null},
        {"orders", "o2", null, 10, null},
        {"customers", "c1", null, 11, null},
        {"customers", "c3", null, 12, null},
        {"orders", "o4", "c1|kiwi", 13, null},
        {"customers", "c1", "Ann2", 14, null},
        {"orders", "o5", "c4|plum", 15, null},
        {"orders", "o5", "c2|plum", 16, null},
        {"orders", "o6", "c2|lime", 8, null},
        {"orders", "o1", "c2|apple2", 17, null},
        {"orders", "o3", "|fig", 18, null},
        {"orders", null, "c1|x", 19, null},
        {"customers", null, "Zed", 20, null},
        {"orders", "o7", "c9|melon", 21, null},
        {"orders", "o7", null, 22, null},
        {"orders", "o8", null, 23, null},
        {"customers", "c2", "Bo", 24, "h24"},
        {"orders", "o5", "c2|plum", 25, null},
        {"customers", "c3", "Cy", 5, null},
        {"customers", "c2", null, 26, null},
        {"orders", "o9", "c1|date", 27, null},
        {"orders", "o6", "c3|lime", 28, null},
        {"orders", "o1", "c1|apple3", 29, null},
    };

    /** The records of this family's input topics, piped after Main's own. */
    static List<Main.In> input() {
        List<Main.In> recs = new ArrayList<>();
        for (Object[] r : RECORDS) {
            recs.add(new Main.In((String) r[0], (String) r[1], (String) r[2], Main.T0 + ((Integer) r[3]) * 1000L, (String) r[4]));
        }
        return recs;
    }
}
