#!/bin/bash
# s2-fuse device call 2: unpack, GPU tests, bench model old/new alternating (4 pairs), ncu kernel times.
set -o pipefail
cd "$(dirname "$0")"
L=/tmp/fuse-logs; mkdir -p $L
python3 -c "import lzma,tarfile; tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')"
chmod +x bitdecode.* *.test
export BITDECODE_GOCODER_DIR=$PWD/gocoder-23m
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv; } > $L/gpu.txt 2>&1
t0=$(date +%s)
( timeout 120 ./kernels.test -test.run 'TestOps' -test.v > $L/kernels.log 2>&1; echo "rc=$?" >> $L/kernels.log ) &
( timeout 120 ./gpu.test -test.run 'AddRMSNorm|RoPEQK|RMSNorm|RoPE|Elementwise|ModelMatchesCPU|ModelDECMatchesCPU' -test.v > $L/backend.log 2>&1; echo "rc=$?" >> $L/backend.log ) &
( timeout 120 ./gpukv.test -test.run 'TestGPUCacheGolden|TestGPUPlaneCacheGolden|TestGPUCacheMatchesReference' -test.v > $L/gpukv.log 2>&1; echo "rc=$?" >> $L/gpukv.log ) &
wait
echo "tests took $(( $(date +%s) - t0 )) s" >> $L/gpu.txt
for i in 1 2 3 4; do
  for b in main fuse; do
    s=$(date +%s)
    timeout 60 ./bitdecode.$b bench model --ctx 1k,32k --kv fp16,int4 --steps 128 --no-linears --json $L/model_${b}_$i.json > $L/model_${b}_$i.log 2>&1
    echo "rc=$? wall $(( $(date +%s) - s )) s" >> $L/model_${b}_$i.log
  done
done
for b in main fuse; do
  timeout 70 ncu --graph-profiling node --cache-control none --clock-control none \
    --kernel-name regex:'^(add|rmsnorm|rope|add_rmsnorm|rope_qk|swiglu|f32_to_f16|f16_to_f32)$' \
    --launch-skip 600 --launch-count 120 --metrics gpu__time_duration.sum --csv \
    ./bitdecode.$b bench model --ctx 1k --kv int4 --steps 4 --no-linears > $L/ncu_$b.csv 2> $L/ncu_$b.err
  echo "rc=$?" >> $L/ncu_$b.err
done
