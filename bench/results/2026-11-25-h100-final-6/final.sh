#!/bin/bash
# Lead's final call, session 5 (2026-11-25): merged main's GPU tests, the step table, max batch,
# the low-bit attention grid and serving throughput. Run from the repo root with .gpu/ carried.
set -o pipefail
cd .gpu; G=$PWD; R=$OUT/r; mkdir -p $R
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode servebench *.test
export BITDECODE_GOCODER_DIR=$G/gocoder-23m
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >> $R/times.txt
# Phase A: correctness of the merged tree (in parallel), and eval ppl on gocoder-23m.
T=170
(timeout $T ./gpukv.test -test.v -test.timeout ${T}s -test.run '^(TestGPUCacheGolden|TestGPUCacheMatchesReference|TestGPUBatchInvariant.*|TestGPUGraphReplaySameBits|TestGPUPlaneScheduler|TestGPUPlaneRetierMatchesPolicy)$' > $R/gpukv.log 2>&1; echo "rc=$?" >> $R/gpukv.log) &
(timeout $T ./gpukv.test -test.v -test.timeout ${T}s -test.run '^(TestGPUPlaneCacheGolden|TestGPUPlaneCacheMatchesReference)$' > $R/gpukv_planes.log 2>&1; echo "rc=$?" >> $R/gpukv_planes.log) &
(timeout $T ./backend.test -test.v -test.timeout ${T}s -test.run '^(TestModelMatchesCPU|TestModelPDLSameBits|TestModelDECMatchesCPU|TestQueuedUploads|TestAddRMSNorm)$' > $R/backend.log 2>&1; echo "rc=$?" >> $R/backend.log) &
(timeout $T ./kernels.test -test.v -test.timeout ${T}s -test.run '^TestGPUDecodeMatchesReference$/^mma$' > $R/kernels_decode.log 2>&1; echo "rc=$?" >> $R/kernels_decode.log) &
(timeout $T ./kernels.test -test.v -test.timeout ${T}s -test.run '^(TestGPUDecodeLong|TestOps.*)$' > $R/kernels_long.log 2>&1; echo "rc=$?" >> $R/kernels_long.log) &
if [ -n "$PLANES" ]; then
(timeout $T ./kernels.test -test.v -test.timeout ${T}s -test.run "$PLANES" > $R/kernels_planes.log 2>&1; echo "rc=$?" >> $R/kernels_planes.log) &
fi
(timeout $T ./bitdecode eval ppl --device cuda --model gocoder-23m --file gocoder-23m/heldout.txt --ctx 4096 --windows 2 --chunk 16 --reuse-gap 1024 --kv fp16,int4,int2,k4v2 --json $R/eval.json > $R/eval.md 2> $R/eval.err; echo "rc=$?" >> $R/eval.err) &
wait; t phaseA; snap
# Phase B: the step table (B = 1), max batch, the attention grid, serving.
timeout 80 ./bitdecode bench model --ctx 1k,32k,128k --kv fp16,int4,int2 --steps 64 --no-linears --json $R/model_b1.json > $R/model_b1.log 2>&1; echo "rc=$?" >> $R/model_b1.log
t model_b1; snap
timeout 90 ./bitdecode bench model --ctx 32k --kv fp16,int4,int2 --batch max --steps 16 --no-linears --json $R/model_max.json > $R/model_max.log 2>&1; echo "rc=$?" >> $R/model_max.log
t model_max; snap
timeout 120 ./bitdecode bench attn --device cuda --kv int4,int4:kt128,int2,k4v2 --grid 1x8192,1x32768,1x131072,8x32768,16x32768,32x8192,64x8192,128x8192 --json $R/attn.json > $R/attn.md 2> $R/attn.err; echo "rc=$?" >> $R/attn.err
t attn; snap
C=64 P=3072 N=512 G=$G bash serve.sh; t serve; snap
timeout 60 ./bitdecode bench model --ctx 32k --batch 1 --no-linears --kv bw:h100,bw:m100:w0:s0,bw:h20:m40:l40 --json $R/model_bw.json > $R/model_bw.log 2>&1; echo "rc=$?" >> $R/model_bw.log
t model_bw; snap
