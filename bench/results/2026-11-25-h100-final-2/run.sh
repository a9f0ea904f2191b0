#!/bin/bash
# Final validation of merged main (session 2026-11-25 #2): GPU tests of what changed, sanitizer,
# the load test with free greedy decoding against serve --device cuda, bench model.
set -o pipefail
cd "$(dirname "$0")"
L=$OUT/logs; mkdir -p $L
python3 -c "import lzma,tarfile; tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('b')"
cd b; chmod +x bitdecode loadtest *.test
export BITDECODE_GOCODER_DIR=$PWD/gocoder-23m M=$PWD/gocoder-23m
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; } > $L/gpu.txt 2>&1
t0=$(date +%s)
( timeout 240 ./kernels.test -test.run 'TestLinear|TestOps|DEC|GEMVQ' -test.v > $L/kernels.log 2>&1; echo "rc=$?" >> $L/kernels.log ) &
( timeout 240 ./gpu.test -test.v > $L/backend.log 2>&1; echo "rc=$?" >> $L/backend.log ) &
( timeout 240 ./gpukv.test -test.run 'Invariant|TestGPUCacheGolden|TestGPUScheduler|TestGPUPrefixScheduler|TestGPUPlaneCacheGolden|TestGPUPlaneScheduler' -test.v > $L/gpukv.log 2>&1; echo "rc=$?" >> $L/gpukv.log ) &
( timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 ./kernels.test -test.run 'TestOpsHadamard|TestOpsAddRMSNorm|TestOpsRoPEQK|TestLinearGroups|TestLinearRefusesShapes' -test.v > $L/memcheck.log 2>&1; echo "rc=$?" >> $L/memcheck.log ) &
wait
echo "tests took $(( $(date +%s) - t0 )) s" >> $L/gpu.txt
# The load test, free greedy decoding (no forced tokens), serve's default batch-invariant mode.
for kv in int4 bw:h20:m40:l40; do
  mem=15MiB; [ $kv != int4 ] && mem=12MiB
  n=${kv%%:*}
  ./bitdecode serve --device cuda --model $M --kv $kv --kv-memory $mem --max-seqs 16 --ctx-size 2048 --addr 127.0.0.1:18080 > $L/serve_$n.log 2>&1 &
  sp=$!; for i in $(seq 60); do (exec 3<>/dev/tcp/127.0.0.1/18080) 2>/dev/null && break; sleep 1; done
  timeout 120 ./loadtest --url http://127.0.0.1:18080 --n 64 --free --want-preemption > $L/load_$n.txt 2>&1; echo "rc=$?" >> $L/load_$n.txt
  kill $sp; wait $sp
done
echo "load took $(( $(date +%s) - t0 )) s" >> $L/gpu.txt
timeout 100 ./bitdecode bench model --ctx 1k,32k,128k --kv fp16,int4,int2 --steps 64 --no-linears --json $L/model_b1.json > $L/model_b1.log 2>&1; echo "rc=$?" >> $L/model_b1.log
timeout 150 ./bitdecode bench model --ctx 32k --kv fp16,int4,int2 --batch max --steps 16 --no-linears --json $L/model_max.json > $L/model_max.log 2>&1; echo "rc=$?" >> $L/model_max.log
echo "all took $(( $(date +%s) - t0 )) s" >> $L/gpu.txt
cd $OUT && tar czf results.tgz logs && rm -rf logs
