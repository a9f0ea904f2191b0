#!/bin/bash
# s4-step device call: unpack, GPU tests, bench model old/new alternating (3 pairs), ncu rmsnorm times.
set -o pipefail
cd "$(dirname "$0")"
L=$OUT/logs; mkdir -p $L
python3 -c "import lzma,tarfile; tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')"
chmod +x bitdecode.* *.test
export BITDECODE_GOCODER_DIR=$PWD/gocoder-23m
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv; } > $L/gpu.txt 2>&1
t0=$(date +%s)
( timeout 90 ./kernels.test -test.run 'TestOps' -test.v > $L/kernels.log 2>&1; echo "rc=$?" >> $L/kernels.log ) &
( timeout 90 ./gpu.test -test.run 'RMSNorm|ModelMatchesCPU|ModelDECMatchesCPU' -test.v > $L/backend.log 2>&1; echo "rc=$?" >> $L/backend.log ) &
( timeout 90 ./gpukv.test -test.run 'TestGPUCacheGolden|TestGPUCacheMatchesReference|TestGPUBatchInvariant|TestGPUCacheBatchInvariant' -test.v > $L/gpukv.log 2>&1; echo "rc=$?" >> $L/gpukv.log ) &
wait
pack() { tar czf $OUT/results.tgz -C $OUT logs; }
pack
echo "tests took $(( $(date +%s) - t0 )) s" >> $L/gpu.txt
for i in 1 2 3; do
  for b in old new; do
    s=$(date +%s)
    timeout 30 ./bitdecode.$b bench model --ctx 1k,32k --kv fp16,int4 --steps 128 --no-linears --json $L/model_${b}_$i.json > $L/model_${b}_$i.log 2>&1
    echo "rc=$? wall $(( $(date +%s) - s )) s" >> $L/model_${b}_$i.log
  done
done
pack
for b in old new; do
  timeout 35 ncu --graph-profiling node --cache-control none --clock-control none \
    --kernel-name regex:'^(rmsnorm|add_rmsnorm)$' --launch-count 140 \
    --metrics gpu__time_duration.sum --csv \
    ./bitdecode.$b bench model --ctx 1k --kv int4 --steps 4 --no-linears > $L/ncu_$b.csv 2> $L/ncu_$b.err
  echo "rc=$?" >> $L/ncu_$b.err
done
pack && rm -rf $L
