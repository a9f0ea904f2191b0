#!/bin/bash
# s10-qkv's call 2 (2026-11-25): v17b (a joined group's 48 MiB threshold at 9-16 rows) and the
# variant with only q|k|v joined (gate|up apart), A/B against main (da8fb91): tests, bench gemv at
# 9-16 rows, max batch at 32K alternated twice, 12 x 8K. Run from the repo root, .gpu-qkv carried.
set -o pipefail
cd .gpu-qkv; R=$OUT/r; mkdir -p $R; cp qkv2.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode* *.test
export BITDECODE_GOCODER_DIR=$PWD/gocoder-23m
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
T=90
tst() { (timeout $T ./$2 -test.v -test.timeout ${T}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) & }
tst backend backend.test '^(TestJoinWeights|TestFoldSwiGLUJoined|TestFoldSwiGLU|TestFoldRoPE|TestLinear.*|TestBatchInvariantLinear|TestFP16PathByShape|TestModelMatchesCPU|TestModelPDLSameBits)$'
tst gpukv gpukv.test '^(TestGPUGraphReplaySameBits|TestGPUBatchInvariantLogits|TestGPUBatchInvariantScheduler)$'
wait; t tests; snap
timeout 30 ./bitdecode bench gemv --rows 9,12,16 > $R/gemv_8b.log 2>&1; echo "rc=$?" >> $R/gemv_8b.log; t gemv; snap
for i in 1 2; do
  for b in bitdecode-main bitdecode bitdecode-qkvonly; do
    timeout 45 ./$b bench model --ctx 32k --kv fp16,int4,int2 --batch max --steps 24 --no-linears > $R/max_${b}_$i.log 2>&1; echo "rc=$?" >> $R/max_${b}_$i.log
    t "$b $i"; snap
  done
  for b in bitdecode-main bitdecode; do
    timeout 25 ./$b bench model --ctx 8k --kv fp16,int4 --batch 12 --steps 24 --no-linears > $R/b12_${b}_$i.log 2>&1; echo "rc=$?" >> $R/b12_${b}_$i.log
    t "b12 $b $i"; snap
  done
done
t end; snap; rm -rf $R
