package kernels

// LimitResident makes l's Persistent launches use at most n CTAs in all
// (a grid smaller than the tile count of a test's small shapes, so that
// every CTA takes several tiles in turn); n <= 0 restores the GPU's counts.
func (l *Linear) LimitResident(n int) {
	if l.saved == nil {
		l.saved = &linearResident{l.resident, l.pairResident}
	}
	if n <= 0 {
		l.resident, l.pairResident = l.saved.resident, l.saved.pairResident
		return
	}
	for i := range l.resident {
		l.resident[i] = n
		for m := range l.pairResident[i] {
			l.pairResident[i][m] = n
		}
	}
}

// ForceWide pins the tiled wide kernel's token tile bn (64 or 128) and
// cluster size split (1, 2, 4 or 8; the device must have clusters above
// 1); 0, 0 restores tiledFor's choice. ForceWideStage(128) runs BN 128
// without a cluster in 128-k stages (linear_f16_tiled<128, 128>), 0 the
// default 64.
func (l *Linear) ForceWide(bn, split int) { l.forceBN, l.forceSplit = bn, split }

// ForceWideStage: see ForceWide.
func (l *Linear) ForceWideStage(ks int) { l.forceStageK = ks }

// HasWideSplit reports whether the tiled wide kernel at cluster size split
// was loaded (1 always; 2-8 where the device has clusters).
func (l *Linear) HasWideSplit(split int) bool {
	for si, S := range linearWideSplits {
		if S == split {
			return l.tiled[0][si].Name() != ""
		}
	}
	return false
}

// WideChoice is tiledFor's (token tile, cluster size) for T rows and
// `tiles` m-tiles.
func (l *Linear) WideChoice(T, tiles int) (bn, split int) {
	bi, si := l.tiledFor(T, tiles)
	return linearTiledBNs[bi], linearWideSplits[si]
}
