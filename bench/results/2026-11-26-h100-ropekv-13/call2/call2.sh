#!/bin/bash
# s13-ropekv call 2 (2026-11-26): v24b (the queue counts the append folds toward its segments, so
# the step's graphs stay where they were; kv_append_rope's RoPE table before its dependency wait):
# the GPU tests it touches, then BITDECODE_NO_ROPE_APPEND alternated three times at max batch
# (fp16, int4, int2 at 32K), B = 1 once each, and ncu of the fused kernel at int4 max batch.
# Run from the repo root with .gpu-ropekv carried.
set -o pipefail
T0=$(date +%s)
cd .gpu-ropekv; R=$OUT/r; mkdir -p $R; cp call2.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
cd b; chmod +x bitdecode *.test
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { echo "$(date -u +%T) $(( $(date +%s) - T0 )) s $*" >> $R/times.txt; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/times.txt 2>&1; t extracted
tst() { local bin=$1 log=$2 re=$3; shift 3; timeout 62 ./$bin -test.v -test.timeout 60s -test.run "$re" "$@" > $R/$log.log 2>&1; echo "rc=$?" >> $R/$log.log; }
tst kernels.test kernels '^(TestKVAppendRoPE|TestOpsRoPECols)$' &
(tst gpu.test backend_fold '^TestFoldRoPEAppend$'; tst gpu.test backend_join '^(TestFoldHalfAndRoPEJoined|TestEnqueueOutHalf|TestEnqueueOutWith|TestParseOptions)$') &
tst gpukv.test gpukv_ropekv '^TestGPURoPEAppendSameBits$' &
tst gpukv.test gpukv_graph '^(TestGPUGraphReplaySameBits|TestGPUBatchInvariantLogits)$' &
wait; t tests; snap
M="bench model --ctx 32k --kv fp16,int4,int2 --no-linears"
for i in 1 2 3; do
  for k in 0 1; do
    BITDECODE_NO_ROPE_APPEND=$k timeout 40 ./bitdecode $M --batch max --steps 16 --json $R/max_k${k}_$i.json > $R/max_k${k}_$i.log 2>&1; echo "rc=$?" >> $R/max_k${k}_$i.log
    t "max knob=$k $i"; snap
  done
done
for k in 0 1; do
  BITDECODE_NO_ROPE_APPEND=$k timeout 25 ./bitdecode $M --batch 1 --steps 32 --json $R/b1_k$k.json > $R/b1_k$k.log 2>&1; echo "rc=$?" >> $R/b1_k$k.log
  t "b1 knob=$k"; snap
done
timeout 28 ncu --graph-profiling node --cache-control none --clock-control none --kernel-name regex:'kv_append|rope_cols' --launch-skip 64 --launch-count 8 --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum --csv ./bitdecode bench model --ctx 32k --kv int4 --batch max --steps 2 --no-linears > $R/ncu_k0.csv 2>&1; echo "rc=$?" >> $R/ncu_k0.csv
t end; snap
grep -h "^--- FAIL\|^FAIL\|^ok\|^PASS\|rc=\|panic" $R/*.log | sort | uniq -c
for f in $R/max_*.log $R/b1_*.log; do echo "== $f"; grep -h "ms/step\|rc=\|CUDA graphs" $f; done
cat $R/times.txt
