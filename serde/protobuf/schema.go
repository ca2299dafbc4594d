package protobuf

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
	// The options of a generated file's descriptor (file.Options() and the like) are
	// decoded into descriptorpb's types: without this import, reading them panics
	// ("Descriptor.Options called without importing the descriptor package") in a
	// program that links no other importer of descriptorpb.
	_ "google.golang.org/protobuf/types/descriptorpb"
)

// SchemaText returns the .proto source of file, the schema that the serdes register for a
// message of that file. Its messages, enums and fields are in the file's order (so the
// registry's message indexes are the descriptor's), types are fully qualified, and
// comments are gone. It fails for what it cannot print: editions, and proto2 groups.
//
// Options are printed when they are scalars or enums (go_package, java_package,
// deprecated, packed, custom scalar options...); message-valued options are left out, as
// they do not change the wire format.
func SchemaText(file protoreflect.FileDescriptor) (string, error) {
	p := &printer{}
	switch file.Syntax() {
	case protoreflect.Proto2:
		p.line(0, `syntax = "proto2";`)
	case protoreflect.Proto3:
		p.line(0, `syntax = "proto3";`)
	default:
		return "", fmt.Errorf("%s: %v is not supported, only proto2 and proto3", file.Path(), file.Syntax())
	}
	if file.Package() != "" {
		p.line(0, "package "+string(file.Package())+";")
	}
	imports := file.Imports()
	for i := range imports.Len() {
		imp := imports.Get(i)
		kw := ""
		switch {
		case imp.IsPublic:
			kw = "public "
		case imp.IsWeak:
			kw = "weak "
		}
		p.line(0, "import "+kw+quote(imp.Path())+";")
	}
	p.options(0, file.Options())
	enums, msgs := file.Enums(), file.Messages()
	for i := range enums.Len() {
		p.b.WriteByte('\n')
		p.enum(0, enums.Get(i))
	}
	for i := range msgs.Len() {
		p.b.WriteByte('\n')
		p.message(0, msgs.Get(i))
	}
	if file.Extensions().Len() > 0 {
		p.b.WriteByte('\n')
		p.extensions(0, file.Extensions())
	}
	if p.err != nil {
		return "", fmt.Errorf("%s: %w", file.Path(), p.err)
	}
	return p.b.String(), nil
}

type printer struct {
	b   strings.Builder
	err error
}

func (p *printer) line(depth int, s string) {
	for range depth {
		p.b.WriteString("  ")
	}
	p.b.WriteString(s)
	p.b.WriteByte('\n')
}

func (p *printer) message(depth int, m protoreflect.MessageDescriptor) {
	if m.IsMapEntry() {
		return // printed as a map<K, V> field
	}
	p.line(depth, "message "+string(m.Name())+" {")
	p.options(depth+1, m.Options())
	fields := m.Fields()
	printedOneofs := make(map[protoreflect.FullName]bool)
	for i := range fields.Len() {
		f := fields.Get(i)
		if o := f.ContainingOneof(); o != nil && !o.IsSynthetic() {
			if printedOneofs[o.FullName()] {
				continue
			}
			printedOneofs[o.FullName()] = true
			p.line(depth+1, "oneof "+string(o.Name())+" {")
			p.options(depth+2, o.Options())
			of := o.Fields()
			for j := range of.Len() {
				p.field(depth+2, of.Get(j), false)
			}
			p.line(depth+1, "}")
			continue
		}
		p.field(depth+1, f, true)
	}
	enums, msgs := m.Enums(), m.Messages()
	for i := range enums.Len() {
		p.enum(depth+1, enums.Get(i))
	}
	for i := range msgs.Len() {
		p.message(depth+1, msgs.Get(i))
	}
	p.extensions(depth+1, m.Extensions())
	if r := m.ExtensionRanges(); r.Len() > 0 {
		var parts []string
		for i := range r.Len() {
			rng := r.Get(i)
			parts = append(parts, rangeText(int64(rng[0]), int64(rng[1])-1, int64(protoreflect.FieldNumber(math.MaxInt32>>3))))
		}
		p.line(depth+1, "extensions "+strings.Join(parts, ", ")+";")
	}
	p.reserved(depth+1, m.ReservedRanges(), m.ReservedNames())
	p.line(depth, "}")
}

func (p *printer) reserved(depth int, ranges protoreflect.FieldRanges, names protoreflect.Names) {
	if ranges.Len() > 0 {
		var parts []string
		for i := range ranges.Len() {
			rng := ranges.Get(i)
			parts = append(parts, rangeText(int64(rng[0]), int64(rng[1])-1, int64(protoreflect.FieldNumber(math.MaxInt32>>3))))
		}
		p.line(depth, "reserved "+strings.Join(parts, ", ")+";")
	}
	p.reservedNames(depth, names)
}

func (p *printer) reservedNames(depth int, names protoreflect.Names) {
	if names.Len() > 0 {
		var parts []string
		for i := range names.Len() {
			parts = append(parts, quote(string(names.Get(i))))
		}
		p.line(depth, "reserved "+strings.Join(parts, ", ")+";")
	}
}

// rangeText prints an inclusive range.
func rangeText(start, end, maxValue int64) string {
	switch {
	case start == end:
		return strconv.FormatInt(start, 10)
	case end == maxValue:
		return strconv.FormatInt(start, 10) + " to max"
	}
	return strconv.FormatInt(start, 10) + " to " + strconv.FormatInt(end, 10)
}

func (p *printer) extensions(depth int, exts protoreflect.ExtensionDescriptors) {
	for i := 0; i < exts.Len(); {
		extendee := exts.Get(i).ContainingMessage().FullName()
		p.line(depth, "extend ."+string(extendee)+" {")
		for ; i < exts.Len() && exts.Get(i).ContainingMessage().FullName() == extendee; i++ {
			p.field(depth+1, exts.Get(i), true)
		}
		p.line(depth, "}")
	}
}

func (p *printer) field(depth int, f protoreflect.FieldDescriptor, withLabel bool) {
	if f.Kind() == protoreflect.GroupKind {
		p.fail(fmt.Errorf("field %s is a group, which is not supported", f.FullName()))
		return
	}
	var b strings.Builder
	switch {
	case f.IsMap():
		fmt.Fprintf(&b, "map<%s, %s> ", typeName(f.MapKey()), typeName(f.MapValue()))
	default:
		if withLabel {
			switch {
			case f.Cardinality() == protoreflect.Repeated:
				b.WriteString("repeated ")
			case f.Cardinality() == protoreflect.Required:
				b.WriteString("required ")
			case f.ParentFile().Syntax() == protoreflect.Proto2 || f.HasOptionalKeyword():
				b.WriteString("optional ")
			}
		}
		b.WriteString(typeName(f))
		b.WriteByte(' ')
	}
	fmt.Fprintf(&b, "%s = %d", f.Name(), f.Number())
	var opts []string
	if f.HasDefault() {
		opts = append(opts, "default = "+defaultText(f))
	}
	if f.JSONName() != jsonCamelCase(string(f.Name())) && !f.IsExtension() {
		opts = append(opts, "json_name = "+quote(f.JSONName()))
	}
	opts = append(opts, p.optionList(f.Options())...)
	if len(opts) > 0 {
		b.WriteString(" [" + strings.Join(opts, ", ") + "]")
	}
	b.WriteByte(';')
	p.line(depth, b.String())
}

func (p *printer) enum(depth int, e protoreflect.EnumDescriptor) {
	p.line(depth, "enum "+string(e.Name())+" {")
	p.options(depth+1, e.Options())
	values := e.Values()
	for i := range values.Len() {
		v := values.Get(i)
		s := fmt.Sprintf("%s = %d", v.Name(), v.Number())
		if opts := p.optionList(v.Options()); len(opts) > 0 {
			s += " [" + strings.Join(opts, ", ") + "]"
		}
		p.line(depth+1, s+";")
	}
	if r := e.ReservedRanges(); r.Len() > 0 {
		var parts []string
		for i := range r.Len() {
			rng := r.Get(i)
			parts = append(parts, rangeText(int64(rng[0]), int64(rng[1]), math.MaxInt32))
		}
		p.line(depth+1, "reserved "+strings.Join(parts, ", ")+";")
	}
	p.reservedNames(depth+1, e.ReservedNames())
	p.line(depth, "}")
}

func (p *printer) fail(err error) {
	if p.err == nil {
		p.err = err
	}
}

// options prints one "option name = value;" line per option set in opts.
func (p *printer) options(depth int, opts protoreflect.ProtoMessage) {
	for _, o := range p.optionList(opts) {
		p.line(depth, "option "+o+";")
	}
}

// optionList returns "name = value" for each scalar or enum option set in opts, by field
// number.
func (p *printer) optionList(opts protoreflect.ProtoMessage) []string {
	if opts == nil {
		return nil
	}
	m := opts.ProtoReflect()
	if !m.IsValid() {
		return nil
	}
	type opt struct {
		fd protoreflect.FieldDescriptor
		v  protoreflect.Value
	}
	var set []opt
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.IsList() || fd.IsMap() || fd.Message() != nil {
			return true // message-valued and repeated options: left out
		}
		if fd.ContainingMessage().FullName() == "google.protobuf.MessageOptions" && fd.Name() == "map_entry" {
			return true
		}
		set = append(set, opt{fd, v})
		return true
	})
	slices.SortFunc(set, func(a, b opt) int { return cmp.Compare(a.fd.Number(), b.fd.Number()) })
	out := make([]string, 0, len(set))
	for _, o := range set {
		name := string(o.fd.Name())
		if o.fd.IsExtension() {
			name = "(" + string(o.fd.FullName()) + ")"
		}
		out = append(out, name+" = "+valueText(o.fd, o.v))
	}
	return out
}

func typeName(f protoreflect.FieldDescriptor) string {
	switch f.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return "." + string(f.Message().FullName())
	case protoreflect.EnumKind:
		return "." + string(f.Enum().FullName())
	}
	return f.Kind().String() // "int32", "sint64", "bytes"...
}

func defaultText(f protoreflect.FieldDescriptor) string {
	if f.Kind() == protoreflect.EnumKind {
		return string(f.DefaultEnumValue().Name())
	}
	return valueText(f, f.Default())
}

func valueText(f protoreflect.FieldDescriptor, v protoreflect.Value) string {
	switch f.Kind() {
	case protoreflect.EnumKind:
		if ev := f.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name())
		}
		return strconv.Itoa(int(v.Enum()))
	case protoreflect.StringKind:
		return quote(v.String())
	case protoreflect.BytesKind:
		return quote(string(v.Bytes()))
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		x := v.Float()
		switch {
		case math.IsInf(x, 1):
			return "inf"
		case math.IsInf(x, -1):
			return "-inf"
		case math.IsNaN(x):
			return "nan"
		}
		bits := 64
		if f.Kind() == protoreflect.FloatKind {
			bits = 32
		}
		return strconv.FormatFloat(x, 'g', -1, bits)
	}
	return v.String() // bools and integers
}

// quote returns s as a .proto string literal, escaping every byte that is not printable
// ASCII.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if c < 0x20 || c > 0x7e {
				fmt.Fprintf(&b, `\%03o`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// jsonCamelCase is protoc's default json_name of a field: underscores dropped, the letter
// after each capitalized.
func jsonCamelCase(s string) string {
	var b strings.Builder
	upper := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_':
			upper = true
		case upper && 'a' <= c && c <= 'z':
			b.WriteByte(c - 'a' + 'A')
			upper = false
		default:
			b.WriteByte(c)
			upper = false
		}
	}
	return b.String()
}
