package model

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/backend/cpu"
	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/model/safetensors"
)

// quantGroup is the group size of the synthetic int8 checkpoints; it divides
// every column count of synthFamilies[0] (64, 96).
const quantGroup = 32

// quantConfigJSON adds a bitdecode int8 quantization_config to a config.
func quantConfigJSON(base string, group int) string {
	return strings.TrimSuffix(strings.TrimSpace(base), "}") +
		`,"quantization_config":{"quant_method":"bitdecode","format":"int8","bits":8,"group_size":` + itoa(group) +
		`,"symmetric":true,"scale_dtype":"float16","scale_suffix":"_scale"}}`
}

// quantizeInt8 is the test's own int8 quantizer (the format of quant.go, as
// train.py writes it): per row and group of G columns, scale =
// fp16(max|w| / 127), q = round(w / scale). It returns q, the fp16 scales
// and the dequantized values q * scale.
func quantizeInt8(w []float32, rows, cols, g int) (q []byte, scales []byte, deq []float32) {
	q, deq = make([]byte, rows*cols), make([]float32, rows*cols)
	for r := range rows {
		for c0 := 0; c0 < cols; c0 += g {
			var amax float64
			for c := c0; c < c0+g; c++ {
				amax = max(amax, math.Abs(float64(w[r*cols+c])))
			}
			s := float32(1)
			if amax > 0 {
				s = float32(amax / 127)
			}
			h := half.FromFloat32(s)
			sf := half.ToFloat32(h)
			scales = binary.LittleEndian.AppendUint16(scales, h)
			for c := c0; c < c0+g; c++ {
				v := math.RoundToEven(float64(w[r*cols+c] / sf))
				v = max(-127, min(127, v))
				q[r*cols+c] = byte(int8(v))
				deq[r*cols+c] = float32(int8(v)) * sf
			}
		}
	}
	return q, scales, deq
}

// quantizedFile returns an int8 safetensors file of the weights w (2-D
// weights quantized, the rest F32) for config cfg, and the dequantized
// weights. edit may change the tensors first.
func quantizedFile(cfg *Config, w refWeights, g int, edit func(map[string]*safetensors.Tensor)) ([]byte, refWeights, error) {
	deq := refWeights{}
	tensors := map[string]*safetensors.Tensor{}
	for name, shape := range synthTensors(cfg) {
		v := w[name]
		if len(shape) == 2 {
			q, s, d := quantizeInt8(v, shape[0], shape[1], g)
			deq[name] = d
			tensors[name] = &safetensors.Tensor{TensorInfo: safetensors.TensorInfo{Name: name, DType: safetensors.I8, Shape: shape}, Data: q}
			tensors[name+"_scale"] = &safetensors.Tensor{TensorInfo: safetensors.TensorInfo{Name: name + "_scale", DType: safetensors.F16, Shape: []int{shape[0], shape[1] / g}}, Data: s}
			continue
		}
		deq[name] = v
		var data []byte
		for _, x := range v {
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(x))
		}
		tensors[name] = &safetensors.Tensor{TensorInfo: safetensors.TensorInfo{Name: name, DType: safetensors.F32, Shape: shape}, Data: data}
	}
	if edit != nil {
		edit(tensors)
	}
	var list []safetensors.Tensor
	for _, name := range sortedKeys(tensors) {
		list = append(list, *tensors[name])
	}
	var buf bytes.Buffer
	err := safetensors.Write(&buf, list, map[string]string{"format": "pt"})
	return buf.Bytes(), deq, err
}

// writeQuantized writes config.json and an int8 model.safetensors (see
// quantizedFile) to dir and returns the dequantized weights.
func writeQuantized(t *testing.T, dir, configJSON string, w refWeights, g int, edit func(map[string]*safetensors.Tensor)) refWeights {
	t.Helper()
	cfg, err := ParseConfig([]byte(configJSON))
	if err != nil {
		t.Fatal(err)
	}
	file, deq, err := quantizedFile(cfg, w, g, edit)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"config.json": []byte(configJSON), "model.safetensors": file} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return deq
}

// TestLoadInt8 loads an int8 checkpoint and checks its logits against the
// float64 reference forward pass over the dequantized weights: the loader
// must dequantize exactly as the format says.
func TestLoadInt8(t *testing.T) {
	fp := t.TempDir()
	w := writeSynthetic(t, fp, synthFamilies[0].config, safetensors.F32, 7, nil)
	dir := t.TempDir()
	cfgJSON := quantConfigJSON(synthFamilies[0].config, quantGroup)
	deq := writeQuantized(t, dir, cfgJSON, w, quantGroup, nil)
	be := cpu.New(2)
	m, err := Load(dir, be, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if q := m.Config().Quant; q == nil || q.GroupSize != quantGroup || q.ScaleSuffix != "_scale" {
		t.Fatalf("Config().Quant = %+v", q)
	}
	tokens := []int32{1, 17, 42, 99, 0, 5, 63}
	want := refForward(m.Config(), deq, tokens)
	var b Batch
	b.Add(0, 0, tokens...)
	b.AllLogits = true
	out, err := m.Forward(&b, NewDenseCache(be, m.Config()))
	if err != nil {
		t.Fatal(err)
	}
	var worst float64
	for p := range tokens {
		worst = max(worst, checkRow(t, "position "+itoa(p), out.Row(p), want[p]))
	}
	// The quantization itself must be visible but small: against the float
	// weights' reference the logits move, by less than a few percent.
	orig := refForward(m.Config(), w, tokens)
	var moved float64
	for p := range tokens {
		var scale float64
		for i := range orig[p] {
			scale = max(scale, math.Abs(orig[p][i]))
		}
		for i := range orig[p] {
			moved = max(moved, math.Abs(float64(out.Row(p)[i])-orig[p][i])/scale)
		}
	}
	if moved == 0 || moved > 0.05 {
		t.Errorf("int8 logits differ from the float weights' by %.3g of max |logit|, want in (0, 0.05]", moved)
	}
	t.Logf("worst error vs dequantized reference %.2e; int8 vs float weights %.2e", worst, moved)
}

// TestLoadInt8Errors checks that malformed int8 checkpoints are rejected
// with an error naming the tensor or field.
func TestLoadInt8Errors(t *testing.T) {
	base := synthFamilies[0].config
	const q = "model.layers.0.self_attn.q_proj.weight"
	fp := t.TempDir()
	w := writeSynthetic(t, fp, base, safetensors.F32, 3, nil)
	for _, tc := range []struct {
		name   string
		config string
		edit   func(map[string]*safetensors.Tensor)
		want   string
	}{
		{"I8 without quantization_config", base, nil, "has no quantization_config"},
		{"missing scales", quantConfigJSON(base, quantGroup), func(m map[string]*safetensors.Tensor) { delete(m, q+"_scale") }, `no scales "` + q + `_scale"`},
		{"scales not F16", quantConfigJSON(base, quantGroup), func(m map[string]*safetensors.Tensor) {
			s := m[q+"_scale"]
			s.DType = safetensors.BF16
		}, "want F16"},
		{"scales of the wrong shape", quantConfigJSON(base, quantGroup), func(m map[string]*safetensors.Tensor) {
			s := m[q+"_scale"]
			s.Shape = []int{s.Shape[1], s.Shape[0]}
		}, "want [64 2]"},
		{"group does not divide", quantConfigJSON(base, 60), nil, "not a multiple of quantization_config.group_size 60"},
		{"stray scales", quantConfigJSON(base, quantGroup), func(m map[string]*safetensors.Tensor) {
			m["model.norm.weight_scale"] = &safetensors.Tensor{TensorInfo: safetensors.TensorInfo{Name: "model.norm.weight_scale", DType: safetensors.F16, Shape: []int{1}}, Data: []byte{0, 0}}
		}, "does not use: model.norm.weight_scale"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			g := quantGroup
			writeQuantized(t, dir, quantConfigJSON(base, g), w, g, tc.edit)
			if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(tc.config), 0o644); err != nil {
				t.Fatal(err)
			}
			m, err := Load(dir, cpu.New(1), LoadOptions{})
			if err == nil {
				m.Close()
				t.Fatalf("Load succeeded, want an error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestParseQuantConfig(t *testing.T) {
	base := synthFamilies[0].config
	for _, tc := range []struct {
		qc, want string
	}{
		{`{"quant_method":"gptq","bits":4,"group_size":128}`, `quant_method: "gptq" is not supported`},
		{`{"group_size":64}`, "quant_method: (none) is not supported"},
		{`{"quant_method":"bitdecode","bits":4,"group_size":64}`, "bits: 4 is not supported"},
		{`{"quant_method":"bitdecode","format":"int4","group_size":64}`, `format: "int4" is not supported`},
		{`{"quant_method":"bitdecode"}`, "group_size: missing"},
		{`{"quant_method":"bitdecode","group_size":0}`, "group_size: 0 is not in"},
		{`{"quant_method":"bitdecode","group_size":64,"symmetric":false}`, "asymmetric"},
		{`{"quant_method":"bitdecode","group_size":64,"scale_dtype":"bfloat16"}`, `"bfloat16" is not supported`},
		{`{"quant_method":"bitdecode","group_size":64,"scale_suffix":""}`, "scale_suffix: empty"},
		{`[1]`, "quantization_config"},
		{`{"quant_method":"bitdecode","group_size":64}`, ""},
		{`null`, ""},
	} {
		cfg := strings.TrimSuffix(strings.TrimSpace(base), "}") + `,"quantization_config":` + tc.qc + `}`
		c, err := ParseConfig([]byte(cfg))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.qc, err)
		case tc.want == "" && tc.qc != "null" && (c.Quant == nil || c.Quant.GroupSize != 64 || c.Quant.ScaleSuffix != "_scale"):
			t.Errorf("%s: Quant = %+v", tc.qc, c.Quant)
		case tc.want == "" && tc.qc == "null" && c.Quant != nil:
			t.Errorf("null: Quant = %+v, want nil", c.Quant)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want one containing %q", tc.qc, err, tc.want)
		}
	}
}

func TestDequantInt8(t *testing.T) {
	// Two rows of four columns, groups of two: scales 0.5, 2, 1, -0 (fp16).
	q := []byte{1, 0xFF, 127, 0x81, 3, 4, 5, 6}
	var s []byte
	for _, v := range []float32{0.5, 2, 1, float32(math.Copysign(0, -1))} {
		s = binary.LittleEndian.AppendUint16(s, half.FromFloat32(v))
	}
	out, err := dequantInt8(q, s, 2, 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{0.5, -0.5, 254, -254, 3, 4, 0, 0}
	for i, w := range want {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(out[4*i:])); got != w {
			t.Errorf("element %d = %g, want %g", i, got, w)
		}
	}
	for _, bad := range []struct {
		q, s            []byte
		rows, cols, grp int
	}{
		{q[:7], s, 2, 4, 2},
		{q, s[:6], 2, 4, 2},
		{q, s, 2, 4, 3},
		{q, s, 2, 4, 0},
	} {
		if _, err := dequantInt8(bad.q, bad.s, bad.rows, bad.cols, bad.grp); err == nil {
			t.Errorf("dequantInt8(%d bytes, %d bytes, %d, %d, %d) succeeded", len(bad.q), len(bad.s), bad.rows, bad.cols, bad.grp)
		}
	}
}

// FuzzLoadInt8 feeds mutated int8 checkpoints to the loader: it must return
// a model or an error, never panic. Run: go test ./model -run x -fuzz LoadInt8
func FuzzLoadInt8(f *testing.F) {
	cfg, err := ParseConfig([]byte(quantConfigJSON(synthFamilies[0].config, quantGroup)))
	if err != nil {
		f.Fatal(err)
	}
	w := refWeights{}
	for name, shape := range synthTensors(cfg) {
		n := 1
		for _, d := range shape {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(i%17-8) / 16
		}
		w[name] = v
	}
	seed, _, err := quantizedFile(cfg, w, quantGroup, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Fuzz(func(t *testing.T, data []byte) {
		sf, err := safetensors.OpenBytes("fuzz.safetensors", data)
		if err != nil {
			return
		}
		ck, err := safetensors.NewCheckpoint(sf)
		if err != nil {
			return
		}
		defer ck.Close()
		if m, err := LoadCheckpoint(cfg, ck, cpu.New(1), LoadOptions{}); err == nil {
			m.Close()
		}
	})
}
