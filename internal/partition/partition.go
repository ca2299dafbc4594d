// Package partition computes the partition of a keyed record as Kafka's Java producer
// does: the murmur2 hash of the serialized key, made positive, modulo the partition count.
package partition

// ForKey returns the partition the Java producer's default partitioner (and franz-go's
// sticky key partitioner) chooses for a record with the serialized key, among n partitions.
func ForKey(key []byte, n int32) int32 {
	return (int32(Murmur2(key)) & 0x7fffffff) % n
}

// Murmur2 is the hash of Kafka's Java client (Utils.murmur2).
func Murmur2(data []byte) uint32 {
	const m, r, seed = uint32(0x5bd1e995), 24, uint32(0x9747b28c)
	n := len(data)
	h := seed ^ uint32(n)
	for i := 0; i+4 <= n; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := n &^ 3
	switch n % 4 {
	case 3:
		h ^= uint32(data[tail+2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[tail+1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[tail])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}
