#!/bin/bash
# v12 (s8-step2, 2026-11-25): cuBLASLt linears with a graph key. One call on nvidia-h100-x1, run from
# the repo root with .gpu-step2/ carried (bundle.tar.xz: main-bitdecode = main 9fd6c55,
# bitdecode = s8-step2, the test binaries from s8-step2, gocoder-23m).
set -o pipefail
cd .gpu-step2; G=$PWD; R=$OUT/r; mkdir -p $R
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode main-bitdecode *.test
export BITDECODE_GOCODER_DIR=$G/gocoder-23m
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >> $R/times.txt
T=70
tst() { # name binary regexp
  (timeout $T ./$2 -test.v -test.timeout ${T}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) &
}
tst cuda cuda.test '^(TestGPUGEMM|TestGPUGEMMGraphReplay)$'
tst backend backend.test '^(TestLinearGraphReplay|TestLinear|TestLinearDeterministic|TestLinearGroup|TestBatchInvariantLinear|TestQuantLinear|TestModelMatchesCPU|TestModelPDLSameBits|TestQueuedUploads)$'
tst gpukv gpukv.test '^(TestGPUGraphReplaySameBits|TestGPUBatchInvariantLogits|TestGPUBatchInvariantScheduler|TestGPUCacheBatchInvariant|TestGPUCacheGolden|TestGPUScheduler)$'
wait; t tests; snap
m() { # name binary kv [env]
  env $4 timeout 45 ./$2 bench model --ctx 32k --kv $3 --batch max --steps 16 --no-linears --json $R/$1.json > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log
  t $1; snap
}
m main_1 main-bitdecode fp16,int4,int2
m new_1 bitdecode fp16,int4,int2
m main_nographs main-bitdecode int4,int2 BITDECODE_NO_GRAPHS=1
m main_2 main-bitdecode int4,int2
m new_2 bitdecode int4,int2
