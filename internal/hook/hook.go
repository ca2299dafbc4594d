// Package hook lets packages of this module that sit beside the root (the test driver)
// reach the root's compiled topology without exporting runtime types. The root package sets
// the hooks in its init.
package hook

import "github.com/kstream-go/kstream/internal/runtime"

// Compile builds a *kstream.Builder (passed as b) into the runtime's view, as kstream.New
// would for the kstream.Config passed as cfg, wiring the config's error handlers.
var Compile func(b, cfg any) (*runtime.Topology, runtime.Config, error)
