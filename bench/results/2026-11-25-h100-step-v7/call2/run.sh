#!/bin/bash
# s6-step call 2: bench model old (main 28a8ab1) / v7b (queued uploads) / new (v7b + cluster add_rmsnorm + q in kv_append)
# alternating twice; the 8-layer kernel chain old vs new (add_rmsnorm's share); then the GPU tests.
set -o pipefail
T0=$(date +%s)
cd .gpu-step; G=$PWD; R=$OUT/r; mkdir -p $R
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode* *.test
export BITDECODE_GOCODER_DIR=$G/gocoder-23m
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >> $R/times.txt
for i in 1 2; do
  for v in old v7b new; do
    B=./bitdecode-$v; [ $v = new ] && B=./bitdecode
    timeout 45 $B bench model --ctx 1k,32k,128k --kv fp16,int4,int2 --steps 128 --no-linears --json $R/model_${v}_$i.json > $R/model_${v}_$i.log 2>&1; echo "rc=$?" >> $R/model_${v}_$i.log
    echo "$v $i $(date -u)" >> $R/times.txt; snap
  done
done
for v in old new; do
  K=./kernels.test; [ $v = old ] && K=./kernels-old.test
  timeout 25 $K -test.run '^$' -test.bench 'DecodeLayersPDL' -test.count 1 > $R/layers_$v.log 2>&1; echo "rc=$?" >> $R/layers_$v.log
  echo "layers $v $(date -u)" >> $R/times.txt; snap
done
LEFT=$(( 262 - ($(date +%s) - T0) )); echo "tests get $LEFT s" >> $R/times.txt
(timeout $LEFT ./gpukv.test -test.v -test.timeout ${LEFT}s > $R/gpukv.log 2>&1; echo "rc=$?" >> $R/gpukv.log) &
(timeout $LEFT ./backend.test -test.v -test.timeout ${LEFT}s > $R/backend.log 2>&1; echo "rc=$?" >> $R/backend.log) &
(timeout $LEFT ./kernels.test -test.v -test.timeout ${LEFT}s -test.run '^(TestOps.*|TestGridDependentKernelsWait|TestGEMVDependentLaunch)$' > $R/kernels.log 2>&1; echo "rc=$?" >> $R/kernels.log) &
wait; date -u >> $R/times.txt; snap
grep -h "ms/step\|rc=" $R/model_*.log | grep -v "^$"; grep -h "us/layer\|Benchmark\|rc=" $R/layers_*.log | head -30
grep -h "^--- FAIL\|^FAIL\|^ok\|^PASS\|rc=\|graphs on\|panic" $R/gpukv.log $R/backend.log $R/kernels.log
