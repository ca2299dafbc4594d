package store

// Backend returns the backend that s reads and writes, for operators that keep bytes and
// need no serde (the foreign-key join's subscription store). Writes through it are not
// typed: they must use s's encoding.
func (s *KeyValueStore[K, V]) Backend() Backend { return s.b }
