package serdes;

import java.io.ByteArrayOutputStream;
import java.math.BigDecimal;
import java.nio.ByteBuffer;
import java.time.Instant;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.avro.Conversions;
import org.apache.avro.Schema;
import org.apache.avro.data.TimeConversions;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.generic.GenericEnumSymbol;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.BinaryDecoder;
import org.apache.avro.io.BinaryEncoder;
import org.apache.avro.io.DecoderFactory;
import org.apache.avro.io.EncoderFactory;

/**
 * The Avro cases, encoded and decoded by Apache Avro's GenericDatumWriter and
 * GenericDatumReader (what Confluent's KafkaAvroSerializer uses), with Avro's conversions
 * for the logical types: BigDecimal for decimals, Instant for timestamps, LocalDate for
 * dates.
 */
final class AvroCases {
  private AvroCases() {}

  static final GenericData MODEL = new GenericData();

  static {
    MODEL.addLogicalTypeConversion(new Conversions.DecimalConversion());
    MODEL.addLogicalTypeConversion(new TimeConversions.TimestampMillisConversion());
    MODEL.addLogicalTypeConversion(new TimeConversions.TimestampMicrosConversion());
    MODEL.addLogicalTypeConversion(new TimeConversions.DateConversion());
  }

  static final String ORDER = """
      {"type": "record", "name": "Order", "namespace": "com.acme.interop", "fields": [
        {"name": "id", "type": "string"},
        {"name": "qty", "type": "int"},
        {"name": "total", "type": "long"},
        {"name": "ratio", "type": "float"},
        {"name": "score", "type": "double"},
        {"name": "paid", "type": "boolean"},
        {"name": "raw", "type": "bytes"},
        {"name": "customer", "type": {"type": "record", "name": "Customer", "fields": [
          {"name": "name", "type": "string"},
          {"name": "vip", "type": "boolean"}]}},
        {"name": "coupon", "type": ["null", "string"], "default": null},
        {"name": "note", "type": ["null", "string"], "default": null},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "placed_at", "type": {"type": "long", "logicalType": "timestamp-millis"}}
      ]}""";

  static final String NULL_NOTE = "Go's serde writes a null as a Kafka null (no bytes at all), as Confluent's KafkaAvroSerializer"
            + " writes a Java null; Go reads the framed null here all the same";

  static final String DECIMAL = "{\"type\": \"bytes\", \"logicalType\": \"decimal\", \"precision\": 9, \"scale\": 2}";

  static List<Case> cases(int firstID) {
    List<Case> cs = new ArrayList<>();
    Adder c = new Adder(cs, firstID);
    c.add("null", "\"null\"", null).differs(NULL_NOTE);
    c.add("boolean", "\"boolean\"", true);
    c.add("int", "\"int\"", -1234567);
    c.add("long", "\"long\"", 1234567890123L);
    c.add("float", "\"float\"", 3.25f);
    c.add("double", "\"double\"", -1234.5678);
    c.add("bytes", "\"bytes\"", ByteBuffer.wrap(new byte[] {0, 1, (byte) 0xfe, (byte) 0xff}));
    c.add("string", "\"string\"", "héllo, 世界");

    Schema order = new Schema.Parser().parse(ORDER);
    GenericRecord customer = new GenericData.Record(order.getField("customer").schema());
    customer.put("name", "Ann");
    customer.put("vip", true);
    GenericRecord o = new GenericData.Record(order);
    o.put("id", "o-1");
    o.put("qty", 3);
    o.put("total", -9000000000L);
    o.put("ratio", 0.5f);
    o.put("score", 99.125);
    o.put("paid", true);
    o.put("raw", ByteBuffer.wrap(new byte[] {(byte) 0xca, (byte) 0xfe}));
    o.put("customer", customer);
    o.put("coupon", "SPRING");
    o.put("note", null);
    o.put("status", new GenericData.EnumSymbol(order.getField("status").schema(), "PAID"));
    o.put("tags", List.of("gift", "fragile"));
    o.put("attrs", Map.of("weight", 1200L));
    o.put("amount", new BigDecimal("123.45"));
    o.put("placed_at", Instant.parse("2024-05-06T07:08:09.123Z"));
    c.add("record", ORDER, o);

    String nullable = "[\"null\", \"string\"]";
    c.add("union-null", nullable, null).differs(NULL_NOTE);
    c.add("union-string", nullable, "x");
    String color = "{\"type\": \"enum\", \"name\": \"Color\", \"namespace\": \"com.acme.interop\", \"symbols\": [\"RED\", \"GREEN\", \"BLUE\"]}";
    c.add("enum", color, new GenericData.EnumSymbol(new Schema.Parser().parse(color), "BLUE"));
    String longs = "{\"type\": \"array\", \"items\": \"long\"}";
    c.add("array", longs, List.of(1L, -2L, 300L));
    c.add("array-empty", longs, List.of());
    List<Long> many = new ArrayList<>();
    for (long i = 0; i < 150; i++) {
      many.add(i * i);
    }
    c.add("array-150", longs, many);
    c.add("map", "{\"type\": \"map\", \"values\": \"int\"}", Map.of("k", 7));
    c.add("map-empty", "{\"type\": \"map\", \"values\": \"int\"}", Map.of());
    c.add("decimal", DECIMAL, new BigDecimal("123.45"));
    c.add("decimal-negative", DECIMAL, new BigDecimal("-123.45"));
    c.add("decimal-zero", DECIMAL, new BigDecimal("0.00"));
    // 1.28 is unscaled 128, whose top bit needs a leading zero byte: 00 80.
    c.add("decimal-high-bit", DECIMAL, new BigDecimal("1.28"));
    // -1.28 is unscaled -128, one byte in two's complement: 80.
    c.add("decimal-minus-128", DECIMAL, new BigDecimal("-1.28")).differs(
        "hamba/avro writes the unscaled value -128 (and every -2^(8k-1)) with one byte more than"
            + " Apache Avro's minimal two's complement: ff 80 instead of 80; both read either");
    c.add("timestamp-millis", "{\"type\": \"long\", \"logicalType\": \"timestamp-millis\"}",
        Instant.parse("2024-05-06T07:08:09.123Z"));
    c.add("timestamp-micros", "{\"type\": \"long\", \"logicalType\": \"timestamp-micros\"}",
        Instant.parse("2024-05-06T07:08:09.123456Z"));
    c.add("date", "{\"type\": \"int\", \"logicalType\": \"date\"}", LocalDate.parse("2024-05-06"));
    // The largest schema id, so that every byte of the header's id is set.
    cs.add(new AvroCase("long-max-id", Integer.MAX_VALUE, "\"long\"", -1L));
    return cs;
  }

  /** Adds cases with consecutive schema ids. */
  private static final class Adder {
    final List<Case> cs;
    int id;

    Adder(List<Case> cs, int firstID) {
      this.cs = cs;
      this.id = firstID;
    }

    Case add(String name, String schema, Object value) {
      Case c = new AvroCase(name, id++, schema, value);
      cs.add(c);
      return c;
    }
  }

  static final class AvroCase extends Case {
    final Schema schema;
    final Object value;

    AvroCase(String name, int id, String schema, Object value) {
      super("avro", name, id);
      this.schema = new Schema.Parser().parse(schema);
      this.value = value;
    }

    @Override
    String schema() {
      return schema.toString();
    }

    @Override
    String text() {
      return render(value);
    }

    byte[] payload(Object v) throws Exception {
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      BinaryEncoder enc = EncoderFactory.get().directBinaryEncoder(out, null);
      new GenericDatumWriter<Object>(schema, MODEL).write(v, enc);
      enc.flush();
      return out.toByteArray();
    }

    @Override
    byte[] encode() throws Exception {
      ByteArrayOutputStream out = header(id);
      out.write(payload(value));
      return out.toByteArray();
    }

    @Override
    String decode(byte[] framed) throws Exception {
      byte[] p = payload(framed);
      BinaryDecoder dec = DecoderFactory.get().binaryDecoder(p, null);
      Object v = new GenericDatumReader<Object>(schema, schema, MODEL).read(null, dec);
      if (!dec.isEnd()) {
        throw new IllegalArgumentException("bytes left over after the value");
      }
      if (!Arrays.equals(payload(v), payload(value))) {
        throw new IllegalArgumentException("Java encodes the decoded value as " + hex(payload(v)) + ", the expected one as " + hex(payload(value)));
      }
      return render(v);
    }
  }

  /**
   * The canonical text of an Avro value: JSON-like, with strings and enum symbols quoted,
   * bytes as 0x and hex digits, decimals in plain notation at the schema's scale, timestamps
   * and dates in ISO 8601 (Instant.toString, LocalDate.toString), map entries sorted by key.
   */
  static String render(Object v) {
    if (v == null) {
      return "null";
    }
    if (v instanceof CharSequence s) {
      return quote(s.toString());
    }
    if (v instanceof GenericEnumSymbol<?> e) {
      return quote(e.toString());
    }
    if (v instanceof ByteBuffer bb) {
      byte[] b = new byte[bb.remaining()];
      bb.duplicate().get(b);
      return "0x" + Case.hex(b);
    }
    if (v instanceof BigDecimal d) {
      return d.toPlainString();
    }
    if (v instanceof Instant || v instanceof LocalDate) {
      return quote(v.toString());
    }
    if (v instanceof GenericRecord r) {
      StringBuilder b = new StringBuilder("{");
      for (Schema.Field f : r.getSchema().getFields()) {
        if (b.length() > 1) {
          b.append(", ");
        }
        b.append(quote(f.name())).append(": ").append(render(r.get(f.name())));
      }
      return b.append('}').toString();
    }
    if (v instanceof Collection<?> c) {
      StringBuilder b = new StringBuilder("[");
      for (Object x : c) {
        if (b.length() > 1) {
          b.append(", ");
        }
        b.append(render(x));
      }
      return b.append(']').toString();
    }
    if (v instanceof Map<?, ?> m) {
      Map<String, Object> sorted = new TreeMap<>();
      m.forEach((k, x) -> sorted.put(k.toString(), x));
      StringBuilder b = new StringBuilder("{");
      sorted.forEach((k, x) -> {
        if (b.length() > 1) {
          b.append(", ");
        }
        b.append(quote(k)).append(": ").append(render(x));
      });
      return b.append('}').toString();
    }
    return v.toString(); // booleans and numbers
  }

  private static String quote(String s) {
    return Case.quote(s);
  }
}
