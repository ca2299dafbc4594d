package serdes;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Stream;

/**
 * The Java side of the Schema Registry serde interop check (run.sh beside the pom).
 *
 * <pre>
 *   Main write DIR   writes DIR/FORMAT/CASE.txt for every case: Java's framed bytes
 *   Main read DIR    checks the DIR/FORMAT/CASE.txt that the Go serdes wrote
 * </pre>
 *
 * The layout of a file is Golden's; serde/testdata/interop/README.md describes it.
 */
public final class Main {
  private Main() {}

  static final String[] FORMATS = {"avro", "protobuf", "jsonschema"};

  static List<Case> cases() throws Exception {
    List<Case> cs = new ArrayList<>();
    cs.addAll(AvroCases.cases(1));
    cs.addAll(ProtobufCases.cases(101));
    cs.addAll(JsonCases.cases(201));
    Set<String> names = new HashSet<>();
    Set<Integer> ids = new HashSet<>();
    for (Case c : cs) {
      if (!names.add(c.path()) || !ids.add(c.id)) {
        throw new IllegalStateException("case " + c.path() + ": name or schema id " + c.id + " used twice");
      }
    }
    return cs;
  }

  public static void main(String[] args) throws Exception {
    if (args.length != 2 || !(args[0].equals("write") || args[0].equals("read"))) {
      System.err.println("usage: Main write|read DIR");
      System.exit(2);
    }
    Path dir = Path.of(args[1]);
    List<Case> cases = cases();
    if (args[0].equals("write")) {
      write(dir, cases);
    } else {
      System.exit(read(dir, cases) ? 0 : 1);
    }
  }

  static void write(Path dir, List<Case> cases) throws Exception {
    for (String f : FORMATS) {
      for (Path p : txtFiles(dir.resolve(f))) {
        Files.delete(p);
      }
    }
    String versions = "Apache Avro " + org.apache.avro.Schema.class.getPackage().getImplementationVersion()
        + ", protobuf-java " + com.google.protobuf.RuntimeVersion.MAJOR + "." + com.google.protobuf.RuntimeVersion.MINOR
        + "." + com.google.protobuf.RuntimeVersion.PATCH
        + ", Jackson " + com.fasterxml.jackson.databind.cfg.PackageVersion.VERSION;
    for (Case c : cases) {
      Map<String, String> fields = new LinkedHashMap<>();
      fields.put("id", Integer.toString(c.id));
      fields.put("value", c.text());
      fields.put("hex", Case.hex(c.encode()));
      if (c.knownDifference != null) {
        fields.put("note", "Go's bytes differ: " + c.knownDifference);
      }
      Golden.write(dir.resolve(c.format).resolve(c.name + ".txt"),
          c.path() + ": written by testing/serdes (Java: " + versions + "); see ../README.md", fields, c.schema());
    }
    System.out.println("serdes: wrote " + cases.size() + " golden files to " + dir);
  }

  static boolean read(Path dir, List<Case> cases) throws Exception {
    List<String> failures = new ArrayList<>();
    int identical = 0;
    List<String> known = new ArrayList<>();
    Set<Path> expected = new HashSet<>();
    for (Case c : cases) {
      Path file = dir.resolve(c.format).resolve(c.name + ".txt");
      expected.add(file);
      if (!Files.exists(file)) {
        failures.add(c.path() + ": Go wrote no " + file);
        continue;
      }
      try {
        Golden g = Golden.read(file);
        int id = Integer.parseInt(g.get(file, "id"));
        if (id != c.id) {
          failures.add(c.path() + ": schema id " + id + ", want " + c.id);
          continue;
        }
        String text = g.get(file, "value");
        if (!text.equals(c.text())) {
          failures.add(c.path() + ": Go's value text\n    " + text + "\n  is not Java's\n    " + c.text());
          continue;
        }
        byte[] goBytes = Case.unhex(g.get(file, "hex"));
        if (goBytes.length == 0) {
          // A Kafka null: what Confluent's serializers write for a Java null.
          if (c.knownDifference != null && c.text().equals("null")) {
            known.add(c.path());
          } else {
            failures.add(c.path() + ": Go wrote a Kafka null (no bytes)");
          }
          continue;
        }
        String decoded;
        try {
          decoded = c.decode(goBytes);
        } catch (Exception e) {
          failures.add(c.path() + ": Java cannot read Go's bytes " + Case.hex(goBytes) + ": " + e);
          continue;
        }
        if (!decoded.equals(c.text())) {
          failures.add(c.path() + ": Go's bytes decode to\n    " + decoded + "\n  want\n    " + c.text());
          continue;
        }
        byte[] javaBytes = c.encode();
        boolean same = Arrays.equals(goBytes, javaBytes);
        if (c.knownDifference == null && !same) {
          failures.add(c.path() + ": Go's bytes differ from Java's\n    go:   " + Case.hex(goBytes) + "\n    java: " + Case.hex(javaBytes));
        } else if (c.knownDifference != null && same) {
          failures.add(c.path() + ": Go's bytes are now Java's (" + Case.hex(javaBytes) + "): the documented difference is gone;"
              + " drop it from the case, the README and docs/serdes.md");
        } else if (same) {
          identical++;
        } else {
          known.add(c.path());
        }
      } catch (Exception e) {
        failures.add(c.path() + ": " + e);
      }
    }
    for (String f : FORMATS) {
      for (Path p : txtFiles(dir.resolve(f))) {
        if (!expected.contains(p)) {
          failures.add(p + ": no such case in testing/serdes");
        }
      }
    }
    for (String f : failures) {
      System.err.println("FAIL " + f);
    }
    System.out.println("serdes: Java read " + cases.size() + " Go-written cases: " + identical
        + " byte-identical, " + known.size() + " documented differences " + known + ", " + failures.size() + " failed"
        + (failures.isEmpty() ? " (all decode to the expected values)" : ""));
    return failures.isEmpty();
  }

  static List<Path> txtFiles(Path dir) throws IOException {
    if (!Files.isDirectory(dir)) {
      return List.of();
    }
    try (Stream<Path> s = Files.list(dir)) {
      return s.filter(p -> p.getFileName().toString().endsWith(".txt")).sorted().toList();
    }
  }
}
