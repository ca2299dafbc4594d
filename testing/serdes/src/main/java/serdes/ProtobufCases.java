package serdes;

import com.google.protobuf.ByteString;
import com.google.protobuf.DescriptorProtos.DescriptorProto;
import com.google.protobuf.DescriptorProtos.EnumDescriptorProto;
import com.google.protobuf.DescriptorProtos.EnumValueDescriptorProto;
import com.google.protobuf.DescriptorProtos.FieldDescriptorProto;
import com.google.protobuf.DescriptorProtos.FieldDescriptorProto.Label;
import com.google.protobuf.DescriptorProtos.FieldDescriptorProto.Type;
import com.google.protobuf.DescriptorProtos.FileDescriptorProto;
import com.google.protobuf.DescriptorProtos.MessageOptions;
import com.google.protobuf.DescriptorProtos.OneofDescriptorProto;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.FileDescriptor;
import com.google.protobuf.DynamicMessage;
import com.google.protobuf.TextFormat;
import com.google.protobuf.Timestamp;
import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * The Protobuf cases: DynamicMessages of a descriptor built here, field by field, the same as
 * protoc builds from serde/protobuf/internal/testpb/proto/interop.proto (no protoc needed),
 * encoded by protobuf-java and framed as Confluent's KafkaProtobufSerializer frames them: the
 * message indexes (the path of the message type among the nested message types of its
 * file, map entry types included) as a zig-zag varint count and indexes, or the single byte
 * 0 for [0].
 */
final class ProtobufCases {
  private ProtobufCases() {}

  /** The schema registered for every case: the .proto source of interop.proto. */
  static final String SCHEMA = """
      syntax = "proto3";
      package kstream.interop;
      import "google/protobuf/timestamp.proto";
      option go_package = "github.com/kstream-go/kstream/serde/protobuf/internal/testpb";

      message Plain {
        string id = 1;
        int32 count = 2;
        bool flag = 3;
      }

      message Shipment {
        string id = 1;
        repeated .kstream.interop.Shipment.Parcel parcels = 2;
        map<string, int64> counts = 3;
        .kstream.interop.Shipment.Stop next = 4;
        .kstream.interop.Shipment.Kind kind = 5;
        double weight = 6;
        float ratio = 7;
        int64 total = 8;
        int32 delta = 9;
        bytes raw = 10;
        optional string note = 11;
        .google.protobuf.Timestamp at = 12;
        oneof dest {
          string address = 13;
          uint64 locker = 14;
        }
        repeated int32 codes = 15;
        enum Kind {
          KIND_UNSPECIFIED = 0;
          KIND_EXPRESS = 1;
        }
        message Parcel {
          string sku = 1;
          sint64 grams = 2;
          .kstream.interop.Shipment.Parcel.Label label = 3;
          message Label {
            string text = 1;
          }
        }
        message Stop {
          string place = 1;
          fixed32 seq = 2;
        }
      }
      """;

  static final FileDescriptor FILE;

  static {
    String p = ".kstream.interop.";
    DescriptorProto plain = DescriptorProto.newBuilder().setName("Plain")
        .addField(field("id", 1, Type.TYPE_STRING))
        .addField(field("count", 2, Type.TYPE_INT32))
        .addField(field("flag", 3, Type.TYPE_BOOL))
        .build();
    DescriptorProto label = DescriptorProto.newBuilder().setName("Label")
        .addField(field("text", 1, Type.TYPE_STRING))
        .build();
    DescriptorProto parcel = DescriptorProto.newBuilder().setName("Parcel")
        .addField(field("sku", 1, Type.TYPE_STRING))
        .addField(field("grams", 2, Type.TYPE_SINT64))
        .addField(field("label", 3, Type.TYPE_MESSAGE).setTypeName(p + "Shipment.Parcel.Label"))
        .addNestedType(label)
        .build();
    // protoc adds a map field's entry type where the field is declared: after Parcel,
    // before Stop.
    DescriptorProto countsEntry = DescriptorProto.newBuilder().setName("CountsEntry")
        .addField(field("key", 1, Type.TYPE_STRING))
        .addField(field("value", 2, Type.TYPE_INT64))
        .setOptions(MessageOptions.newBuilder().setMapEntry(true))
        .build();
    DescriptorProto stop = DescriptorProto.newBuilder().setName("Stop")
        .addField(field("place", 1, Type.TYPE_STRING))
        .addField(field("seq", 2, Type.TYPE_FIXED32))
        .build();
    EnumDescriptorProto kind = EnumDescriptorProto.newBuilder().setName("Kind")
        .addValue(EnumValueDescriptorProto.newBuilder().setName("KIND_UNSPECIFIED").setNumber(0))
        .addValue(EnumValueDescriptorProto.newBuilder().setName("KIND_EXPRESS").setNumber(1))
        .build();
    DescriptorProto shipment = DescriptorProto.newBuilder().setName("Shipment")
        .addField(field("id", 1, Type.TYPE_STRING))
        .addField(field("parcels", 2, Type.TYPE_MESSAGE).setLabel(Label.LABEL_REPEATED).setTypeName(p + "Shipment.Parcel"))
        .addField(field("counts", 3, Type.TYPE_MESSAGE).setLabel(Label.LABEL_REPEATED).setTypeName(p + "Shipment.CountsEntry"))
        .addField(field("next", 4, Type.TYPE_MESSAGE).setTypeName(p + "Shipment.Stop"))
        .addField(field("kind", 5, Type.TYPE_ENUM).setTypeName(p + "Shipment.Kind"))
        .addField(field("weight", 6, Type.TYPE_DOUBLE))
        .addField(field("ratio", 7, Type.TYPE_FLOAT))
        .addField(field("total", 8, Type.TYPE_INT64))
        .addField(field("delta", 9, Type.TYPE_INT32))
        .addField(field("raw", 10, Type.TYPE_BYTES))
        .addField(field("note", 11, Type.TYPE_STRING).setProto3Optional(true).setOneofIndex(1))
        .addField(field("at", 12, Type.TYPE_MESSAGE).setTypeName(".google.protobuf.Timestamp"))
        .addField(field("address", 13, Type.TYPE_STRING).setOneofIndex(0))
        .addField(field("locker", 14, Type.TYPE_UINT64).setOneofIndex(0))
        .addField(field("codes", 15, Type.TYPE_INT32).setLabel(Label.LABEL_REPEATED))
        .addNestedType(parcel)
        .addNestedType(countsEntry)
        .addNestedType(stop)
        .addEnumType(kind)
        .addOneofDecl(OneofDescriptorProto.newBuilder().setName("dest"))
        .addOneofDecl(OneofDescriptorProto.newBuilder().setName("_note"))
        .build();
    FileDescriptorProto file = FileDescriptorProto.newBuilder()
        .setName("interop.proto")
        .setPackage("kstream.interop")
        .setSyntax("proto3")
        .addDependency("google/protobuf/timestamp.proto")
        .addMessageType(plain)
        .addMessageType(shipment)
        .build();
    try {
      FILE = FileDescriptor.buildFrom(file, new FileDescriptor[] {Timestamp.getDescriptor().getFile()});
    } catch (Exception e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  private static FieldDescriptorProto.Builder field(String name, int number, Type type) {
    return FieldDescriptorProto.newBuilder().setName(name).setNumber(number).setType(type).setLabel(Label.LABEL_OPTIONAL);
  }

  static Descriptor type(String path) {
    String[] parts = path.split("\\.");
    Descriptor d = FILE.findMessageTypeByName(parts[0]);
    for (int i = 1; i < parts.length; i++) {
      d = d.findNestedTypeByName(parts[i]);
    }
    return d;
  }

  static DynamicMessage.Builder msg(String path) {
    return DynamicMessage.newBuilder(type(path));
  }

  static DynamicMessage.Builder set(DynamicMessage.Builder b, String field, Object v) {
    return b.setField(b.getDescriptorForType().findFieldByName(field), v);
  }

  static DynamicMessage.Builder add(DynamicMessage.Builder b, String field, Object v) {
    return b.addRepeatedField(b.getDescriptorForType().findFieldByName(field), v);
  }

  static List<Case> cases(int firstID) {
    List<Case> cs = new ArrayList<>();
    int id = firstID;

    DynamicMessage.Builder plain = msg("Plain");
    set(plain, "id", "p-1");
    set(plain, "count", -3);
    set(plain, "flag", true);
    cs.add(new ProtobufCase("plain", id++, plain.build()));
    cs.add(new ProtobufCase("plain-empty", id++, msg("Plain").build()));

    DynamicMessage.Builder label = set(msg("Shipment.Parcel.Label"), "text", "this side up");
    DynamicMessage.Builder parcel = msg("Shipment.Parcel");
    set(parcel, "sku", "sku-9");
    set(parcel, "grams", -250L);
    set(parcel, "label", label.build());
    DynamicMessage.Builder stop = msg("Shipment.Stop");
    set(stop, "place", "Depot 4");
    set(stop, "seq", 7);

    DynamicMessage.Builder s = msg("Shipment");
    set(s, "id", "s-1");
    add(s, "parcels", parcel.build());
    add(s, "parcels", set(msg("Shipment.Parcel"), "sku", "sku-10").build());
    // Two entries, in key order: Go's deterministic marshaling sorts map keys, Java keeps
    // the order the entries were added in.
    add(s, "counts", set(set(msg("Shipment.CountsEntry"), "key", "a"), "value", 1L).build());
    add(s, "counts", set(set(msg("Shipment.CountsEntry"), "key", "b"), "value", -2L).build());
    set(s, "next", stop.build());
    set(s, "kind", type("Shipment").findEnumTypeByName("Kind").findValueByName("KIND_EXPRESS"));
    set(s, "weight", 12.75);
    set(s, "ratio", 0.25f);
    set(s, "total", -9000000000L);
    set(s, "delta", -1);
    set(s, "raw", ByteString.copyFrom(new byte[] {0, (byte) 0xff}));
    set(s, "note", ""); // proto3 optional: present though empty
    DynamicMessage.Builder at = DynamicMessage.newBuilder(Timestamp.getDescriptor());
    set(at, "seconds", 1714979289L);
    set(at, "nanos", 123000000);
    set(s, "at", at.build());
    add(s, "codes", 1);
    add(s, "codes", -1);
    add(s, "codes", 300);
    cs.add(new ProtobufCase("shipment", id++, s.build()));
    // A oneof field, and a field with a higher number after it.
    DynamicMessage.Builder oneof = set(msg("Shipment"), "id", "s-2");
    set(oneof, "locker", 42L);
    add(oneof, "codes", 5);
    cs.add(new ProtobufCase("shipment-oneof", id++, oneof.build()).differs(
        "protobuf-go writes a set oneof field after all the other fields (\"to preserve compatibility with historic"
            + " wire output\"), protobuf-java in field number order; both parse either (Protobuf allows any order)"));
    // A oneof field that is the last field set: the same bytes.
    DynamicMessage.Builder last = set(msg("Shipment"), "id", "s-3");
    set(last, "address", "Main St 1");
    cs.add(new ProtobufCase("shipment-oneof-last", id++, last.build()));
    cs.add(new ProtobufCase("parcel", id++, parcel.build()));
    cs.add(new ProtobufCase("label", id++, label.build()));
    cs.add(new ProtobufCase("stop", id++, stop.build()));
    return cs;
  }

  static final class ProtobufCase extends Case {
    final DynamicMessage value;
    final List<Integer> indexes = new ArrayList<>();

    ProtobufCase(String name, int id, DynamicMessage value) {
      super("protobuf", name, id);
      this.value = value;
      for (Descriptor d = value.getDescriptorForType(); d != null; d = d.getContainingType()) {
        indexes.add(0, d.getIndex());
      }
    }

    @Override
    String schema() {
      return SCHEMA;
    }

    @Override
    String text() {
      return render(value);
    }

    /** TextFormat on one line; a message with no field set is "(no fields set)". */
    static String render(DynamicMessage m) {
      String s = TextFormat.printer().emittingSingleLine(true).printToString(m).trim();
      return s.isEmpty() ? "(no fields set)" : s;
    }

    byte[] indexBytes() {
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      if (indexes.equals(List.of(0))) {
        out.write(0);
      } else {
        zigzag(out, indexes.size());
        for (int i : indexes) {
          zigzag(out, i);
        }
      }
      return out.toByteArray();
    }

    static void zigzag(ByteArrayOutputStream out, long v) {
      long z = (v << 1) ^ (v >> 63);
      while ((z & ~0x7fL) != 0) {
        out.write((int) ((z & 0x7f) | 0x80));
        z >>>= 7;
      }
      out.write((int) z);
    }

    @Override
    byte[] encode() throws Exception {
      ByteArrayOutputStream out = header(id);
      out.write(indexBytes());
      out.write(value.toByteArray());
      return out.toByteArray();
    }

    @Override
    String decode(byte[] framed) throws Exception {
      byte[] p = payload(framed);
      byte[] idx = indexBytes();
      if (p.length < idx.length || !Arrays.equals(Arrays.copyOf(p, idx.length), idx)) {
        throw new IllegalArgumentException("message indexes are not " + indexes + " (" + hex(idx) + ")");
      }
      DynamicMessage v = DynamicMessage.parseFrom(value.getDescriptorForType(), Arrays.copyOfRange(p, idx.length, p.length));
      if (!v.getUnknownFields().asMap().isEmpty()) {
        throw new IllegalArgumentException("unknown fields " + v.getUnknownFields());
      }
      if (!v.equals(value)) {
        throw new IllegalArgumentException("decodes to " + render(v));
      }
      if (!Arrays.equals(v.toByteArray(), value.toByteArray())) {
        throw new IllegalArgumentException("Java encodes the decoded value as " + hex(v.toByteArray()));
      }
      return render(v);
    }
  }
}
