// Package testpb holds the Protobuf messages of the tests of package serde/protobuf,
// generated from proto/ by protoc and protoc-gen-go.
package testpb

//go:generate protoc --proto_path=proto --go_out=. --go_opt=module=github.com/kstream-go/kstream/serde/protobuf/internal/testpb common/address.proto order.proto bench.proto legacy.proto interop.proto
