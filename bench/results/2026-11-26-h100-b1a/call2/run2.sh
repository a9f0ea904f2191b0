#!/bin/bash
# s11-b1a call 2 (2026-11-26): the tests of v3.4 (b: one fp16/bf16 sequence planned at two CTAs an SM,
# and the fused merge's loads scheduled ahead) and of v3.3 (a: the plan alone), then main against b
# alternated twice: bench attn's one-sequence fp16 grid, bench model at B = 1 (32k: fp16, int4, int2;
# 128k: fp16), then a's grid once and b's with a 3-stage ring, with the time left.
set -o pipefail
TEND=${TEND:-166}
cd .gpu-b1a; R=$OUT/r; mkdir -p $R; cp run2.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
cd b; chmod +x bitdecode-* *.test
export BITDECODE_GOCODER_DIR=$PWD/gocoder-23m  # not carried (over 64 MiB with the binaries): TestGPUCacheGolden skips
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { echo "t=$SECONDS $*" >> $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/gpu.txt 2>&1; t start
T=78
tst() { (timeout $T ./$2 -test.v -test.timeout ${T}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) & }
tst tb_ref kernels-b.test '^TestGPUDecodeMatchesReference$/^wgmma$'
tst tb_long kernels-b.test '^(TestGPUDecodeLong|TestWGMMAPlanCTAs|TestSplitBlocks)$'
tst ta_ref kernels-a.test '^(TestGPUDecodeMatchesReference|TestGPUDecodeLong)$/^wgmma$'
tst tb_gpukv gpukv-b.test '^(TestGPUBatchInvariantLogits|TestGPUGraphReplaySameBits|TestGPUCacheBatchInvariant)$'
wait; t tests; snap
last=0
fits() { [ $((SECONDS + last)) -lt $TEND ] || { echo "skip $1 t=$SECONDS" >> $R/skipped.txt; return 1; }; }
step() { # name binary env args...
  local n=$1 b=$2 e=$3; shift 3; fits $n || return 0
  local s=$SECONDS
  env $e timeout $((TEND + 8 - SECONDS)) ./bitdecode-$b "$@" --json $R/$n.json > $R/$n.md 2> $R/$n.log; echo "rc=$? t=$SECONDS env=$e" >> $R/$n.log
  last=$((SECONDS - s)); t $n; snap
}
A="bench attn --device cuda --kv fp16 --grid 1x1024,1x8192,1x32768,1x131072"
M32="bench model --ctx 32k --kv fp16,int4,int2 --batch 1 --steps 32 --no-linears"
M128="bench model --ctx 128k --kv fp16 --batch 1 --steps 32 --no-linears"
for i in 1 2; do
  step attn_main$i main X=0 $A; step attn_b$i b BITDECODE_PTXAS_VERBOSE=$((i == 1)) $A
done
for i in 1 2; do step m32_main$i main X=0 $M32; step m32_b$i b X=0 $M32; done
for i in 1 2; do step m128_main$i main X=0 $M128; step m128_b$i b X=0 $M128; done
step attn_a a X=0 $A
step attn_b_st3 b BITDECODE_WGMMA_STAGES=3 $A
t end; snap
grep -h -- '^--- FAIL\|^ok\|^FAIL\|^PASS\|rc=\|panic' $R/t*.log | head -20
grep -H "^| auto" $R/attn_*.md | cut -c1-150
grep -h "ms/step" $R/m*.log $R/m*.md 2>/dev/null | head -24
grep -h "decode_wgmma\|spill\|registers" $R/attn_b1.log | head -8
cat $R/times.txt $R/skipped.txt 2>/dev/null
