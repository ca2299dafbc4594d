package serdes;

import java.io.ByteArrayOutputStream;
import java.util.Arrays;

/**
 * One interop case: a value, the schema it is written with, its schema id, and how Java
 * encodes and decodes it in the Confluent wire format (magic byte 0, 4-byte big-endian
 * schema id, then the format's payload).
 */
abstract class Case {
  final String format; // avro, protobuf, jsonschema: the goldens' subdirectory
  final String name;
  final int id;
  /**
   * Non-null for a documented difference: Go's serde writes other bytes than Java for this
   * value (both sides still read each other's). The reason is written into the golden as
   * its "note" and listed in serde/testdata/interop/README.md.
   */
  String knownDifference;

  Case(String format, String name, int id) {
    this.format = format;
    this.name = name;
    this.id = id;
  }

  Case differs(String why) {
    this.knownDifference = why;
    return this;
  }

  /** The writer schema, as registered. */
  abstract String schema();

  /** The expected value in its canonical text form. */
  abstract String text();

  /** Java's framed encoding of the expected value. */
  abstract byte[] encode() throws Exception;

  /**
   * Decodes framed, which must be a framed payload of this case's id (and, for Protobuf, its
   * message indexes), and returns the decoded value's canonical text, after checking that
   * Java re-encodes the decoded value to the same payload as the expected value.
   */
  abstract String decode(byte[] framed) throws Exception;

  static ByteArrayOutputStream header(int id) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    out.write(0);
    out.write(id >>> 24);
    out.write(id >>> 16);
    out.write(id >>> 8);
    out.write(id);
    return out;
  }

  /** Returns the payload of framed after its 5-byte header, checking the magic byte and id. */
  byte[] payload(byte[] framed) {
    if (framed.length < 5 || framed[0] != 0) {
      throw new IllegalArgumentException("no magic byte 0 and 4-byte schema id");
    }
    int got = ((framed[1] & 0xff) << 24) | ((framed[2] & 0xff) << 16) | ((framed[3] & 0xff) << 8) | (framed[4] & 0xff);
    if (got != id) {
      throw new IllegalArgumentException("header names schema id " + got + ", want " + id);
    }
    return Arrays.copyOfRange(framed, 5, framed.length);
  }

  String path() {
    return format + "/" + name;
  }

  static String hex(byte[] b) {
    StringBuilder s = new StringBuilder(b.length * 2);
    for (byte x : b) {
      s.append(Character.forDigit((x >> 4) & 0xf, 16)).append(Character.forDigit(x & 0xf, 16));
    }
    return s.toString();
  }

  static byte[] unhex(String s) {
    if (s.length() % 2 != 0) {
      throw new IllegalArgumentException("odd number of hex digits");
    }
    byte[] b = new byte[s.length() / 2];
    for (int i = 0; i < b.length; i++) {
      int hi = Character.digit(s.charAt(2 * i), 16), lo = Character.digit(s.charAt(2 * i + 1), 16);
      if (hi < 0 || lo < 0) {
        throw new IllegalArgumentException("not hex: " + s.substring(2 * i, 2 * i + 2));
      }
      b[i] = (byte) (hi << 4 | lo);
    }
    return b;
  }

  /** A JSON string literal: quotes, backslashes and control characters escaped. */
  static String quote(String s) {
    StringBuilder b = new StringBuilder("\"");
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"' -> b.append("\\\"");
        case '\\' -> b.append("\\\\");
        case '\n' -> b.append("\\n");
        case '\t' -> b.append("\\t");
        default -> {
          if (c < 0x20) {
            b.append(String.format("\\u%04x", (int) c));
          } else {
            b.append(c);
          }
        }
      }
    }
    return b.append('"').toString();
  }
}
