package store

// Wrapper is implemented by a Backend that wraps another one and adds no state of its own
// (the runtime's metered backend, which counts operations for Config.Metrics). Stores that
// look for particular backends under theirs (a Buffer and its discards) look through it.
type Wrapper interface {
	// Unwrap returns the wrapped backend.
	Unwrap() Backend
}

// unwrap returns the innermost backend under b's wrappers.
func unwrap(b Backend) Backend {
	for {
		w, ok := b.(Wrapper)
		if !ok {
			return b
		}
		b = w.Unwrap()
	}
}
