#!/bin/bash
# s10-qkv's call 1 (2026-11-25): v17, a LinearGroup's weights joined, one cuBLASLt GEMM per group at
# cuBLASLt's batch sizes; tests, bench gemv (joined column), then main's binary (da8fb91) and v17
# alternated twice: max batch at 32K (fp16, int4, int2) and B = 1 at 32K. Run from the repo root,
# .gpu-qkv carried.
set -o pipefail
cd .gpu-qkv; R=$OUT/r; mkdir -p $R; cp qkv.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode* *.test
export BITDECODE_GOCODER_DIR=$PWD/gocoder-23m
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
T=100
tst() { (timeout $T ./$2 -test.v -test.timeout ${T}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) & }
tst kernels kernels.test '^(TestOpsSplitCols|TestOpsElementwise|TestLinear.*)$'
tst backend backend.test '^(TestJoinWeights|TestFoldSwiGLUJoined|TestFoldSwiGLU|TestFoldRoPE|TestLinear.*|TestBatchInvariantLinear|TestFP16PathByShape|TestModelMatchesCPU|TestModelPDLSameBits)$'
tst gpukv gpukv.test '^(TestGPUGraphReplaySameBits|TestGPUBatchInvariantLogits|TestGPUBatchInvariantScheduler|TestGPUCacheGolden)$'
wait; t tests; snap
timeout 40 ./bitdecode bench gemv --rows 15,55,100 > $R/gemv_8b.log 2>&1; echo "rc=$?" >> $R/gemv_8b.log; t gemv8b; snap
timeout 30 ./bitdecode bench gemv --preset llama-3.1-70b --rows 9,15 > $R/gemv_70b.log 2>&1; echo "rc=$?" >> $R/gemv_70b.log; t gemv70b; snap
for i in 1 2; do
  for b in bitdecode-main bitdecode; do
    timeout 50 ./$b bench model --ctx 32k --kv fp16,int4,int2 --batch max --steps 24 --no-linears > $R/max_${b}_$i.log 2>&1; echo "rc=$?" >> $R/max_${b}_$i.log
    timeout 25 ./$b bench model --ctx 32k --kv fp16,int4,int2 --steps 32 --no-linears > $R/b1_${b}_$i.log 2>&1; echo "rc=$?" >> $R/b1_${b}_$i.log
    t "$b $i"; snap
  done
done
t end; snap; rm -rf $R
