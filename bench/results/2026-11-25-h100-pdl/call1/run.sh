#!/bin/bash
# s5-pdl device call 1: unpack, GPU tests with PDL on (and memcheck), then bench model with
# PDL off / on / on+early weights alternating (same binary, BITDECODE_NO_PDL / BITDECODE_PDL_EARLY).
set -o pipefail
cd "$(dirname "$0")"
L=$OUT/logs; mkdir -p $L
python3 -c "import lzma,tarfile; tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('b')"
cd b; chmod +x bitdecode *.test
export BITDECODE_GOCODER_DIR=$PWD/gocoder-23m BITDECODE_CACHE_DIR=$PWD/kcache
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv; } > $L/gpu.txt 2>&1
pack() { tar czf $OUT/results.tgz -C $OUT logs; }
t0=$(date +%s)
( timeout 110 ./cuda.test -test.run 'GridDependent|LaunchConfig|CacheKey|GraphReplay' -test.v > $L/cuda.log 2>&1; echo "rc=$?" >> $L/cuda.log ) &
( timeout 110 ./kernels.test -test.run 'TestOps|TestLinear|TestGEMVMatches|TestGEMVDependent|GridDependent' -test.v > $L/kernels.log 2>&1; echo "rc=$?" >> $L/kernels.log ) &
( timeout 110 ./gpu.test -test.v > $L/backend.log 2>&1; echo "rc=$?" >> $L/backend.log ) &
( timeout 110 ./gpukv.test -test.run 'Invariant|TestGPUCacheGolden|TestGPUCacheMatchesReference|TestGPUPlaneCacheGolden' -test.v > $L/gpukv.log 2>&1; echo "rc=$?" >> $L/gpukv.log ) &
( timeout 110 compute-sanitizer --tool memcheck --error-exitcode 9 ./kernels.test -test.run 'TestGEMVDependentLaunch|TestOpsAddRMSNorm|TestLinearGroups' -test.v > $L/memcheck.log 2>&1; echo "rc=$?" >> $L/memcheck.log ) &
wait
echo "tests took $(( $(date +%s) - t0 )) s" >> $L/gpu.txt
pack
for i in 1 2; do
  for m in off on early; do
    case $m in off) e="BITDECODE_NO_PDL=1";; on) e="BITDECODE_NO_PDL=0";; early) e="BITDECODE_PDL_EARLY=1";; esac
    s=$(date +%s)
    env $e timeout 28 ./bitdecode bench model --ctx 1k,32k,128k --kv fp16,int4,int2 --steps 64 --no-linears --json $L/model_${m}_$i.json > $L/model_${m}_$i.log 2>&1
    echo "rc=$? wall $(( $(date +%s) - s )) s ($e)" >> $L/model_${m}_$i.log
    pack
  done
done
echo "all took $(( $(date +%s) - t0 )) s" >> $L/gpu.txt
pack && rm -rf $L
