// Package registry owns what the Confluent Schema Registry serdes of kstream share: the
// connection to the registry ([Config], [Client]), the subject name strategies
// ([SubjectNameStrategy]), how a serde picks the schema it writes with ([Options]), the
// Confluent wire format's header ([AppendHeader], [SplitHeader]) and the errors the serdes
// return ([Error] and the sentinels below).
//
// The serdes themselves live in packages serde/avro, serde/protobuf and serde/jsonschema.
// They are built on franz-go's pkg/sr (the registry's REST client and the wire framing);
// this package adds the caching, the retries and the errors that a stream processor needs.
//
// # One client per process
//
// A [Client] caches every schema it fetches by id, every subject version, every
// registration and lookup, for the life of the process: create one per process (per
// registry) and give it to every serde, and each schema id costs one registry request.
//
// # Weather and bad input
//
// A registry that cannot be reached, or that answers 5xx (or 408, 429), is weather: the
// client retries the request with capped exponential backoff, logging each failure at warn,
// for as long as [Retry.For] allows (by default until it succeeds or the client is closed).
// Only then does the caller see an error, and that error wraps [ErrRegistryUnavailable].
// Every other error is about the record or the configuration, and wraps one of the other
// sentinels: a payload without the magic byte ([ErrNoMagicByte]), an unknown schema id
// ([ErrUnknownSchemaID]), bytes that do not decode ([ErrCorrupt]), a value that the schema
// cannot encode ([ErrInvalidValue]), a schema the registry refuses as incompatible
// ([ErrIncompatible]). The serdes wrap those in an [*Error] that names the schema id and
// the subject.
package registry
