package embedded

// OpenConns returns how many accepted client connections the broker has open, for
// tests.
func OpenConns(b *Broker) int {
	b.conns.mu.Lock()
	defer b.conns.mu.Unlock()
	return b.conns.open
}
