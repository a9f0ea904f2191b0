package model

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/model/safetensors"
)

// Low-bit checkpoint weights: bitdecode's int8 format.
//
// config.json names it:
//
//	"quantization_config": {"quant_method": "bitdecode", "format": "int8",
//	                        "bits": 8, "group_size": 64, "symmetric": true,
//	                        "scale_dtype": "float16", "scale_suffix": "_scale"}
//
// and a 2-D weight W [rows, cols] may then be stored as two tensors:
//
//	NAME        I8  [rows, cols]        q in [-127, 127]
//	NAME_scale  F16 [rows, cols/G]      one scale per G consecutive columns
//
// with W[r, c] = float32(q[r, c]) * float32(scale[r, c/G]) (symmetric: no
// zero point). A backend that reads stored bytes in place (viewLoader:
// backend/cpu) gets the codes and scales as stored and multiplies by them
// directly; others get the weight dequantized to float32. Either way a
// quantized checkpoint goes through the same model code as any other.
// Weights stored as float (e.g. RMSNorm vectors) load as usual.
// tools/tinymodel/train.py writes this format (quantize_int8).

// QuantMethod is the quant_method of bitdecode's own weight formats.
const QuantMethod = "bitdecode"

// QuantConfig is a checkpoint's "quantization_config" for QuantMethod.
type QuantConfig struct {
	Format      string // "int8"
	Bits        int    // 8
	GroupSize   int    // G: columns per scale
	ScaleSuffix string // appended to a weight's name to name its scales
}

// maxQuantGroup bounds group_size (a whole row of the widest layer).
const maxQuantGroup = maxDim

// rawQuantConfig is "quantization_config" as written.
type rawQuantConfig struct {
	QuantMethod *string `json:"quant_method"`
	Format      *string `json:"format"`
	Bits        *int    `json:"bits"`
	GroupSize   *int    `json:"group_size"`
	Symmetric   *bool   `json:"symmetric"`
	ScaleDType  *string `json:"scale_dtype"`
	ScaleSuffix *string `json:"scale_suffix"`
}

// parseQuantConfig validates "quantization_config"; absent or null gives nil.
func parseQuantConfig(msg json.RawMessage) (*QuantConfig, error) {
	if len(msg) == 0 || isNull(msg) {
		return nil, nil
	}
	const field = "quantization_config"
	var raw rawQuantConfig
	if err := json.Unmarshal(msg, &raw); err != nil {
		return nil, &ConfigError{Field: field, Err: err}
	}
	if raw.QuantMethod == nil || *raw.QuantMethod != QuantMethod {
		m := "(none)"
		if raw.QuantMethod != nil {
			m = fmt.Sprintf("%q", *raw.QuantMethod)
		}
		return nil, &ConfigError{Field: field + ".quant_method", Err: fmt.Errorf("%s is not supported (want %q: bitdecode's int8 weights; for others, convert the checkpoint to float weights)", m, QuantMethod)}
	}
	q := &QuantConfig{Format: "int8", Bits: 8, ScaleSuffix: "_scale"}
	if raw.Format != nil && *raw.Format != "int8" {
		return nil, &ConfigError{Field: field + ".format", Err: fmt.Errorf("%q is not supported (want int8)", *raw.Format)}
	}
	if raw.Bits != nil && *raw.Bits != 8 {
		return nil, &ConfigError{Field: field + ".bits", Err: fmt.Errorf("%d is not supported (want 8)", *raw.Bits)}
	}
	if raw.Symmetric != nil && !*raw.Symmetric {
		return nil, &ConfigError{Field: field + ".symmetric", Err: errors.New("asymmetric int8 weights are not supported")}
	}
	if raw.ScaleDType != nil && *raw.ScaleDType != "float16" {
		return nil, &ConfigError{Field: field + ".scale_dtype", Err: fmt.Errorf("%q is not supported (want float16)", *raw.ScaleDType)}
	}
	if raw.GroupSize == nil {
		return nil, &ConfigError{Field: field + ".group_size", Err: errors.New("missing")}
	}
	if g := *raw.GroupSize; g < 1 || g > maxQuantGroup {
		return nil, &ConfigError{Field: field + ".group_size", Err: fmt.Errorf("%d is not in [1, %d]", g, maxQuantGroup)}
	}
	q.GroupSize = *raw.GroupSize
	if raw.ScaleSuffix != nil {
		if *raw.ScaleSuffix == "" {
			return nil, &ConfigError{Field: field + ".scale_suffix", Err: errors.New("empty")}
		}
		q.ScaleSuffix = *raw.ScaleSuffix
	}
	return q, nil
}

// quantScaleInfo checks that the I8 tensor q (of the expected 2-D shape) has
// a valid scale tensor and returns the scale's name.
func (ld *loader) quantScaleInfo(q safetensors.TensorInfo) (string, error) {
	qc := ld.quant
	if qc == nil {
		return "", fmt.Errorf("model: tensor %q is I8 but config.json has no quantization_config (quant_method %q)", q.Name, QuantMethod)
	}
	if len(q.Shape) != 2 {
		return "", fmt.Errorf("model: tensor %q: I8 weights must be 2-D, got shape %v", q.Name, q.Shape)
	}
	rows, cols := q.Shape[0], q.Shape[1]
	if cols%qc.GroupSize != 0 {
		return "", fmt.Errorf("model: tensor %q: %d columns are not a multiple of quantization_config.group_size %d", q.Name, cols, qc.GroupSize)
	}
	name := q.Name + qc.ScaleSuffix
	s, ok := ld.ck.Info(name)
	if !ok {
		return "", fmt.Errorf("model: tensor %q is I8 but the checkpoint has no scales %q", q.Name, name)
	}
	if s.DType != safetensors.F16 {
		return "", fmt.Errorf("model: scales %q have dtype %s, want F16", name, s.DType)
	}
	if want := []int{rows, cols / qc.GroupSize}; len(s.Shape) != 2 || s.Shape[0] != want[0] || s.Shape[1] != want[1] {
		return "", fmt.Errorf("model: scales %q have shape %v, want %v for %q with group size %d", name, s.Shape, want, q.Name, qc.GroupSize)
	}
	return name, nil
}

// dequantInt8 returns the float32 bytes (little-endian) of an int8 weight of
// shape [rows, cols] with F16 scales [rows, cols/group]: q * scale.
func dequantInt8(q, scales []byte, rows, cols, group int) ([]byte, error) {
	if group < 1 || cols%group != 0 {
		return nil, fmt.Errorf("group size %d does not divide %d columns", group, cols)
	}
	ng := cols / group
	if len(q) != rows*cols || len(scales) != 2*rows*ng {
		return nil, fmt.Errorf("int8 data of %d bytes and scales of %d bytes do not match shape [%d, %d] with group %d", len(q), len(scales), rows, cols, group)
	}
	out := make([]byte, 4*rows*cols)
	for r := range rows {
		for g := range ng {
			s := half.ToFloat32(binary.LittleEndian.Uint16(scales[2*(r*ng+g):]))
			base := r*cols + g*group
			for i := base; i < base+group; i++ {
				binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(float32(int8(q[i]))*s))
			}
		}
	}
	return out, nil
}
