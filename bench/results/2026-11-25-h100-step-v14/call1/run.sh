#!/bin/bash
# s9-fuse (v14a, the one call): bench model old (main b76b90f) / new (s9-fuse: SwiGLU and RoPE folded
# into gemv.cu's epilogue) alternating twice, B = 1; the tests v14a touches in parallel; then ncu
# per-kernel times of new's and old's 1K fp16 step with the time left. Run from the repo root with
# .gpu-fuse/ carried (bundle.tar.xz: the binaries, gocoder-23m, ncu_step.py).
set -o pipefail
T0=$(date +%s)
cd .gpu-fuse; G=$PWD; R=$OUT/r; mkdir -p $R; cp run.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('b')
"
cd b; cp ncu_step.py $R/
chmod +x bitdecode* *.test
export BITDECODE_GOCODER_DIR=$PWD/gocoder-23m
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
el() { echo $(( $(date +%s) - T0 )); }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; echo "extracted $(el) s"; } > $R/times.txt 2>&1
for i in 1 2; do
  for v in old new; do
    B=./bitdecode-$v; [ $v = new ] && B=./bitdecode
    timeout 45 $B bench model --ctx 1k,32k,128k --kv fp16,int4,int2 --steps 64 --no-linears --json $R/model_${v}_$i.json > $R/model_${v}_$i.log 2>&1; echo "rc=$?" >> $R/model_${v}_$i.log
    echo "$v $i $(el) s" >> $R/times.txt; snap
  done
done
LEFT=$(( 215 - $(el) )); [ $LEFT -gt 120 ] && LEFT=120; echo "tests get $LEFT s" >> $R/times.txt
tst() { # name binary regexp
  (timeout $LEFT ./$2 -test.v -test.timeout ${LEFT}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) &
}
tst kernels kernels.test '^(TestGEMVSwiGLU|TestGEMVRoPE|TestGEMVGroups|TestGEMVMatchesReference|TestGEMVDependentLaunch|TestGridDependentKernelsWait|TestOpsRoPEQK|TestOpsElementwise)$'
tst backend backend.test '^(TestFoldSwiGLU|TestFoldRoPE|TestModelMatchesCPU|TestModelPDLSameBits|TestModelDECMatchesCPU|TestLinearGroup|TestRoPEQK|TestElementwise|TestQueuedUploads|TestBatchInvariantLinear)$'
tst gpukv gpukv.test '^(TestGPUGraphReplaySameBits|TestGPUCacheGolden|TestGPUBatchInvariant.*)$'
wait; echo "tests done $(el) s" >> $R/times.txt; snap
for v in new old; do
  B=./bitdecode-$v; [ $v = new ] && B=./bitdecode
  LEFT=$(( 280 - $(el) ))
  if [ $LEFT -gt 20 ]; then
    timeout $LEFT ncu --graph-profiling node --cache-control none --clock-control none --launch-count 3000 \
      --metrics gpu__time_duration.sum --csv $B bench model --ctx 1k --kv fp16 --steps 2 --no-linears > $R/ncu_$v.csv 2> $R/ncu_$v.err
    echo "rc=$?" >> $R/ncu_$v.err; python3 ncu_step.py $R/ncu_$v.csv > $R/ncu_$v.step.txt 2>&1; gzip $R/ncu_$v.csv
    echo "ncu $v $(el) s" >> $R/times.txt; snap
  fi
done
snap
grep -h "ms/step\|rc=" $R/model_*.log | head -60
grep -h "^--- FAIL\|^FAIL\|^ok\|^PASS\|rc=\|panic" $R/kernels.log $R/backend.log $R/gpukv.log
head -14 $R/ncu_*.step.txt 2>/dev/null
cat $R/times.txt
