package serdes;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * The JSON Schema cases: JSON written by Jackson's ObjectMapper with its defaults, as
 * Confluent's KafkaJsonSchemaSerializer writes it, after the 5-byte header. Objects keep
 * their fields in the order they were put, which is the order of the Go struct's fields.
 */
final class JsonCases {
  private JsonCases() {}

  static final ObjectMapper MAPPER = new ObjectMapper();

  static final String SCHEMA = """
      {"$schema": "http://json-schema.org/draft-07/schema#", "title": "com.acme.interop.Order",
       "type": "object",
       "properties": {
         "id": {"type": "string"},
         "qty": {"type": "integer"},
         "price": {"type": "number"},
         "customer": {"type": "object",
           "properties": {"name": {"type": "string"}, "email": {"type": ["string", "null"]}},
           "required": ["name", "email"]},
         "lines": {"type": "array", "items": {"type": "object",
           "properties": {"sku": {"type": "string"}, "count": {"type": "integer"}},
           "required": ["sku", "count"]}},
         "note": {"type": ["string", "null"]}},
       "required": ["id", "qty", "price", "customer", "lines", "note"]}""";

  static ObjectNode order(String id, int qty, double price, String name, String email, String note) {
    ObjectNode o = MAPPER.createObjectNode();
    o.put("id", id);
    o.put("qty", qty);
    o.put("price", price);
    ObjectNode c = o.putObject("customer");
    c.put("name", name);
    c.put("email", email);
    o.putArray("lines");
    o.put("note", note);
    return o;
  }

  static ObjectNode line(String sku, int count) {
    return MAPPER.createObjectNode().put("sku", sku).put("count", count);
  }

  static List<Case> cases(int firstID) throws Exception {
    String schema = MAPPER.writeValueAsString(MAPPER.readTree(SCHEMA));
    List<Case> cs = new ArrayList<>();
    int id = firstID;

    ObjectNode o = order("o-1", 2, 12.5, "Ann", "ann@example.com", "leave at the door");
    ((ArrayNode) o.get("lines")).add(line("a-1", 1)).add(line("b-2", 3));
    cs.add(new JsonCase("order", id++, schema, o));
    cs.add(new JsonCase("order-nulls", id++, schema, order("o-2", 1, 0.25, "Bob", null, null)));
    ObjectNode esc = order("o-<3>", 1, -7.125, "Zoë & 世界", "a@b", "fish & chips \"to go\" \\ \n\t/");
    ((ArrayNode) esc.get("lines")).add(line("<b>", 0));
    cs.add(new JsonCase("escapes", id++, schema, esc));
    cs.add(new JsonCase("whole-double", id++, schema, order("o-4", 1, 10.0, "Cy", null, null))
        .differs("encoding/json writes the double 10.0 as 10, Jackson as 10.0 (and 1e21 as 1e+21, Jackson 1.0E21); both read either"));
    cs.add(new JsonCase("line-separator", id++, schema, order("o-5", 1, 1.5, "Di", null, "a\u2028b\u2029c"))
        .differs("encoding/json escapes U+2028 and U+2029 as \\u2028 and \\u2029, Jackson writes them as they are; both read either"));
    cs.add(new JsonCase("astral-character", id++, schema, order("o-7", 1, 1.5, "Fay", null, "a😀b"))
        .differs("Jackson escapes a character beyond U+FFFF as its UTF-16 surrogates (\\uD83D\\uDE00), encoding/json writes its 4 UTF-8 bytes; both read either"));
    cs.add(new JsonCase("control-character", id++, schema, order("o-6", 1, 1.5, "Ed", null, "a\u001fb"))
        .differs("encoding/json escapes control characters with lower-case hex digits (\\u001f), Jackson with upper-case ones (\\u001F); both read either"));
    return cs;
  }

  /** Numbers compare by value, so that 10 and 10.0 are equal. */
  static final Comparator<JsonNode> BY_VALUE = (a, b) -> {
    if (a.isNumber() && b.isNumber()) {
      return a.decimalValue().compareTo(b.decimalValue());
    }
    return a.equals(b) ? 0 : 1;
  };

  static final class JsonCase extends Case {
    final String schema;
    final JsonNode value;

    JsonCase(String name, int id, String schema, JsonNode value) {
      super("jsonschema", name, id);
      this.schema = schema;
      this.value = value;
    }

    @Override
    String schema() {
      return schema;
    }

    @Override
    String text() {
      try {
        return MAPPER.writeValueAsString(value);
      } catch (Exception e) {
        throw new IllegalStateException(e);
      }
    }

    @Override
    byte[] encode() throws Exception {
      ByteArrayOutputStream out = header(id);
      out.write(MAPPER.writeValueAsBytes(value));
      return out.toByteArray();
    }

    @Override
    String decode(byte[] framed) throws Exception {
      JsonNode v = MAPPER.readTree(payload(framed));
      if (!v.equals(BY_VALUE, value)) {
        throw new IllegalArgumentException("decodes to " + MAPPER.writeValueAsString(v));
      }
      return text();
    }
  }
}
