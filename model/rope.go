package model

import "math"

// InvFreq returns the D/2 RoPE inverse frequencies of the config, scaling
// included, computed as transformers computes them in float32:
//
//	inv_freq[i] = 1 / theta^(float32(2i)/D)
//
// then, for "linear" scaling, inv_freq / factor, and for "llama3" scaling
// (Llama 3.1/3.2), with wavelength λ = 2π / inv_freq and the original context
// Lo = original_max_position_embeddings:
//
//	λ < Lo/high_freq_factor:  inv_freq                   (high frequencies kept)
//	λ > Lo/low_freq_factor:   inv_freq / factor          (low frequencies scaled)
//	otherwise:                (1-s)·inv_freq/factor + s·inv_freq,
//	                          s = (Lo/λ - low_freq_factor) / (high_freq_factor - low_freq_factor)
//
// Each step is rounded to float32 as transformers' float32 tensors are, so
// the angles pos·inv_freq match its to within an ulp.
func (c *Config) InvFreq() []float32 {
	D := c.HeadDim
	inv := make([]float32, D/2)
	for i := range inv {
		exp := float32(2*i) / float32(D)
		inv[i] = 1 / float32(math.Pow(c.RopeTheta, float64(exp)))
	}
	s := c.RopeScaling
	if s == nil {
		return inv
	}
	switch s.Type {
	case "linear":
		for i := range inv {
			inv[i] = float32(float64(inv[i]) / s.Factor)
		}
	case "llama3":
		lo := float64(s.OriginalMaxPositions)
		lowWavelen := lo / s.LowFreqFactor
		highWavelen := lo / s.HighFreqFactor
		for i, f := range inv {
			wavelen := float64(float32(2 * math.Pi / float64(f)))
			switch {
			case wavelen < highWavelen:
				// high frequency: unchanged
			case wavelen > lowWavelen:
				inv[i] = float32(float64(f) / s.Factor)
			default:
				smooth := (lo/wavelen - s.LowFreqFactor) / (s.HighFreqFactor - s.LowFreqFactor)
				inv[i] = float32((1-smooth)*float64(f)/s.Factor + smooth*float64(f))
			}
		}
	}
	return inv
}
