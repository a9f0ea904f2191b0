package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"github.com/bitdecode/bitdecode/internal/testmodel"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fileBytes builds a file image from a raw header string and a data section.
func fileBytes(header string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	return append(b, data...)
}

func TestParseHeader(t *testing.T) {
	for _, tc := range []struct {
		name    string
		header  string
		size    int64
		wantErr string // substring; "" means success
	}{
		{"empty object", `{}`, 0, ""},
		{"one tensor", `{"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}}`, 24, ""},
		{"metadata and padding", `{"__metadata__":{"format":"pt"},"a":{"dtype":"BF16","shape":[4],"data_offsets":[0,8]}}    `, 8, ""},
		{"scalar", `{"s":{"dtype":"F16","shape":[],"data_offsets":[0,2]}}`, 2, ""},
		{"zero-size tensors share an offset", `{"a":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"c":{"dtype":"F32","shape":[3,0],"data_offsets":[4,4]}}`, 4, ""},
		{"hole between tensors", `{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[4,6]}}`, 6, ""},
		{"other dtypes", `{"i":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},"f8":{"dtype":"F8_E4M3","shape":[3],"data_offsets":[16,19]}}`, 19, ""},

		{"not an object", `[1,2]`, 0, "not a JSON object"},
		{"bad json", `{"a":`, 0, "header"},
		{"trailing data", `{} x`, 0, "data after the JSON object"},
		{"duplicate name", `{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, 2, `"a": appears twice`},
		{"missing dtype", `{"a":{"shape":[1],"data_offsets":[0,1]}}`, 1, `"a": missing dtype`},
		{"unknown dtype", `{"a":{"dtype":"Q4_K","shape":[1],"data_offsets":[0,1]}}`, 1, `"a": unknown dtype "Q4_K"`},
		{"sub-byte dtype", `{"a":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}}`, 1, `unknown dtype "F4"`},
		{"missing shape", `{"a":{"dtype":"U8","data_offsets":[0,1]}}`, 1, "missing shape"},
		{"negative dim", `{"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}}`, 1, "dimension 0 is -1"},
		{"fractional dim", `{"a":{"dtype":"U8","shape":[1.5],"data_offsets":[0,1]}}`, 1, `"a": header entry`},
		{"huge dim", `{"a":{"dtype":"U8","shape":[99999999999999999999],"data_offsets":[0,1]}}`, 1, `"a": header entry`},
		{"shape overflow", `{"a":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,1]}}`, 1, "overflows"},
		{"byte size overflow", `{"a":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,1]}}`, 1, "overflows"},
		{"three offsets", `{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}}`, 2, "want [begin, end]"},
		{"missing offsets", `{"a":{"dtype":"U8","shape":[1]}}`, 1, "want [begin, end]"},
		{"end past data", `{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}`, 1, "out of the data section"},
		{"negative begin", `{"a":{"dtype":"U8","shape":[1],"data_offsets":[-1,0]}}`, 1, "out of the data section"},
		{"end before begin", `{"a":{"dtype":"U8","shape":[0],"data_offsets":[2,1]}}`, 4, "out of the data section"},
		{"size mismatch", `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, 8, "needs 8"},
		{"overlap", `{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[2],"data_offsets":[3,5]}}`, 5, `"b": data_offsets [3, 5] overlap tensor "a"`},
		{"metadata not strings", `{"__metadata__":{"n":1}}`, 0, "__metadata__"},
		{"entry not an object", `{"a":5}`, 0, `"a": header entry`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := ParseHeader([]byte(tc.header), tc.size)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("ParseHeader(%s) = %v", tc.header, err)
				}
				if h == nil {
					t.Fatal("nil header")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("ParseHeader(%s) error = %v, want it to contain %q", tc.header, err, tc.wantErr)
			}
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("error %T is not a *Error", err)
			}
		})
	}
}

func TestParseHeaderValues(t *testing.T) {
	h, err := ParseHeader([]byte(`{"__metadata__":{"format":"pt"},"w":{"dtype":"BF16","shape":[2,3],"data_offsets":[4,16]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`), 16)
	if err != nil {
		t.Fatal(err)
	}
	if h.Metadata["format"] != "pt" {
		t.Errorf("metadata = %v", h.Metadata)
	}
	if len(h.Tensors) != 2 || h.Tensors[0].Name != "b" || h.Tensors[1].Name != "w" {
		t.Fatalf("tensors = %+v, want b, w sorted by name", h.Tensors)
	}
	w := h.Tensors[1]
	if w.DType != BF16 || len(w.Shape) != 2 || w.Shape[0] != 2 || w.Shape[1] != 3 || w.Begin != 4 || w.End != 16 || w.NumElements() != 6 {
		t.Errorf("w = %+v", w)
	}
}

func TestOpenBytesErrors(t *testing.T) {
	valid := fileBytes(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, []byte{7})
	huge := binary.LittleEndian.AppendUint64(nil, 1<<62)
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "too short"},
		{"short length", []byte{1, 0, 0}, "too short"},
		{"header past end", fileBytes(`{}`, nil)[:9], "exceeds the 1 bytes"},
		{"huge header length", append(huge, '{', '}'), "exceeds the 100000000-byte limit"},
		{"tiny header", fileBytes(`{`, nil), "too short for a JSON object"},
		{"truncated data", valid[:len(valid)-1], "out of the data section"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := OpenBytes("x.safetensors", tc.b)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "x.safetensors") {
				t.Fatalf("OpenBytes = %v, want an error naming the file and containing %q", err, tc.want)
			}
		})
	}
	if f, err := OpenBytes("ok", valid); err != nil {
		t.Fatal(err)
	} else if tt, err := f.Tensor("a"); err != nil || len(tt.Data) != 1 || tt.Data[0] != 7 {
		t.Fatalf("Tensor(a) = %v, %v", tt, err)
	}
}

// f16Ref is the value of an fp16 bit pattern computed from the definition of
// binary16 in float64 (exact for every pattern).
func f16Ref(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e := int(h>>10) & 0x1f
	m := float64(h & 0x3ff)
	switch e {
	case 0x1f:
		if m == 0 {
			return sign * math.Inf(1)
		}
		return math.NaN()
	case 0:
		return sign * math.Ldexp(m, -24)
	}
	return sign * math.Ldexp(1024+m, e-25)
}

// bf16Ref is the value of a bfloat16 bit pattern from its definition.
func bf16Ref(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e := int(h>>7) & 0xff
	m := float64(h & 0x7f)
	switch e {
	case 0xff:
		if m == 0 {
			return sign * math.Inf(1)
		}
		return math.NaN()
	case 0:
		return sign * math.Ldexp(m, -133)
	}
	return sign * math.Ldexp(128+m, e-134)
}

// TestDecodeFloat32Exhaustive checks every fp16 and bf16 bit pattern:
// exact values (subnormals and signed zeros included), infinities, and NaN
// staying NaN.
func TestDecodeFloat32Exhaustive(t *testing.T) {
	for _, tc := range []struct {
		dt  DType
		ref func(uint16) float64
	}{{F16, f16Ref}, {BF16, bf16Ref}} {
		src := make([]byte, 2<<16)
		for i := range 1 << 16 {
			binary.LittleEndian.PutUint16(src[2*i:], uint16(i))
		}
		dst := make([]float32, 1<<16)
		if err := DecodeFloat32(dst, src, tc.dt); err != nil {
			t.Fatal(err)
		}
		for i, got := range dst {
			want := tc.ref(uint16(i))
			switch {
			case math.IsNaN(want):
				if !math.IsNaN(float64(got)) {
					t.Fatalf("%s %#04x = %v, want NaN", tc.dt, i, got)
				}
			case float64(got) != want || math.Signbit(float64(got)) != math.Signbit(want):
				t.Fatalf("%s %#04x = %v, want %v", tc.dt, i, got, want)
			}
		}
	}
	// F32 is copied bit for bit, NaN payloads included.
	bitsIn := []uint32{0, 0x80000000, 0x3f800000, 0x7f800001, 0xffc00000, 1}
	var src []byte
	for _, b := range bitsIn {
		src = binary.LittleEndian.AppendUint32(src, b)
	}
	dst := make([]float32, len(bitsIn))
	if err := DecodeFloat32(dst, src, F32); err != nil {
		t.Fatal(err)
	}
	for i, b := range bitsIn {
		if math.Float32bits(dst[i]) != b {
			t.Errorf("F32 %#08x -> %#08x", b, math.Float32bits(dst[i]))
		}
	}
	if err := DecodeFloat32(dst, src[:3], F32); err == nil {
		t.Error("DecodeFloat32 with a short source succeeded")
	}
}

func TestUnsupportedDType(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, []Tensor{{TensorInfo: TensorInfo{Name: "model.pos_ids", DType: I64, Shape: []int{2}}, Data: make([]byte, 16)}}, nil); err != nil {
		t.Fatal(err)
	}
	f, err := OpenBytes("m.safetensors", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	tt, err := f.Tensor("model.pos_ids")
	if err != nil {
		t.Fatal(err)
	}
	_, err = tt.Float32()
	if !errors.Is(err, ErrUnsupportedDType) || !strings.Contains(err.Error(), "model.pos_ids") || !strings.Contains(err.Error(), "I64") || !strings.Contains(err.Error(), "m.safetensors") {
		t.Fatalf("Float32 of an I64 tensor: %v", err)
	}
}

// writeFile writes tensors to dir/name and returns the path.
func writeFile(t *testing.T, dir, name string, tensors []Tensor) string {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, tensors, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func f32Tensor(name string, shape []int, v ...float32) Tensor {
	var data []byte
	for _, x := range v {
		data = binary.LittleEndian.AppendUint32(data, math.Float32bits(x))
	}
	return Tensor{TensorInfo: TensorInfo{Name: name, DType: F32, Shape: shape}, Data: data}
}

func TestWriteOpenRoundTrip(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, SingleFileName, []Tensor{
		f32Tensor("w", []int{2, 2}, 1, 2, 3, 4),
		{TensorInfo: TensorInfo{Name: "h", DType: BF16, Shape: []int{3}}, Data: []byte{0x80, 0x3f, 0x00, 0xc0, 0x80, 0x7f}}, // 1, -2, +Inf
		f32Tensor("empty", []int{0}),
	})
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !f.Mapped() {
		t.Log("file was read, not mapped")
	}
	if f.Metadata()["format"] != "pt" {
		t.Errorf("metadata = %v", f.Metadata())
	}
	w, err := f.Tensor("w")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := w.Float32(); err != nil || len(v) != 4 || v[3] != 4 {
		t.Errorf("w = %v, %v", v, err)
	}
	h, _ := f.Tensor("h")
	if v, err := h.Float32(); err != nil || v[0] != 1 || v[1] != -2 || !math.IsInf(float64(v[2]), 1) {
		t.Errorf("h = %v, %v", v, err)
	}
	if _, err := f.Tensor("nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("missing tensor: %v", err)
	}
	// The data section is 8-byte aligned in the file.
	raw, _ := os.ReadFile(p)
	if n := binary.LittleEndian.Uint64(raw); (8+n)%8 != 0 {
		t.Errorf("data section starts at %d", 8+n)
	}

	c, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := strings.Join(c.Names(), ","); got != "empty,h,w" {
		t.Errorf("names = %s", got)
	}
}

func TestSharded(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "model-00001-of-00002.safetensors", []Tensor{f32Tensor("a", []int{1}, 1), f32Tensor("b", []int{1}, 2)})
	writeFile(t, dir, "model-00002-of-00002.safetensors", []Tensor{f32Tensor("c", []int{2}, 3, 4)})
	writeIndex := func(js string) {
		if err := os.WriteFile(filepath.Join(dir, IndexFileName), []byte(js), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeIndex(`{"metadata":{"total_size":16},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00001-of-00002.safetensors","c":"model-00002-of-00002.safetensors"}}`)
	c, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Names(), ","); got != "a,b,c" {
		t.Errorf("names = %s", got)
	}
	if len(c.Files()) != 2 {
		t.Errorf("files = %v", c.Files())
	}
	ct, err := c.Tensor("c")
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := ct.Float32(); v[1] != 4 {
		t.Errorf("c = %v", v)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct{ index, want string }{
		{`{"weight_map":{"a":"../model-00001-of-00002.safetensors"}}`, "not a file name"},
		{`{"weight_map":{"a":"/etc/passwd"}}`, "not a file name"},
		{`{"weight_map":{"x":"model-00001-of-00002.safetensors"}}`, `"x": listed in model.safetensors.index.json but not in this shard`},
		{`{"weight_map":{"a":"missing.safetensors"}}`, "missing.safetensors"},
		{`{"weight_map":{}}`, "weight_map is missing or empty"},
		{`{"weight_map":`, "index"},
	} {
		writeIndex(tc.index)
		if _, err := OpenDir(dir); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("index %s: err = %v, want %q", tc.index, err, tc.want)
		}
	}

	if _, err := OpenDir(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no model.safetensors") {
		t.Errorf("empty dir: %v", err)
	}
}

func TestOpenFiles(t *testing.T) {
	dir := t.TempDir()
	p1 := writeFile(t, dir, "1.safetensors", []Tensor{f32Tensor("a", []int{1}, 1)})
	p2 := writeFile(t, dir, "2.safetensors", []Tensor{f32Tensor("a", []int{1}, 2)})
	if _, err := OpenFiles(p1, p2); err == nil || !strings.Contains(err.Error(), "also in") {
		t.Fatalf("duplicate tensor across files: %v", err)
	}
	c, err := OpenFiles(p1)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

func TestGocoderCheckpoint(t *testing.T) {
	c, err := OpenDir(testmodel.Dir(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if n := len(c.Names()); n != 56 {
		t.Errorf("%d tensors, want 56", n)
	}
	info, ok := c.Info("model.embed_tokens.weight")
	if !ok || info.DType != BF16 || len(info.Shape) != 2 || info.Shape[0] != 8192 || info.Shape[1] != 512 {
		t.Fatalf("embed_tokens = %+v, %v", info, ok)
	}
	tt, err := c.Tensor("model.norm.weight")
	if err != nil {
		t.Fatal(err)
	}
	v, err := tt.Float32()
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			t.Fatalf("norm[%d] = %v", i, x)
		}
	}
}

func FuzzParseHeader(f *testing.F) {
	f.Add([]byte(`{"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}}`), int64(24))
	f.Add([]byte(`{"__metadata__":{"format":"pt"},"a":{"dtype":"BF16","shape":[],"data_offsets":[0,2]}}  `), int64(2))
	f.Add([]byte(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[2],"data_offsets":[3,5]}}`), int64(5))
	f.Add([]byte(`{"a":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,1]}}`), int64(1))
	f.Fuzz(func(t *testing.T, header []byte, size int64) {
		h, err := ParseHeader(header, size)
		if err != nil {
			return
		}
		for _, ti := range h.Tensors {
			if ti.Begin < 0 || ti.End > size || ti.End-ti.Begin != int64(ti.NumElements()*ti.DType.Size()) {
				t.Fatalf("accepted inconsistent tensor %+v with data size %d", ti, size)
			}
		}
	})
}

func FuzzOpenBytes(f *testing.F) {
	var buf bytes.Buffer
	_ = Write(&buf, []Tensor{f32Tensor("w", []int{2, 2}, 1, 2, 3, 4), f32Tensor("b", []int{1}, 5)}, map[string]string{"k": "v"})
	f.Add(buf.Bytes())
	f.Add(fileBytes(`{}`, nil))
	f.Add(fileBytes(`{"a":{"dtype":"BF16","shape":[1],"data_offsets":[0,2]}}`, []byte{0x80, 0x3f}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		sf, err := OpenBytes("fuzz", b)
		if err != nil {
			return
		}
		for _, ti := range sf.Tensors() {
			tt, err := sf.Tensor(ti.Name)
			if err != nil {
				t.Fatal(err)
			}
			if v, err := tt.Float32(); err == nil && len(v) != ti.NumElements() {
				t.Fatalf("%s: %d values for %d elements", ti.Name, len(v), ti.NumElements())
			}
		}
	})
}
