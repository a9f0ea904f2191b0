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
// 1); 0, 0 restores tiledFor's choice. ForceWideStage pins the stage k of
// BN 128 without a cluster: 64 (linear_f16_tiled<128, 64>) or 128
// (linear_f16_tiled<128, 128>, tiledFor's choice); 0 restores it.
func (l *Linear) ForceWide(bn, split int) { l.forceBN, l.forceSplit = bn, split }

// ForceWideStage: see ForceWide.
func (l *Linear) ForceWideStage(ks int) { l.forceStageK = ks }

// ForceWideDeep pins the deep-ring variant (on > 0: BN 64 in clusters of
// 2, whatever ForceWide says) or keeps it off (on < 0); 0 leaves it to
// tiledFor.
func (l *Linear) ForceWideDeep(on int) { l.forceDeep = on }

// HasWideDeep reports whether the deep-ring variant was loaded and fits
// the device's shared memory a block.
func (l *Linear) HasWideDeep() bool { return l.hasDeep }

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

// WideChoice is tiledFor's (token tile, cluster size, stage k, deep-ring
// variant) for T rows and `tiles` m-tiles.
func (l *Linear) WideChoice(T, tiles int) (bn, split, ks int, deep bool) {
	bi, si, ks, deep := l.tiledFor(T, tiles)
	return linearTiledBNs[bi], linearWideSplits[si], ks, deep
}

// NewWideRuleLinear returns a Linear with no kernels whose tiled wide
// kernels fit perSM[bi][si] CTAs an SM on sms SMs (bi: token tile 64,
// 128; si: cluster size 1, 2, 4, 8), with clustered kernels where clusters
// is set (and then the deep-ring variants, one CTA an SM): for tiledFor's
// rule without a GPU.
func NewWideRuleLinear(sms int, perSM [2][4]int, clusters bool) *Linear {
	l := &Linear{clusters: clusters, hasDeep: clusters}
	l.deepResident = sms
	for bi := range perSM {
		for si, n := range perSM[bi] {
			l.tiledPerSM[bi][si] = n
			l.tiledResident[bi][si] = n * sms
		}
	}
	return l
}
