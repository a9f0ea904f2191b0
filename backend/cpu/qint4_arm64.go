//go:build !purego

package cpu

import "unsafe"

// int4SDOT_1x1 is the int4 integer path's tile with SDOT (qint4_arm64.s):
// one token against one row, dotInt4Generic's bits.
//
//go:noescape
func int4SDOT_1x1(xq *int8, sx *float32, xsum *float32, w unsafe.Pointer, ws uintptr, rowBytes int, dst *float32, pz *float32, ps uintptr)
