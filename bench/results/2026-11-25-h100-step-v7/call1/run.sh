#!/bin/bash
# s6-step call: bench model old (main 28a8ab1) vs new (s6-step) alternating twice, then the GPU tests.
set -o pipefail
cd .gpu-step; G=$PWD; R=$OUT/r; mkdir -p $R
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode bitdecode-old *.test
export BITDECODE_GOCODER_DIR=$G/gocoder-23m
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >> $R/times.txt
for i in 1 2; do
  for v in old new; do
    B=./bitdecode; [ $v = old ] && B=./bitdecode-old
    timeout 60 $B bench model --ctx 1k,32k,128k --kv fp16,int4,int2 --steps 128 --no-linears --json $R/model_${v}_$i.json > $R/model_${v}_$i.log 2>&1; echo "rc=$?" >> $R/model_${v}_$i.log
    date -u >> $R/times.txt; snap
  done
done
(timeout 150 ./gpukv.test -test.v -test.timeout 145s > $R/gpukv.log 2>&1; echo "rc=$?" >> $R/gpukv.log) &
(timeout 150 ./backend.test -test.v -test.timeout 145s > $R/backend.log 2>&1; echo "rc=$?" >> $R/backend.log) &
wait; date -u >> $R/times.txt; snap
grep -h "ms/step\|rc=" $R/model_*.log; grep -h "^--- FAIL\|^FAIL\|^ok\|^PASS\|rc=\|graphs on" $R/gpukv.log $R/backend.log
