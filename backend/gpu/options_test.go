package gpu_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/backend/gpu"
	"github.com/bitdecode/bitdecode/gpu/kernels"
)

// env returns a lookup over the variables kv.
func env(kv map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
}

func TestParseOptions(t *testing.T) {
	o, err := gpu.ParseOptions(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if o.NoGEMV || o.MMADecode || o.BatchInvariant || o.NoGraphs || o.NoPDL || o.PDLEarlyWeights || o.DECMode != 0 || o.DECBlocks != 0 || o.DECResidualOnDevice || o.GEMVDepth != 0 || o.GEMVSplits != [kernels.GEMVSplitTiers]int{} || o.GEMVEarly != 0 || o.NoEarlyNorm || o.Tuning != (kernels.Tuning{}) || o.CUDA == nil || o.CUDA.CacheDir != "" {
		t.Errorf("ParseOptions of nothing = %+v, want the defaults with a zero CUDA config", o)
	}
	o, err = gpu.ParseOptions(env(map[string]string{
		gpu.EnvNoGEMV: "1", gpu.EnvMMADecode: "t", gpu.EnvBatchInvariant: "1", gpu.EnvNoGraphs: "true", gpu.EnvDECMode: "fused", gpu.EnvDECBlocks: "6",
		gpu.EnvDECResidual: "device", kernels.EnvDecodeMT: "2", "BITDECODE_CACHE_DIR": "/tmp/k",
		gpu.EnvNoPDL: "1", gpu.EnvPDLEarly: "true", gpu.EnvGEMVDepth: "8",
		gpu.EnvGEMVSplits: "4, 0,2,1", gpu.EnvGEMVEarly: "plain,SwiGLU", gpu.EnvNoNormEarly: "1",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if !o.NoGEMV || !o.MMADecode || !o.BatchInvariant || !o.NoGraphs || o.DECMode != kernels.DECFused || o.DECBlocks != 6 || !o.DECResidualOnDevice || !o.NoPDL || !o.PDLEarlyWeights || o.GEMVDepth != 8 || o.GEMVSplits != [kernels.GEMVSplitTiers]int{4, 0, 2, 1} ||
		o.GEMVEarly != kernels.GEMVEarlyPlain|kernels.GEMVEarlySwiGLU || !o.NoEarlyNorm || o.Tuning.Decode.MMA.MT != 2 || o.CUDA.CacheDir != "/tmp/k" {
		t.Errorf("ParseOptions = %+v", o)
	}
	for v, want := range map[string]gpu.SkinnyMode{"off": gpu.SkinnyOff, "on": gpu.SkinnyOn, "Auto": gpu.SkinnyAuto} {
		if o, err := gpu.ParseOptions(env(map[string]string{gpu.EnvSkinny: v})); err != nil || o.Skinny != want {
			t.Errorf("%s=%s: Skinny %v, %v; want %v", gpu.EnvSkinny, v, o.Skinny, err, want)
		}
	}
	if o, err := gpu.ParseOptions(env(map[string]string{gpu.EnvNoMoEPacked: "1"})); err != nil || !o.NoMoEPacked {
		t.Errorf("%s=1: NoMoEPacked %v, %v", gpu.EnvNoMoEPacked, o.NoMoEPacked, err)
	}
	if o, err := gpu.ParseOptions(env(map[string]string{gpu.EnvGEMVQApart: "1", gpu.EnvGEMVQJoinSplit: "2"})); err != nil || !o.GEMVQApart || o.GEMVQJoinSplit != 2 {
		t.Errorf("GEMVQ_APART=1 GEMVQ_JOIN_SPLIT=2: %v %d, %v", o.GEMVQApart, o.GEMVQJoinSplit, err)
	}
	for v, want := range map[string]kernels.GEMVQ6DECTail{"auto": kernels.TailAuto, "Never": kernels.TailNever, "always": kernels.TailAlways} {
		if o, err := gpu.ParseOptions(env(map[string]string{gpu.EnvDECTail: v, gpu.EnvDECDiag: "norows"})); err != nil ||
			o.DECTail != want || !o.DECNoRows {
			t.Errorf("%s=%s, %s=norows: %v %v, %v", gpu.EnvDECTail, v, gpu.EnvDECDiag, o.DECTail, o.DECNoRows, err)
		}
	}
	for _, kv := range []map[string]string{{gpu.EnvDECTail: "sometimes"}, {gpu.EnvDECDiag: "rows"}} {
		if _, err := gpu.ParseOptions(env(kv)); err == nil {
			t.Errorf("%v: no error", kv)
		}
	}
	for v, want := range map[string]int{"": 0, "off": -1, "64": 64} {
		if o, err := gpu.ParseOptions(env(map[string]string{gpu.EnvMoEGroupRows: v})); err != nil || o.MoEGroupRows != want {
			t.Errorf("%s=%q: MoEGroupRows %d, %v; want %d", gpu.EnvMoEGroupRows, v, o.MoEGroupRows, err, want)
		}
	}
	if _, err := gpu.ParseOptions(env(map[string]string{gpu.EnvMoEGroupRows: "0"})); err == nil {
		t.Errorf("%s=0: no error", gpu.EnvMoEGroupRows)
	}
	if o, err := gpu.ParseOptions(env(map[string]string{gpu.EnvGEMVEarly: "none"})); err != nil || o.GEMVEarly != kernels.GEMVEarlyNone {
		t.Errorf("GEMV_EARLY=none: %+v, %v", o.GEMVEarly, err)
	}
	// "0" turns a switch off (it used to count as set).
	if o, err := gpu.ParseOptions(env(map[string]string{gpu.EnvNoGraphs: "0", gpu.EnvNoGEMV: ""})); err != nil || o.NoGraphs || o.NoGEMV {
		t.Errorf("NO_GRAPHS=0, NO_GEMV empty: %+v, %v", o, err)
	}
	for _, tt := range []struct{ name, value, want string }{
		{gpu.EnvNoGEMV, "yes", "1, t, true, 0, f or false"},
		{gpu.EnvNoGraphs, "on", "1, t, true, 0, f or false"},
		{gpu.EnvNoPDL, "yes", "1, t, true, 0, f or false"},
		{gpu.EnvBatchInvariant, "yes", "1, t, true, 0, f or false"},
		{gpu.EnvDECMode, "parallel", "serial, concurrent or fused"},
		{gpu.EnvDECBlocks, "0", "a positive number of thread blocks"},
		{gpu.EnvDECBlocks, "many", "a positive number of thread blocks"},
		{gpu.EnvDECResidual, "gpu", "host or device"},
		{gpu.EnvGEMVDepth, "0", "1, 4, 8 or 16"},
		{gpu.EnvGEMVDepth, "2", "1, 4, 8 or 16"},
		{gpu.EnvSkinny, "maybe", "off, on or auto"},
		{gpu.EnvGEMVSplits, "4,2,1", "four of 0, 1, 2, 4 split by commas"},
		{gpu.EnvGEMVSplits, "4,2,3,1", "four of 0, 1, 2, 4 split by commas"},
		{gpu.EnvGEMVEarly, "plain,qkv", "none or a comma list of plain, rope, swiglu"},
		{gpu.EnvNoNormEarly, "yes", "1, t, true, 0, f or false"},
		{kernels.EnvDecodeStages, "1", "0, 2, 3 or 4"},
		{gpu.EnvGEMVQJoinSplit, "16", "1, 2, 4 or 8"},
		{gpu.EnvGEMVQJoinSplit, "0", "1, 2, 4 or 8"},
		{gpu.EnvGEMVQApart, "yes", "1, t, true, 0, f or false"},
	} {
		_, err := gpu.ParseOptions(env(map[string]string{tt.name: tt.value}))
		var ve *kernels.VarError
		if !errors.As(err, &ve) || ve.Name != tt.name || ve.Want != tt.want || !strings.Contains(err.Error(), tt.value) {
			t.Errorf("%s=%q: err = %v, want a VarError naming it and %q", tt.name, tt.value, err, tt.want)
		}
	}
}

func TestOpenRejectsBadOptions(t *testing.T) {
	for _, o := range []gpu.Options{{DECMode: 9}, {DECBlocks: -1}, {GEMVDepth: 3}, {Skinny: 9}, {GEMVSplits: [kernels.GEMVSplitTiers]int{3}}} {
		if _, err := gpu.Open(0, o); err == nil || !strings.Contains(err.Error(), "Options.DEC") && !strings.Contains(err.Error(), "Options.GEMV") && !strings.Contains(err.Error(), "Options.Skinny") {
			t.Errorf("Open(0, %+v) = %v, want an error naming the option", o, err)
		}
	}
}
