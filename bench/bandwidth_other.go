//go:build !amd64 || purego

package bench

// readSum reads every word of s with the pure-Go loop.
func readSum(s []uint64) uint64 { return readSumGo(s) }
