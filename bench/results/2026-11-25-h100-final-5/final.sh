#!/bin/bash
# Lead's final call, session 4 (2026-11-25): merged main's GPU tests, the step table, bw rows, serving throughput.
set -o pipefail
cd .gpu; G=$PWD; R=$OUT/r; mkdir -p $R
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode servebench *.test
export BITDECODE_GOCODER_DIR=$G/gocoder-23m
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >> $R/times.txt
# Phase A: correctness of the merged tree (in parallel), and eval ppl of bw on gocoder-23m.
(timeout 150 ./gpukv.test -test.v -test.timeout 145s -test.run '^(TestGPUCacheGolden|TestGPUCacheMatchesReference|TestGPUBatchInvariant.*|TestGPUPlaneScheduler|TestGPUPlaneCacheGolden|TestGPUPlaneCacheMatchesReference|TestGPUPlaneRetierMatchesPolicy)$' > $R/gpukv.log 2>&1; echo "rc=$?" >> $R/gpukv.log) &
(timeout 150 ./backend.test -test.v -test.timeout 145s -test.run '^(TestModelMatchesCPU|TestModelPDLSameBits|TestModelDECMatchesCPU)$' > $R/backend.log 2>&1; echo "rc=$?" >> $R/backend.log) &
(timeout 150 ./kernels.test -test.v -test.timeout 145s -test.run '^TestGEMVQDECMatchesSerial$' > $R/kernels_dec.log 2>&1; echo "rc=$?" >> $R/kernels_dec.log) &
(timeout 150 ./kernels.test -test.v -test.timeout 145s -test.run '^TestGPUDecodeMatchesReference$/^mma$' > $R/kernels_decode.log 2>&1; echo "rc=$?" >> $R/kernels_decode.log) &
(timeout 150 ./bitdecode eval ppl --device cuda --model gocoder-23m --file gocoder-23m/heldout.txt --ctx 4096 --windows 2 --chunk 16 --reuse-gap 1024 --kv fp16,int4,bw:h100,bw:m100:w0:s0,bw:h20:m40:l40 --json $R/eval.json > $R/eval.md 2> $R/eval.err; echo "rc=$?" >> $R/eval.err) &
wait; date -u >> $R/times.txt; snap
# Phase B: the step table (B = 1, with a host CPU profile of the fp16 rows), then serving, then max batch and bw rows.
BITDECODE_CPUPROFILE=$R/b1.prof timeout 70 ./bitdecode bench model --ctx 32k,128k --kv fp16,int4,int2 --steps 64 --no-linears --json $R/model_b1.json > $R/model_b1.log 2>&1; echo "rc=$?" >> $R/model_b1.log
date -u >> $R/times.txt; snap
C=64 P=3072 N=512 G=$G bash serve.sh; date -u >> $R/times.txt; snap
timeout 90 ./bitdecode bench model --ctx 32k --kv fp16,int4,int2 --batch max --steps 16 --no-linears --json $R/model_max.json > $R/model_max.log 2>&1; echo "rc=$?" >> $R/model_max.log
date -u >> $R/times.txt; snap
timeout 50 ./bitdecode bench model --ctx 32k --batch 1 --no-linears --kv bw:h100,bw:m100:w0:s0,bw:h20:m40:l40 --json $R/model_bw.json > $R/model_bw.log 2>&1; echo "rc=$?" >> $R/model_bw.log
date -u >> $R/times.txt; snap
