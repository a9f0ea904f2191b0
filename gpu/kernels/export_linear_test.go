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
