package model

import "math"

// InvFreq returns the D/2 RoPE inverse frequencies of the config, scaling
// included, computed as transformers computes them in float32:
//
//	inv_freq[i] = 1 / theta^(float32(2i)/R)
//
// for i < R/2, R = RotaryDims() (D but for partial rotary embeddings),
// and exactly 0 for R/2 <= i < D/2: the pass-through dimensions, which the
// loader lays out on those pairs (RotaryDims), rotate by angle 0,
// cos 1 and sin 0, that is not at all.
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
//
// For "longrope" (Phi-3 128k, Phi-3.5) it returns the frequencies of
// sequences up to the original context: InvFreqLong's with ShortFactor.
func (c *Config) InvFreq() []float32 {
	if s := c.RopeScaling; s != nil && s.Type == "longrope" {
		return c.longropeInvFreq(s.ShortFactor)
	}
	inv := c.baseInvFreq()
	s := c.RopeScaling
	if s == nil {
		return inv
	}
	switch s.Type {
	case "linear":
		for i := range inv[:c.RotaryDims()/2] {
			inv[i] = float32(float64(inv[i]) / s.Factor)
		}
	case "llama3":
		lo := float64(s.OriginalMaxPositions)
		lowWavelen := lo / s.LowFreqFactor
		highWavelen := lo / s.HighFreqFactor
		for i, f := range inv[:c.RotaryDims()/2] {
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

// baseInvFreq returns the unscaled inverse frequencies 1/theta^(2i/R) in
// float32 as transformers computes them, 0 past R/2 (InvFreq).
func (c *Config) baseInvFreq() []float32 {
	R := c.RotaryDims()
	inv := make([]float32, c.HeadDim/2)
	for i := range inv[:R/2] {
		exp := float32(2*i) / float32(R)
		inv[i] = 1 / float32(math.Pow(c.RopeTheta, float64(exp)))
	}
	return inv
}

// InvFreqLong returns a "longrope" config's inverse frequencies of
// sequences longer than its OriginalMaxPositions (LongFactor's), nil for
// other configs. transformers picks them for a forward pass whose largest
// position is at least OriginalMaxPositions, InvFreq's otherwise; each is
//
//	inv_freq[i] = 1 / (factor[i]·theta^(float32(2i)/R))
//
// in float32 for i < R/2 (factor has R/2 entries), 0 past (InvFreq).
func (c *Config) InvFreqLong() []float32 {
	s := c.RopeScaling
	if s == nil || s.Type != "longrope" {
		return nil
	}
	return c.longropeInvFreq(s.LongFactor)
}

// longropeInvFreq is longrope's inverse frequencies with divisors ext.
func (c *Config) longropeInvFreq(ext []float64) []float32 {
	R := c.RotaryDims()
	inv := make([]float32, c.HeadDim/2)
	for i := range inv[:R/2] {
		// theta^(2i/R) in float32, as transformers' base**inv_freq_shape.
		pow := float32(math.Pow(c.RopeTheta, float64(float32(2*i)/float32(R))))
		inv[i] = 1 / (float32(ext[i]) * pow)
	}
	return inv
}

// LocalInvFreq returns the sliding layers' inverse frequencies of a config
// with a LocalRopeTheta (Gemma 3): InvFreq's unscaled ones with that base.
func (c *Config) LocalInvFreq() []float32 {
	local := *c
	local.RopeTheta, local.RopeScaling = c.LocalRopeTheta, nil
	return local.baseInvFreq()
}
