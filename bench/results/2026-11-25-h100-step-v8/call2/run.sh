#!/bin/bash
# s7-step call 2: TestKVAppendRot (its one-token shape fixed) and TestOpsHadamard; fp16 32K at max batch,
# old (main 7de578c) and new (s7-step: v8a, v8b reverted) alternating twice.
set -o pipefail
cd .gpu-step; R=$OUT/r2; mkdir -p $R; cp run.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode* *.test
snap() { (cd $OUT && tar czf results.tmp r2 && mv results.tmp results.tgz); }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; } > $R/times.txt 2>&1
timeout 60 ./kernels.test -test.v -test.run '^(TestKVAppendRot|TestOpsHadamard|TestGridDependentKernelsWait)$' > $R/kernels.log 2>&1; echo "rc=$?" >> $R/kernels.log
echo "tests $(date -u +%T)" >> $R/times.txt; snap
for i in 1 2; do
  for v in old new; do
    B=./bitdecode-$v; [ $v = new ] && B=./bitdecode
    timeout 40 $B bench model --ctx 32k --kv fp16 --batch max --steps 32 --no-linears --json $R/max_${v}_$i.json > $R/max_${v}_$i.log 2>&1; echo "rc=$?" >> $R/max_${v}_$i.log
    echo "max $v $i $(date -u +%T)" >> $R/times.txt; snap
  done
done
grep -h "^--- \|rc=" $R/kernels.log; grep -h "B 15\|B 1[0-9]:\|rc=" $R/max_*.log; cat $R/times.txt
