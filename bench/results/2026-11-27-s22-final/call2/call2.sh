#!/bin/bash
# Session 22, lead call 2: the merged tree (80ce871: + linear.cu v8, + the CPU's integer int4/int3
# paths that the GPU tests use as their CPU reference) — the GPU tests that compare against the CPU
# backend's quantized Linear, and linear.cu's tests.
ROOT=$PWD; cd .gpu-lead; G=$PWD; R=$G/r; mkdir -p $R
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('a.tar.xz')).extractall('.')
"
chmod +x *.test
export BITDECODE_CACHE_DIR=$G/cache
snap() { (cd $G && tar czf $OUT/results.tmp r && mv $OUT/results.tmp $OUT/results.tgz); }
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
t() { echo "$(date -u +%T) $(el)s $*" >> $R/times.txt; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/gpu.txt 2>&1
left=260
tst() { local name=$1 bin=$2 dir=$3 run=$4; (cd $ROOT/$dir && timeout $left $G/$bin -test.v -test.timeout ${left}s -test.run "$run" > $R/$name.log 2>&1; echo "rc=$?" >> $R/$name.log; t $name) & }
tst t_bq bgpu.test backend/gpu '^(TestQuantLinear.*|TestMixExperts.*|TestMixQuantExperts)$'
tst t_bm bgpu.test backend/gpu '^(TestModelMatchesCPU|TestModelDECMatchesCPU|TestModelQuantMatchesCPU|TestLinear.*|TestBatchInvariantLinear)$'
tst t_kv gpukv.test kvcache/gpukv '^(TestGPUMoE.*|TestGPUSyntheticFamilies|TestGPUBatchInvariantLogits|TestGPUCacheBatchInvariant)$'
tst t_lin kernels.test gpu/kernels '^(TestLinear.*|TestGridDependentKernelsWait)$'
wait; snap
{
for f in $R/t_*.log; do echo "== $(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(grep -c -- '--- PASS' $f) PASS, $(grep -c -- '--- SKIP' $f) SKIP, $(tail -1 $f)"; done
grep -h -B3 -- "--- FAIL\|panic" $R/t_*.log | head -40
grep -h "^--- \(PASS\|FAIL\|SKIP\)" $R/t_*.log
cat $R/times.txt
} > $OUT/summary.txt 2>&1
cat $OUT/summary.txt
