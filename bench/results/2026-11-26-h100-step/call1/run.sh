#!/bin/bash
# s11-step's call (2026-11-26): v19 (the GEMMs' fp16 input from its producers, RoPE folded into
# q|k|v's split) against main (3868dca): the GPU tests v19 touches, then main and v19 alternated
# twice: bench model --ctx 32k --kv fp16,int4,int2 --batch max --steps 16 --no-linears and the same
# at B = 1 (--steps 32); then ncu per-kernel times of v19's int4 max-batch step with the time left.
# Run from the repo root with .gpu-step carried (bundle.tar.xz: b/ = binaries, gocoder-23m, ncu_step.py).
set -o pipefail
T0=$(date +%s)
cd .gpu-step; R=$OUT/r; mkdir -p $R; cp run.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
cd b; cp ncu_step.py $R/
chmod +x bitdecode* *.test
export BITDECODE_GOCODER_DIR=$PWD/gocoder-23m
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
el() { echo $(( $(date +%s) - T0 )); }
t() { echo "$(date -u +%T) $(el) s $*" >> $R/times.txt; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/times.txt 2>&1; t extracted
T=75
tst() { (timeout $T ./$2 -test.v -test.timeout ${T}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) & }
tst kernels kernels.test '^(TestOpsAddRMSNorm|TestOpsSplitCols|TestOpsRoPECols|TestOpsRoPEQK|TestOpsConvert|TestOpsElementwise|TestOpsBadShapes|TestGEMVRoPE|TestGEMVSwiGLU)$'
tst backend backend.test '^(TestFoldHalfAndRoPEJoined|TestEnqueueOutHalf|TestFoldSwiGLU|TestFoldRoPE|TestFoldSwiGLUJoined|TestJoinWeights|TestLinearGroup|TestLinearGraphReplay|TestBatchInvariantLinear|TestFP16PathByShape|TestAddRMSNorm|TestRoPEQK|TestModelMatchesCPU|TestModelPDLSameBits)$'
tst gpukv gpukv.test '^(TestGPUCacheGolden|TestGPUGraphReplaySameBits|TestGPUBatchInvariantLogits)$'
wait; t tests; snap
for i in 1 2; do
  for b in bitdecode-main bitdecode; do
    timeout 40 ./$b bench model --ctx 32k --kv fp16,int4,int2 --batch max --steps 16 --no-linears --json $R/max_${b}_$i.json > $R/max_${b}_$i.log 2>&1; echo "rc=$?" >> $R/max_${b}_$i.log
    t "max $b $i"; snap
  done
  for b in bitdecode-main bitdecode; do
    timeout 25 ./$b bench model --ctx 32k --kv fp16,int4,int2 --batch 1 --steps 32 --no-linears --json $R/b1_${b}_$i.json > $R/b1_${b}_$i.log 2>&1; echo "rc=$?" >> $R/b1_${b}_$i.log
    t "b1 $b $i"; snap
  done
done
for spec in "int4 max" "fp16 1"; do
  set -- $spec
  LEFT=$(( 185 - $(el) ))
  if [ $LEFT -gt 25 ]; then
    timeout $LEFT ncu --graph-profiling node --cache-control none --clock-control none --launch-count 4000 \
      --metrics gpu__time_duration.sum --csv ./bitdecode bench model --ctx 32k --kv $1 --batch $2 --steps 2 --no-linears > $R/ncu_$1_$2.csv 2> $R/ncu_$1_$2.err
    echo "rc=$?" >> $R/ncu_$1_$2.err; python3 ncu_step.py $R/ncu_$1_$2.csv > $R/ncu_$1_$2.step.txt 2>&1; gzip $R/ncu_$1_$2.csv
    t "ncu $1 $2"; snap
  fi
done
t end; snap
grep -h "ms/step\|rc=" $R/max_*.log $R/b1_*.log | head -40
grep -h "^--- FAIL\|^FAIL\|^ok\|^PASS\|rc=\|panic" $R/kernels.log $R/backend.log $R/gpukv.log
head -30 $R/ncu_*.step.txt 2>/dev/null
cat $R/times.txt
