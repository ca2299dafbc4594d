package serdes;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The golden file of one case, DIR/FORMAT/NAME.txt: "#" comment lines, then "key: value"
 * lines (id, value, hex, and note for a documented difference), then a line "schema:"
 * followed by the writer schema, to the end of the file. serde/testdata/interop/README.md
 * describes it; the Go tests read and write the same layout.
 */
final class Golden {
  final Map<String, String> fields = new LinkedHashMap<>();
  String schema;

  static void write(Path file, String comment, Map<String, String> fields, String schema) throws IOException {
    StringBuilder b = new StringBuilder();
    b.append("# ").append(comment).append('\n');
    for (Map.Entry<String, String> e : fields.entrySet()) {
      b.append(e.getKey()).append(": ").append(e.getValue()).append('\n');
    }
    b.append("schema:\n").append(schema);
    if (!schema.endsWith("\n")) {
      b.append('\n');
    }
    Files.createDirectories(file.getParent());
    Files.writeString(file, b.toString(), StandardCharsets.UTF_8);
  }

  static Golden read(Path file) throws IOException {
    Golden g = new Golden();
    List<String> lines = Files.readAllLines(file, StandardCharsets.UTF_8);
    for (int i = 0; i < lines.size(); i++) {
      String line = lines.get(i);
      if (line.startsWith("#") || line.isEmpty()) {
        continue;
      }
      if (line.equals("schema:")) {
        g.schema = String.join("\n", lines.subList(i + 1, lines.size()));
        return g;
      }
      int colon = line.indexOf(": ");
      if (colon < 0) {
        throw new IOException(file + ":" + (i + 1) + ": not a \"key: value\" line: " + line);
      }
      g.fields.put(line.substring(0, colon), line.substring(colon + 2));
    }
    throw new IOException(file + ": no \"schema:\" line");
  }

  String get(Path file, String key) throws IOException {
    String v = fields.get(key);
    if (v == null) {
      throw new IOException(file + ": no \"" + key + ":\" line");
    }
    return v;
  }
}
