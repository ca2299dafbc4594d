// Package hook lets packages of this module that sit beside the root (the test driver)
// reach the root's compiled topology without exporting runtime types. The root package sets
// the hooks in its init.
package hook

import "github.com/kstream-go/kstream/internal/runtime"

// Compile builds a *kstream.Builder (passed as b) into the runtime's view, as kstream.New
// would for the kstream.Config passed as cfg, wiring the config's error handlers.
var Compile func(b, cfg any) (*runtime.Topology, runtime.Config, error)

// HoldBack, HoldBackPartition and Release reach the test driver's way of delaying records
// (a *kstreamtest.Driver passed as d), which the module's own tests use to deliver records
// out of order, as a broker may under load; it is not part of the driver's API. Package
// kstreamtest sets them in its init.
var (
	HoldBack          func(d any, topic string)
	HoldBackPartition func(d any, topic string, partitions ...int32)
	Release           func(d any, topic string) error
)
