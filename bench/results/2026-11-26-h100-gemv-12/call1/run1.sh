#!/bin/bash
# s12-gemv's call 1 (2026-11-26): kernel tests of the changed code (add_rmsnorm_cluster's early
# loads, the GEMV knobs), bench gemv --variants, bench model B = 1 (1K, 32K; fp16, int4; 32 steps)
# with the v21 knobs by environment alternated twice, then ncu of the default step.
set -o pipefail
T0=$(date +%s)
cd .gpu-gemv; R=$OUT/r; mkdir -p $R
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
cd b; cp run1.sh ncu_step.py $R/
chmod +x bitdecode *.test
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
el() { echo $(( $(date +%s) - T0 )); }
t() { echo "$(date -u +%T) $(el) s $*" >> $R/times.txt; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/times.txt 2>&1; t extracted
timeout 40 ./kernels.test -test.v -test.timeout 40s -test.run '^(TestOpsAddRMSNorm|TestGridDependentKernelsWait|TestGEMVSplitTiers|TestGEMVEarlyKinds|TestGEMVMatchesReference|TestGEMVGroups|TestGEMVDependentLaunch|TestGEMVSwiGLU|TestGEMVRoPE)$' > $R/kernels.log 2>&1; echo "rc=$?" >> $R/kernels.log
t tests; snap
timeout 20 ./bitdecode bench gemv --rows 1 --variants --json $R/variants.json > $R/variants.log 2>&1; echo "rc=$?" >> $R/variants.log
t variants; snap
run() { # name env...
  local v=$1; shift
  env "$@" timeout 20 ./bitdecode bench model --ctx 1k,32k --kv fp16,int4 --batch 1 --steps 32 --no-linears --json $R/b1_${v}.json > $R/b1_${v}.log 2>&1; echo "rc=$?" >> $R/b1_${v}.log
  t "b1 $v"; snap
}
for i in 1 2; do
  run def_$i X=0
  run gu2_$i BITDECODE_GEMV_SPLITS=4,2,2,1
  run qkv4_$i BITDECODE_GEMV_SPLITS=4,4,1,1
  run od2_$i BITDECODE_GEMV_SPLITS=2,2,1,1
  run eplain_$i BITDECODE_GEMV_EARLY=plain
  run erope_$i BITDECODE_GEMV_EARLY=rope
  run eswiglu_$i BITDECODE_GEMV_EARLY=swiglu
  run norm_$i BITDECODE_NORM_EARLY=1
done
LEFT=$(( 185 - $(el) ))
if [ $LEFT -gt 25 ]; then
  timeout $LEFT ncu --graph-profiling node --cache-control none --clock-control none --launch-count 12000 \
    --metrics gpu__time_duration.sum --csv ./bitdecode bench model --ctx 1k,32k --kv fp16,int4 --batch 1 --steps 2 --no-linears > $R/ncu.csv 2> $R/ncu.err
  echo "rc=$?" >> $R/ncu.err; python3 ncu_step.py $R/ncu.csv > $R/ncu.step.txt 2>&1; gzip $R/ncu.csv
  t ncu; snap
fi
t end; snap
grep -H "ms/step\|rc=" $R/b1_*.log | sed 's|.*/b1_||' | head -80
grep -h "^--- FAIL\|^FAIL\|^ok\|^PASS\|rc=\|panic" $R/kernels.log
grep -h "rc=\|ceiling\|\*" $R/variants.log | head -30
grep -h "^## step\|gemv\|add_rms\|rc=" $R/ncu.step.txt $R/ncu.err 2>/dev/null | head -60
cat $R/times.txt
