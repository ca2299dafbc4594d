package conformance;

import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.streams.kstream.internals.foreignkeyjoin.CombinedKeySchema;
import org.apache.kafka.streams.kstream.internals.foreignkeyjoin.SubscriptionResponseWrapper;
import org.apache.kafka.streams.kstream.internals.foreignkeyjoin.SubscriptionResponseWrapperSerde;
import org.apache.kafka.streams.kstream.internals.foreignkeyjoin.SubscriptionWrapper;
import org.apache.kafka.streams.kstream.internals.foreignkeyjoin.SubscriptionWrapperSerde;
import org.apache.kafka.streams.state.internals.Murmur3;

/**
 * Prints the bytes of Kafka Streams 4.4's foreign-key join wire formats for the test vectors
 * of kstream's fkjoin_wire_test.go: Murmur3.hash128, SubscriptionWrapperSerde,
 * SubscriptionResponseWrapperSerde and CombinedKeySchema, with String keys and values.
 *
 * <pre>java -cp "target/classes:target/lib/*" conformance.FkJoinWire</pre>
 */
public final class FkJoinWire {
    private FkJoinWire() {}

    public static void main(String[] args) throws Exception {
        HexFormat hex = HexFormat.of();
        String[] inputs = {"", "a", "order-1", "0123456789abcde", "0123456789abcdef", "0123456789abcdef0", "0123456789abcdef01234567", "customer-42|widget|x"};
        for (String s : inputs) {
            long[] h = Murmur3.hash128(s.getBytes(StandardCharsets.UTF_8));
            System.out.printf("hash128 %s %016x %016x%n", quote(s), h[0], h[1]);
        }
        SubscriptionWrapperSerde<String> sws = new SubscriptionWrapperSerde<>(() -> "t-pk", Serdes.String());
        Serializer<SubscriptionWrapper<String>> ss = sws.serializer();
        long[] h = Murmur3.hash128("order-value".getBytes(StandardCharsets.UTF_8));
        for (SubscriptionWrapper.Instruction in : SubscriptionWrapper.Instruction.values()) {
            System.out.printf("subscription %s hash pk=o1 part=3 %s%n", in, hex.formatHex(ss.serialize("x", new org.apache.kafka.common.header.internals.RecordHeaders(), new SubscriptionWrapper<>(h, in, "o1", 3))));
            System.out.printf("subscription %s nohash pk=o1 part=0 %s%n", in, hex.formatHex(ss.serialize("x", new org.apache.kafka.common.header.internals.RecordHeaders(), new SubscriptionWrapper<>(null, in, "o1", 0))));
        }
        SubscriptionResponseWrapperSerde<String> rws = new SubscriptionResponseWrapperSerde<>(Serdes.String());
        Serializer<SubscriptionResponseWrapper<String>> rs = rws.serializer();
        System.out.printf("response hash value=c1 %s%n", hex.formatHex(rs.serialize("x", new org.apache.kafka.common.header.internals.RecordHeaders(), new SubscriptionResponseWrapper<>(h, "c1", 3))));
        System.out.printf("response hash null %s%n", hex.formatHex(rs.serialize("x", new org.apache.kafka.common.header.internals.RecordHeaders(), new SubscriptionResponseWrapper<>(h, null, 3))));
        System.out.printf("response nohash value=c1 %s%n", hex.formatHex(rs.serialize("x", new org.apache.kafka.common.header.internals.RecordHeaders(), new SubscriptionResponseWrapper<>(null, "c1", 0))));
        System.out.printf("response nohash null %s%n", hex.formatHex(rs.serialize("x", new org.apache.kafka.common.header.internals.RecordHeaders(), new SubscriptionResponseWrapper<>(null, null, 0))));
        CombinedKeySchema<String, String> cks = new CombinedKeySchema<>(() -> "t-fk", Serdes.String(), () -> "t-pk", Serdes.String());
        Method toBytes = CombinedKeySchema.class.getDeclaredMethod("toBytes", Object.class, Object.class, org.apache.kafka.common.header.Headers.class);
        toBytes.setAccessible(true);
        Object ck = toBytes.invoke(cks, "cust-7", "order-19", new org.apache.kafka.common.header.internals.RecordHeaders());
        System.out.printf("combined fk=cust-7 pk=order-19 %s%n", hex.formatHex(((org.apache.kafka.common.utils.Bytes) ck).get()));
    }

    private static String quote(String s) {
        return "\"" + s + "\"";
    }
}
