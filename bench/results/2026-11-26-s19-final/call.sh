#!/bin/bash
# Session 19, the lead's call on the merged tree: the GPU tests the session's merges touch (packed MoE
# experts on the device, DEC inside v6.1, the decode planner's one-wave rule), then the attention grid
# for README's table, the step at B = 1 and at max batch, and bench moe.
set -o pipefail
cd .gpu; G=$PWD; R=$OUT/r; mkdir -p $R
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('a.tar.xz')).extractall('.')
"
chmod +x bitdecode *.test
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >> $R/times.txt
export BITDECODE_CACHE_DIR=$G/cache
mkdir -p $G/kvcache/gpukv $G/gpu/kernels $G/backend/gpu
tst() { local to=$1; shift; (cd $G/$4 && timeout $to $G/$2 -test.v -test.timeout ${to}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) & }
tst 200 gpukv1 gpukv.test '^(TestGPUTransformers)$' kvcache/gpukv
tst 200 gpukv2 gpukv.test '^(TestGPUSyntheticFamilies|TestGPUMoEGraphReplaySameBits|TestGPUMoEQuantizedExperts|TestGPUGraphReplaySameBits)$' kvcache/gpukv
tst 200 kern1 kernels.test '^(TestGPUDecodeOneSplitMatchesCombine|TestGPUDecodeRingMatchesPipeline|TestGPUDecodeLookAheadMatchesRefold|TestGPUDecodeLong|TestGEMVQ6DECMatchesV61|TestDECSelectMatchesWQ)$' gpu/kernels
tst 240 kern2 kernels.test '^TestGPUDecodeMatchesReference$/^mma$' gpu/kernels
tst 200 backend1 backend.test '^(TestMixQuantExperts|TestMixExperts|TestQuantLinearQ6DEC|TestQuantLinearDEC|TestQuantLinearGroupDEC)$' backend/gpu
wait; t tests; snap
timeout 150 ./bitdecode bench attn --device cuda --kv fp16,int8,int4,int4:kt128,int2,k4v2 --grid 1x8192,1x32768,1x131072,16x32768,32x8192,8x32768,55x32768,128x8192 > $R/attn.log 2>&1; echo "rc=$?" >> $R/attn.log; t attn; snap
timeout 120 ./bitdecode bench model --ctx 1k,32k,128k --kv fp16,int4,int2 --batch 1 --steps 32 > $R/b1.log 2>&1; echo "rc=$?" >> $R/b1.log; t b1; snap
timeout 150 ./bitdecode bench model --ctx 32k --kv fp16,int4,int2 --batch max --steps 16 > $R/max.log 2>&1; echo "rc=$?" >> $R/max.log; t max; snap
for f in $R/*.log; do echo "== $(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(grep -c -- '--- PASS' $f) PASS, $(tail -1 $f)"; done
grep -h "ms\b\|x fp16\|floor" $R/b1.log $R/max.log | tail -30
cat $R/times.txt
