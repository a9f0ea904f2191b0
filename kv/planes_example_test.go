package kv_test

import (
	"fmt"

	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/kv"
)

// A value read at each tier: 16 bits are exact, 8 bits keep the exponent
// and two mantissa bits, 4 bits only the sign and three exponent bits (-3.3
// lies in [2, 32) as far as a 4-bit read knows; the fill 0x800 gives the
// geometric middle, 8).
func ExampleRecon_Read() {
	sp := kv.MustParseSpec("bw:a8=0x80:a4=0x800")
	r := sp.Planes.Recon(kv.FP16)
	h := half.FromFloat32(-3.3)
	for _, t := range []kv.Tier{kv.High, kv.Medium, kv.Low} {
		x := r.Read(h, t)
		fmt.Printf("%-6v %#04x %g\n", t, x, half.ToFloat32(x))
	}
	// Output:
	// high   0xc29a -3.3007812
	// medium 0xc280 -3.25
	// low    0xc800 -8
}
