#!/bin/bash
# s11-b1g's call 1 (2026-11-26): gemv.cu v7 (ring of U loads a lane; RoPE's cos/sin under the loads)
# against main (e2abd39): the GEMV and model tests, bench gemv --variants (new), bench gemv --rows 1
# (main, new), bench model B = 1 at 32K (main, new, new with early weights; twice), then ncu of the
# gemv kernels of both binaries' fp16 32K step with the time left.
set -o pipefail
T0=$(date +%s)
cd .gpu-b1g; R=$OUT/r; mkdir -p $R; cp run1.sh $R/
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
T=60
tst() { (timeout $T ./$2 -test.v -test.timeout ${T}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) & }
tst kernels kernels.test '^(TestGEMV.*|TestGridDependentKernelsWait|TestOpsRoPEQK)$'
tst backend backend.test '^(TestModelMatchesCPU|TestModelPDLSameBits|TestLinearGraphReplay|TestBatchInvariantLinear|TestLinearGroup|TestFoldSwiGLU|TestFoldRoPE|TestFoldSwiGLUJoined)$'
wait; t tests; snap
timeout 40 ./bitdecode bench gemv --rows 1,2 --variants --json $R/variants.json > $R/variants.log 2>&1; echo "rc=$?" >> $R/variants.log
t variants; snap
for b in bitdecode-main bitdecode; do
  timeout 20 ./$b bench gemv --rows 1 --json $R/gemv_$b.json > $R/gemv_$b.log 2>&1; echo "rc=$?" >> $R/gemv_$b.log
  t "gemv $b"; snap
done
for i in 1 2; do
  for v in main new early; do
    b=bitdecode; e=""
    [ $v = main ] && b=bitdecode-main
    [ $v = early ] && e="BITDECODE_PDL_EARLY=1"
    env $e timeout 25 ./$b bench model --ctx 32k --kv fp16,int4,int2 --batch 1 --steps 64 --no-linears --json $R/b1_${v}_$i.json > $R/b1_${v}_$i.log 2>&1; echo "rc=$?" >> $R/b1_${v}_$i.log
    t "b1 $v $i"; snap
  done
done
for b in bitdecode bitdecode-main; do
  LEFT=$(( 172 - $(el) ))
  if [ $LEFT -gt 20 ]; then
    timeout $LEFT ncu --graph-profiling node --cache-control none --clock-control none --launch-count 2000 \
      --metrics gpu__time_duration.sum --csv ./$b bench model --ctx 32k --kv fp16 --batch 1 --steps 2 --no-linears > $R/ncu_$b.csv 2> $R/ncu_$b.err
    echo "rc=$?" >> $R/ncu_$b.err; python3 ncu_step.py $R/ncu_$b.csv > $R/ncu_$b.step.txt 2>&1; gzip $R/ncu_$b.csv
    t "ncu $b"; snap
  fi
done
t end; snap
grep -h "ms/step\|rc=" $R/b1_*.log | head -40
grep -h "^--- FAIL\|^FAIL\|^ok\|^PASS\|rc=\|panic" $R/kernels.log $R/backend.log
grep -h "\*\|rc=\|ceiling" $R/variants.log | head -30
grep -h "gemv.cu" $R/gemv_*.log
head -8 $R/ncu_*.step.txt 2>/dev/null
cat $R/times.txt
