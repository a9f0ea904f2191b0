#!/bin/bash
# s10-lt's call (2026-11-25): v18 (cuBLASLt's algorithms timed once per shape and 16-row bucket,
# split-K variants among them) against main (f193bef): tests, bench gemv --algos at 15/55/100 rows,
# max batch at 32K alternated twice, B = 1 at 32K twice. Run from the repo root, .gpu-lt carried.
set -o pipefail
cd .gpu-lt; R=$OUT/r; mkdir -p $R; cp lt.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x b/*
export BITDECODE_GOCODER_DIR=$PWD/gocoder-23m
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
T=80
tst() { (timeout $T ./b/$2 -test.v -test.timeout ${T}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) & }
tst cuda cuda.test '^(TestGPUGEMM.*|TestGEMMTuneBucket|TestLinearLayoutMapping)$'
tst backend backend.test '^(TestJoinWeights|TestFoldSwiGLUJoined|TestLinear.*|TestBatchInvariantLinear|TestFP16PathByShape|TestModelMatchesCPU|TestModelPDLSameBits)$'
tst gpukv gpukv.test '^(TestGPUGraphReplaySameBits|TestGPUBatchInvariantLogits)$'
wait; t tests; snap
timeout 40 ./b/bitdecode bench gemv --rows 15,55,100 --algos --json $R/gemv.json > $R/gemv_8b.log 2>&1; echo "rc=$?" >> $R/gemv_8b.log; t gemv; snap
for i in 1 2; do
  for b in bitdecode-main bitdecode; do
    timeout 40 ./b/$b bench model --ctx 32k --kv fp16,int4,int2 --batch max --steps 16 --no-linears > $R/max_${b}_$i.log 2>&1; echo "rc=$?" >> $R/max_${b}_$i.log
    t "max $b $i"; snap
  done
  for b in bitdecode-main bitdecode; do
    timeout 20 ./b/$b bench model --ctx 32k --kv fp16,int4,int2 --batch 1 --steps 32 --no-linears > $R/b1_${b}_$i.log 2>&1; echo "rc=$?" >> $R/b1_${b}_$i.log
    t "b1 $b $i"; snap
  done
done
t end; snap; rm -rf $R
