#!/bin/bash
# s7-qkv (v9a, the one call): bench model old (main 3c59f14) / new (s7-qkv, grouped gemv.cu) alternating
# twice; the tests v9a touches; then ncu per-kernel times of new's 1K fp16 step with the time left.
set -o pipefail
T0=$(date +%s)
cd .gpu-qkv; G=$PWD; R=$OUT/r; mkdir -p $R; cp run.sh ncu_step.py $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode* *.test
export BITDECODE_GOCODER_DIR=$G/gocoder-23m
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; } > $R/times.txt 2>&1
for i in 1 2; do
  for v in old new; do
    B=./bitdecode-$v; [ $v = new ] && B=./bitdecode
    timeout 40 $B bench model --ctx 1k,32k,128k --kv fp16,int4 --steps 128 --no-linears --json $R/model_${v}_$i.json > $R/model_${v}_$i.log 2>&1; echo "rc=$?" >> $R/model_${v}_$i.log
    echo "$v $i $(date -u +%T)" >> $R/times.txt; snap
  done
done
LEFT=$(( 160 - ($(date +%s) - T0) )); echo "tests get $LEFT s" >> $R/times.txt
(timeout $LEFT ./gpukv.test -test.v -test.timeout ${LEFT}s -test.run '^(TestGPUGraphReplaySameBits|TestGPUCacheGolden|TestGPUBatchInvariant.*)$' > $R/gpukv.log 2>&1; echo "rc=$?" >> $R/gpukv.log) &
(timeout $LEFT ./backend.test -test.v -test.timeout ${LEFT}s -test.run '^(TestModel.*|TestLinear.*|TestBatchInvariantLinear)$' > $R/backend.log 2>&1; echo "rc=$?" >> $R/backend.log) &
(timeout $LEFT ./kernels.test -test.v -test.timeout ${LEFT}s -test.run '^(TestGEMV.*|TestGridDependentKernelsWait)$' > $R/kernels.log 2>&1; echo "rc=$?" >> $R/kernels.log) &
wait; echo "tests done $(date -u +%T)" >> $R/times.txt; snap
LEFT=$(( 183 - ($(date +%s) - T0) ))
if [ $LEFT -gt 20 ]; then
  timeout $LEFT ncu --graph-profiling node --cache-control none --clock-control none --launch-count 3000 \
    --metrics gpu__time_duration.sum --csv ./bitdecode bench model --ctx 1k --kv fp16 --steps 2 --no-linears > $R/ncu_fp16.csv 2> $R/ncu_fp16.err
  echo "rc=$?" >> $R/ncu_fp16.err; python3 ncu_step.py $R/ncu_fp16.csv > $R/ncu_fp16.step.txt 2>&1; gzip $R/ncu_fp16.csv
  echo "ncu fp16 $(date -u +%T)" >> $R/times.txt
fi
snap
grep -h "ms/step\|rc=" $R/model_*.log | head -30
grep -h "^--- FAIL\|^FAIL\|^ok\|^PASS\|rc=\|panic" $R/gpukv.log $R/backend.log $R/kernels.log
head -12 $R/ncu_fp16.step.txt 2>/dev/null
cat $R/times.txt
