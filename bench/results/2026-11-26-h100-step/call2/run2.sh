#!/bin/bash
# s11-step's second call (2026-11-26): backend/gpu's tests, each in its own process (call 1's
# TestEnqueueOutHalf failed its op-name check, and every test after it in that process failed to
# open the device: CUDA_ERROR_ILLEGAL_ADDRESS), then ncu per-kernel times of one replayed int4
# 55 x 32K step for v19 and main (3868dca), the fills skipped. Run from the repo root, .gpu-step carried.
set -o pipefail
T0=$(date +%s)
cd .gpu-step; R=$OUT/r; mkdir -p $R; cp run2.sh $R/
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
one() { for n in "$@"; do timeout 60 ./backend.test -test.v -test.timeout 60s -test.run "^$n\$" > $R/backend_$n.log 2>&1; echo "rc=$?" >> $R/backend_$n.log; done; }
one TestEnqueueOutHalf TestFoldHalfAndRoPEJoined TestFoldSwiGLU TestFoldRoPE TestFoldSwiGLUJoined &
one TestJoinWeights TestLinearGroup TestLinearGraphReplay TestFP16PathByShape TestAddRMSNorm TestRoPEQK &
one TestModelMatchesCPU TestModelPDLSameBits TestBatchInvariantLinear &
wait; t tests; snap
for b in bitdecode bitdecode-main; do
  LEFT=$(( 165 - $(el) ))
  if [ $LEFT -gt 30 ]; then
    timeout $LEFT ncu --graph-profiling node --cache-control none --clock-control none --launch-skip 5000 --launch-count 4000 \
      --metrics gpu__time_duration.sum --csv ./$b bench model --ctx 32k --kv int4 --batch max --steps 2 --no-linears > $R/ncu_$b.csv 2> $R/ncu_$b.err
    echo "rc=$?" >> $R/ncu_$b.err; python3 ncu_step.py $R/ncu_$b.csv > $R/ncu_$b.step.txt 2>&1; gzip $R/ncu_$b.csv
    t "ncu $b"; snap
  fi
done
t end; snap
grep -h "^--- FAIL\|^FAIL\|^ok\|^PASS\|rc=\|panic\|ILLEGAL" $R/backend_*.log | sort | uniq -c
grep -l "FAIL\|ILLEGAL" $R/backend_*.log
head -45 $R/ncu_*.step.txt 2>/dev/null
cat $R/times.txt
