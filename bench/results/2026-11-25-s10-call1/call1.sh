#!/bin/bash
# Lead's first call, session 10 (2026-11-25): the merged tree at da8fb91 on the GPU that comes.
# (a) every GPU test session 9 touched plus v16's (the decode reference on wgmma at its new split
# counts) and the review's LinearGroup/groupKey mends; (b) v16's A/B against v15's binary
# (ebbd89a): the fp16/bf16 attention grid and fp16 at max batch, alternated; (c) the B = 1 step
# table and max batch; (d) on an H200 the attention grid of issue #19 item 4.
# Run from the repo root with .gpu/ carried (bundle.tar.xz: the binaries; gocoder-23m left out, over
# the 64 MiB a call carries, so TestModelMatchesCPU skips here and runs in the final call).
set -o pipefail
cd .gpu; G=$PWD; R=$OUT/r; mkdir -p $R; cp call1.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode* *.test
export BITDECODE_GOCODER_DIR=$G/gocoder-23m
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
T=170
tst() { # name binary regexp [extra flags]
  (timeout $T ./$2 -test.v -test.timeout ${T}s -test.run "$3" $4 > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) &
}
D='^TestGEMVQDECMatchesSerial$/'
tst gpukv gpukv.test '^(TestGPUCacheGolden|TestGPUCacheMatchesReference|TestGPUBatchInvariant.*|TestGPUGraphReplaySameBits|TestGPUPerLayerFormats|TestGPUScheduler|TestLiveBound)$'
tst gpukv_planes gpukv.test '^(TestGPUPlaneCacheGolden|TestGPUPlaneCacheMatchesReference|TestGPUPlaneSampledMassMatchesCPU|TestGPUPlaneRetierMatchesPolicy|TestGPUPlaneScheduler|TestNearTieSwap)$'
tst backend backend.test '^(TestModelMatchesCPU|TestModelPDLSameBits|TestModelDECMatchesCPU|TestQueuedUploads|TestAddRMSNorm|TestLinearGroup|TestBatchInvariantLinear|TestQuantLinearGroupDEC|TestQuantLinearDEC|TestFoldSwiGLU|TestFoldRoPE|TestRoPEQK|TestElementwise|TestLinearGraphReplay|TestFP16PathByShape)$'
tst kernels_decode kernels.test '^(TestGPUDecodeMatchesReference|TestSplitBlocks)$'
tst kernels_long kernels.test '^(TestGPUDecodeLong|TestOps.*|TestKVAppendRot|TestGEMVSwiGLU|TestGEMVRoPE|TestGEMVGroups|TestGEMVMatchesReference|TestGEMVDependentLaunch)$'
tst kernels_dec kernels.test "${D}-N4096-" -test.count=2
wait; t tests; snap
G16=2x32768,4x32768,8x32768,15x32768,16x32768,16x8192,32x8192,48x8192,64x8192,128x8192
for b in bitdecode-main bitdecode; do
  timeout 40 ./$b bench attn --device cuda --kv fp16,bf16 --grid $G16 > $R/attn16_$b.log 2>&1; echo "rc=$?" >> $R/attn16_$b.log
done
t attn16; snap
for i in 1 2; do for b in bitdecode-main bitdecode; do
  timeout 25 ./$b bench model --ctx 32k --kv fp16 --batch max --steps 24 --no-linears 2>&1 | grep -E "ms/step|rror" >> $R/maxfp16_$b.log
done; done
t maxfp16; snap
timeout 110 ./bitdecode bench model --ctx 1k,32k,128k --kv fp16,int4,int2 --steps 64 --no-linears --json $R/model_b1.json > $R/model_b1.log 2>&1; echo "rc=$?" >> $R/model_b1.log
t model_b1; snap
timeout 90 ./bitdecode bench model --ctx 32k --kv fp16,int4,int2 --batch max --steps 16 --no-linears --json $R/model_max.json > $R/model_max.log 2>&1; echo "rc=$?" >> $R/model_max.log
t model_max; snap
case "$GPU" in *H200*)
  timeout 150 ./bitdecode bench attn --device cuda --kv fp16,int8,int4,int4:kt128,int2,k4v2 --grid 1x8192,1x32768,1x131072,16x32768,32x8192,128x8192 --json $R/attn.json > $R/attn.md 2> $R/attn.err; echo "rc=$?" >> $R/attn.err
  t attn; snap;;
esac
t end; snap; rm -rf $R
