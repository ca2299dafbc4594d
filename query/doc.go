// Package query serves the state stores of a kstream application over HTTP, and reads them
// back with a typed Go client: the "remote stores" that Kafka Streams leaves to each of its
// users (its interactive-query guide's RPC layer and key discovery).
//
// It owns the HTTP API of interactive queries: a [Server] that every instance of an
// application mounts on its own mux or runs on its Config.ApplicationServer, which answers a
// query for any key by reading the local store or forwarding the request, once, to the
// instance running the key's partition; range, prefix and full scans fan out to every
// instance and come back merged in key order, page by page; and a [Client] with
// [StoreOf] for typed reads. Local reads go through [kstream.App.RawStore]; key discovery
// through [kstream.App.KeyMetadata] and [kstream.App.Metadata].
//
// The endpoints are described in openapi.json (served at GET /v1/openapi.json) and in
// docs/queries.md.
package query
