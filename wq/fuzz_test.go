package wq

import (
	"encoding/binary"
	"testing"
)

// FuzzPackRoundTrip stores codes taken from the fuzz input at every channel
// of a matrix (in a shuffled order, so neighbours are overwritten after they
// are set) and checks each reads back unchanged, by Raw and by the decoder
// written from the package doc, and that neighbours were not disturbed.
func FuzzPackRoundTrip(f *testing.F) {
	f.Add(uint8(2), uint8(1), []byte{1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add(uint8(3), uint8(3), []byte{0xff, 0, 0xff, 0x80})
	f.Fuzz(func(t *testing.T, elem, blocks uint8, data []byte) {
		e := Elem(elem%4 + 1)
		N, K := 2, 32*(int(blocks%4)+1)
		m, err := NewMatrix(e, 32, N, K)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) == 0 {
			data = []byte{0}
		}
		mask := uint32(1)<<e.Bits() - 1
		want := make([]uint32, N*K)
		for i := range want {
			b := [4]byte{data[i%len(data)], data[(i+1)%len(data)], byte(i), byte(i >> 8)}
			want[i] = binary.LittleEndian.Uint32(b[:]) & mask
		}
		// Visit channels with a stride coprime to N·K.
		total := N * K
		for j := range total {
			i := (j*7 + 3) % total
			m.setRaw(i/K, i%K, want[i])
		}
		for i, w := range want {
			n, k := i/K, i%K
			if got := m.Raw(n, k); got != w || refRaw(m, n, k) != w {
				t.Fatalf("%v (%d,%d): Raw %d, doc decode %d, want %d", e, n, k, got, refRaw(m, n, k), w)
			}
		}
		if err := m.Validate(); err != nil {
			t.Fatal(err)
		}
		m.Words = m.Words[:len(m.Words)-1]
		if m.Validate() == nil {
			t.Fatal("Validate accepted a truncated matrix")
		}
	})
}
