// Package orderpb holds the Protobuf message of the bench's Schema Registry serde
// scenarios, generated from proto/ by protoc and protoc-gen-go.
package orderpb

//go:generate protoc --proto_path=proto --go_out=. --go_opt=module=github.com/kstream-go/kstream/bench/internal/orderpb order.proto
