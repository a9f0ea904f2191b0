#!/bin/bash
# s7-step call 1: bench model old (main 7de578c) / v8a (rotations fused) / new (v8a + pinned logits)
# alternating twice; max batch fp16 32K (new); ncu per-kernel times of 1K steps (int4, fp16; new); then the GPU tests.
set -o pipefail
T0=$(date +%s)
cd .gpu-step; G=$PWD; R=$OUT/r; mkdir -p $R; cp run.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode* *.test
export BITDECODE_GOCODER_DIR=$G/gocoder-23m
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; which nsys ncu; } > $R/times.txt 2>&1
for i in 1 2; do
  for v in old v8a new; do
    B=./bitdecode-$v; [ $v = new ] && B=./bitdecode
    timeout 50 $B bench model --ctx 1k,32k,128k --kv fp16,int4,int2 --steps 128 --no-linears --json $R/model_${v}_$i.json > $R/model_${v}_$i.log 2>&1; echo "rc=$?" >> $R/model_${v}_$i.log
    echo "$v $i $(date -u +%T)" >> $R/times.txt; snap
  done
done
timeout 30 ./bitdecode bench model --ctx 32k --kv fp16 --batch max --steps 32 --no-linears --json $R/max_new.json > $R/max_new.log 2>&1; echo "rc=$?" >> $R/max_new.log
echo "max new $(date -u +%T)" >> $R/times.txt; snap
# Per-kernel times of whole steps (ncu, every launch of the run up to 3000; steps split at embedding_f16).
for kv in int4 fp16; do
  timeout 40 ncu --graph-profiling node --cache-control none --clock-control none --launch-count 3000 \
    --metrics gpu__time_duration.sum --csv ./bitdecode bench model --ctx 1k --kv $kv --steps 2 --no-linears > $R/ncu_$kv.csv 2> $R/ncu_$kv.err
  echo "rc=$?" >> $R/ncu_$kv.err; echo "ncu $kv $(date -u +%T)" >> $R/times.txt; snap
done
LEFT=$(( 245 - ($(date +%s) - T0) )); echo "tests get $LEFT s" >> $R/times.txt
(timeout $LEFT ./gpukv.test -test.v -test.timeout ${LEFT}s -test.run '^(TestGPUGraphReplaySameBits|TestGPUCacheGolden|TestGPUBatchInvariant.*|TestGPUCacheBatchInvariant|TestGPUPerLayerFormats|TestGPUPrefixSharing|TestGPUScheduler)$' > $R/gpukv.log 2>&1; echo "rc=$?" >> $R/gpukv.log) &
(timeout $LEFT ./gpukv.test -test.v -test.timeout ${LEFT}s -test.run '^TestGPUCacheMatchesReference$' > $R/gpukv_ref.log 2>&1; echo "rc=$?" >> $R/gpukv_ref.log) &
(timeout $LEFT ./backend.test -test.v -test.timeout ${LEFT}s -test.skip '^(TestModelDECMatchesCPU|TestQuantLinearDEC)$' > $R/backend.log 2>&1; echo "rc=$?" >> $R/backend.log) &
(timeout $LEFT ./kernels.test -test.v -test.timeout ${LEFT}s -test.run '^(TestOps.*|TestKVAppendRot|TestGridDependentKernelsWait|TestGEMVDependentLaunch)$' > $R/kernels.log 2>&1; echo "rc=$?" >> $R/kernels.log) &
wait; date -u >> $R/times.txt; snap
grep -h "ms/step\|rc=" $R/model_*.log $R/max_*.log | grep -v "^$" | head -5
grep -h "^--- FAIL\|^FAIL\|^ok\|^PASS\|rc=\|panic" $R/gpukv.log $R/gpukv_ref.log $R/backend.log $R/kernels.log
cat $R/times.txt
