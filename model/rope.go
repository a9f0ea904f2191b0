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
// For "yarn", yarnInvFreq's.
func (c *Config) InvFreq() []float32 {
	if s := c.RopeScaling; s != nil && s.Type == "longrope" {
		return c.longropeInvFreq(s.ShortFactor)
	}
	if s := c.RopeScaling; s != nil && s.Type == "yarn" {
		return c.yarnInvFreq(s)
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

// yarnInvFreq returns YaRN's inverse frequencies as transformers'
// _compute_yarn_parameters computes them in float32, with R the rotary
// dimensions, θ the base, s the factor and Lo the original context:
//
//	p[i]     = θ^(float32(2i)/R)                 (pos_freqs)
//	ramp[i]  = clamp((i − lo) / (hi − lo), 0, 1)
//	inv[i]   = 1/(s·p[i])·ramp[i] + 1/p[i]·(1 − ramp[i])
//
// where lo and hi are the dimensions at which a frequency turns BetaFast
// and BetaSlow times over Lo positions, d(n) = R·ln(Lo/(2πn)) / (2 ln θ),
// rounded down and up (unless NoTruncate), clamped to [0, R−1] (hi + 0.001
// where they meet): the fast dimensions keep their frequencies, the slow
// ones are interpolated by s. 0 past R/2 (InvFreq). The attention factor
// (RopeScaling.AttentionFactor) is applied by the model, not here.
func (c *Config) yarnInvFreq(s *RopeScaling) []float32 {
	R := c.RotaryDims()
	corr := func(n float64) float64 {
		return float64(R) * math.Log(float64(s.OriginalMaxPositions)/(n*2*math.Pi)) / (2 * math.Log(c.RopeTheta))
	}
	lo, hi := corr(s.BetaFast), corr(s.BetaSlow)
	if !s.NoTruncate {
		lo, hi = math.Floor(lo), math.Ceil(hi)
	}
	lo, hi = max(lo, 0), min(hi, float64(R-1))
	if lo == hi {
		hi += 0.001
	}
	span := float32(hi - lo)
	factor := float32(s.Factor)
	inv := make([]float32, c.HeadDim/2)
	for i := range inv[:R/2] {
		// Each operation rounded to float32 (explicit conversions: no fused
		// multiply-add), as torch's float32 tensors compute it.
		p := float32(math.Pow(c.RopeTheta, float64(float32(2*i)/float32(R))))
		extra := 1 / p
		inter := 1 / float32(factor*p)
		ramp := float32(float32(i)-float32(lo)) / span
		ramp = min(max(ramp, 0), 1)
		ef := 1 - ramp
		inv[i] = float32(inter*float32(1-ef)) + float32(extra*ef)
	}
	return inv
}

// RopeAttentionFactor returns the factor by which the config's RoPE
// scaling multiplies cos and sin (longrope's and yarn's attention factor),
// 1 for none.
func (c *Config) RopeAttentionFactor() float64 {
	if s := c.RopeScaling; s != nil && (s.Type == "longrope" || s.Type == "yarn") && s.AttentionFactor != 0 {
		return s.AttentionFactor
	}
	return 1
}
