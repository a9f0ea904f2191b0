package gpu

// GEMMQRoutes is gemmqRoutes for the package's external tests: whether
// Linear gives T rows of x over a tiled int-bits [N, K] weight to gemmq.cu.
var GEMMQRoutes = gemmqRoutes

// SetMoEGroupRows sets b's Options.MoEGroupRows (MixExperts's grouped
// path from n tokens; negative: never) for a test, returning the old value.
func SetMoEGroupRows(b *Backend, n int) int {
	old := b.opts.MoEGroupRows
	b.opts.MoEGroupRows = n
	return old
}

// SetMoEGroupLDM makes b's grouped MoE GEMMs load their fragments with
// ldmatrix (on, the default) or 32-bit loads, returning the old setting.
func SetMoEGroupLDM(b *Backend, on bool) bool {
	old := !b.moeNoLDM
	b.moeNoLDM = !on
	return old
}

// SetMoEGroupTile fixes b's grouped MoE GEMMs' tile rows (64, 32 or 16; 0:
// chosen from the sizes), returning the old setting.
func SetMoEGroupTile(b *Backend, rows int) int {
	old := b.moeTile
	b.moeTile = rows
	return old
}

// Q6DEC reports whether w is a q6 weight (the tiled layout, DEC inside
// v6.1 at one row: decWeight.q6) and whether it lies in a joined group
// with a joined DEC residual (joinTiled).
func Q6DEC(w any) (q6, joint bool) {
	cw, ok := w.(*weight)
	if !ok || cw.dec == nil {
		return false, false
	}
	return cw.dec.q6, cw.block != nil && cw.block.dec != nil
}
