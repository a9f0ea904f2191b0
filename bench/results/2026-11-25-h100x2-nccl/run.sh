#!/bin/bash
# NCCL tensor-parallel tests and the all-reduce benchmark (issue #23), on the x2 machine.
set -o pipefail
cd "$(dirname "$0")"
L=$OUT/logs; mkdir -p $L
{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nvidia-smi topo -m; env | grep -E '^NCCL_|NVSHMEM|TORCH_SYMM' ; } > $L/machine.txt 2>&1
NCCLLIB=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib', 'libnccl.so.2'))" 2>/dev/null)
[ -f "$NCCLLIB" ] || NCCLLIB=$(find / -name libnccl.so.2 2>/dev/null | head -1)
echo "libnccl: $NCCLLIB" >> $L/machine.txt
python3 -m pip show nvidia-nccl-cu13 2>/dev/null | head -2 >> $L/machine.txt
export BITDECODE_LIBNCCL=$NCCLLIB BITDECODE_CACHE_DIR=/tmp/bdcache
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV timeout 20 ./cuda.test -test.v -test.run 'NCCL|ParseConfig' -test.timeout 18s > $L/cuda.log 2>&1; echo "cuda rc=$?" >> $L/rc.txt
timeout 30 ./gpu.test -test.v -test.short -test.run 'TestLinear$|TestElementwise|TestErrors|TestClose|TestModelMatchesCPU|TestPoolReuse' -test.timeout 28s > $L/backend.log 2>&1; echo "backend rc=$?" >> $L/rc.txt
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV timeout 70 ./gpu.test -test.v -test.run 'TestGroup(AllReduce|OneRank|GraphReplay|BadArguments|TooFewGPUs|ArgumentsWithoutGPU)$' -test.timeout 65s > $L/group.log 2>&1; echo "group rc=$?" >> $L/rc.txt
timeout 80 ./gpu.test -test.run '^$' -test.bench AllReduce -test.benchtime 1s -test.count 3 -test.timeout 75s > $L/bench.log 2>&1; echo "bench rc=$?" >> $L/rc.txt
timeout 30 ./gpu.test -test.v -test.run TestGroupTimeoutAborts -test.timeout 28s > $L/timeout.log 2>&1; echo "timeout rc=$?" >> $L/rc.txt
cat $L/rc.txt; grep -E '^(--- |ok|FAIL|PASS|Benchmark)' $L/*.log | head -80
cd $OUT && tar czf results.tgz logs && rm -rf logs
