#!/bin/bash
# Lead's final call, session 10 (2026-11-25): the merged tree (s10-dec: DEC v6.1; s10-bw: split_mma
# v2.7-v2.8; s10-qkv: v17 joined q|k|v and gate|up; s10-i2: decode_mma v2.12) on the GPU that
# comes: the tests that read gocoder-23m (the helpers' calls carried no checkpoint or ran their own
# branch), the wgmma decode reference at v16's split counts, the joined groups, DEC's late words;
# then the B = 1 step table, the bw rows and max batch of the merged tree.
# Run from the repo root with .gpu/ carried (bundle.tar.xz: binaries and gocoder-23m without
# heldout.txt).
set -o pipefail
cd .gpu; G=$PWD; R=$OUT/r; mkdir -p $R; cp final.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode *.test
export BITDECODE_GOCODER_DIR=$G/gocoder-23m
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
T=110
tst() { # name binary regexp [extra flags]
  (timeout $T ./$2 -test.v -test.timeout ${T}s -test.run "$3" $4 > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) &
}
tst wgmma kernels.test '^TestGPUDecodeMatchesReference$/^wgmma$'
tst kernels kernels.test '^(TestDECFusedLateWords|TestOpsSplitCols|TestGPUDecodeLong)$'
tst dec kernels.test '^TestGEMVQDECMatchesSerial$/-N4096-' -test.count=2
tst backend backend.test '^(TestModelMatchesCPU|TestModelPDLSameBits|TestModelDECMatchesCPU|TestJoinWeights|TestLinearGroup|TestLinearGraphReplay|TestFoldSwiGLUJoined|TestQuantLinearDEC)$'
tst gpukv gpukv.test '^(TestGPUCacheGolden|TestGPUScheduler|TestGPUPerLayerFormats|TestGPUGraphReplaySameBits|TestGPUBatchInvariantLogits|TestGPUBatchInvariantScheduler)$'
tst planes gpukv.test '^(TestGPUPlaneCacheGolden|TestGPUPlaneScheduler|TestGPUPlaneCacheMatchesReference)$'
wait; t tests; snap
timeout 60 ./bitdecode bench model --ctx 1k,32k,128k --kv fp16,int4,int2 --steps 48 --no-linears --json $R/model_b1.json > $R/model_b1.log 2>&1; echo "rc=$?" >> $R/model_b1.log
t model_b1; snap
timeout 30 ./bitdecode bench model --ctx 32k --kv bw:h100,bw:m100:w0:s0,bw:l100:w0:s0 --steps 32 --no-linears --json $R/model_bw.json > $R/model_bw.log 2>&1; echo "rc=$?" >> $R/model_bw.log
t model_bw; snap
timeout 100 ./bitdecode bench model --ctx 32k --kv fp16,int4,int2 --batch max --steps 16 --no-linears --json $R/model_max.json > $R/model_max.log 2>&1; echo "rc=$?" >> $R/model_max.log
t model_max; t end; snap; rm -rf $R
