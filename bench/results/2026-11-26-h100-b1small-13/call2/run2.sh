#!/bin/bash
# s13-b1small call 2 (2026-11-26): the chosen defaults (both tail folds off, knobs
# BITDECODE_GEMV_NORM / BITDECODE_GEMV_HALF_X) against main (97c35bf, this branch's base) alternated
# twice at B = 1 (1K, 32K, 128K; fp16, int4, int2) and once at max batch (32K); the backend and gpukv
# tests of the final tree; then ncu of the fp16 step (1K, 32K) with both folds on and off, for where
# call 1's loss is (kernels serialized).
set -o pipefail
T0=$(date +%s)
cd .gpu-b1small; R=$OUT/r; mkdir -p $R
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
cd b2; cp run2.sh ncu_step.py $R/
chmod +x bitdecode* *.test
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
el() { echo $(( $(date +%s) - T0 )); }
t() { echo "$(date -u +%T) $(el) s $*" >> $R/times.txt; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/times.txt 2>&1; t extracted
T=45
tst() { (timeout $T ./$2 -test.v -test.timeout ${T}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) & }
tst backend backend.test '^(TestFoldGEMVTail|TestLinearGraphReplay|TestLinearGroup|TestEnqueueOutHalf|TestEnqueueOutWith|TestEarlyNormInputs|TestParseOptions)$'
tst gpukv gpukv.test '^(TestGPUGraphReplaySameBits)$'
wait; t tests; snap
run() { # name binary args, env...
  local v=$1 b=$2 a=$3; shift 3
  env "$@" timeout 40 ./$b bench model $a --no-linears --json $R/b_${v}.json > $R/b_${v}.log 2>&1; echo "rc=$?" >> $R/b_${v}.log
  t "$v"; snap
}
FULL="--batch 1 --ctx 1k,32k,128k --kv fp16,int4,int2 --steps 32"
for i in 1 2; do
  run main_$i bitdecode-main "$FULL" X=0
  run new_$i bitdecode "$FULL" X=0
done
MAX="--batch max --ctx 32k --kv fp16,int4,int2 --steps 16"
[ $(el) -lt 110 ] && run maxmain bitdecode-main "$MAX" X=0
[ $(el) -lt 125 ] && run maxnew bitdecode "$MAX" X=0
nc() { # name ctxs timeout env...
  local v=$1 c=$2 to=$3; shift 3
  env "$@" timeout $to ncu --graph-profiling node --cache-control none --clock-control none --launch-count 4000 \
    --metrics gpu__time_duration.sum --csv ./bitdecode bench model --ctx $c --kv fp16 --batch 1 --steps 2 --no-linears > $R/ncu_$v.csv 2> $R/ncu_$v.err
  echo "rc=$?" >> $R/ncu_$v.err; python3 ncu_step.py $R/ncu_$v.csv > $R/ncu_$v.step.txt 2>&1; gzip $R/ncu_$v.csv
  t ncu_$v; snap
}
[ $(el) -lt 140 ] && nc on 1k,32k 32 BITDECODE_GEMV_NORM=1 BITDECODE_GEMV_HALF_X=1
[ $(el) -lt 170 ] && nc off 1k 22 X=0
t end; snap
grep -H "ms/step\|rc=" $R/b_*.log | sed 's|.*/b_||' | grep -v weights | head -80
grep -h "^--- FAIL\|^--- PASS\|^--- SKIP\|^FAIL\|^ok\|rc=\|panic" $R/backend.log $R/gpukv.log | head -30
grep -h "^## step\|gemv\|add_rms\|f16_to_f32\|decode_wgmma\|rc=" $R/ncu_*.step.txt $R/ncu_*.err 2>/dev/null | head -60
cat $R/times.txt
