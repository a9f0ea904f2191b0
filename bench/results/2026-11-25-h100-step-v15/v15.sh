#!/bin/bash
# Lead's call, session 9 (2026-11-25): v15, cuBLASLt for 9-16-row launches of >= 96 MiB of
# weights (gate|up, down, lm_head) instead of linear.cu's narrow kernel, A/B against main's binary;
# DEC v5 re-checked after v6's revert; the linear/graph tests. Run from the repo root, .gpu carried.
set -o pipefail
cd .gpu; G=$PWD; R=$OUT/r; mkdir -p $R; cp v15.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode* *.test
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
T=120
tst() { (timeout $T ./$2 -test.v -test.timeout ${T}s -test.run "$3" $4 > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) & }
D='^TestGEMVQDECMatchesSerial$/'
tst kernels_dec_n4096 kernels.test "${D}-N4096-" -test.count=3
tst kernels_dec_rest kernels.test "${D}-N(14336|1024|256|384)-"
tst kernels_dec_protocol kernels.test '^(TestDECFusedProtocol|TestLinear.*)$'
tst backend backend.test '^(TestLinear.*|TestBatchInvariantLinear|TestQuantLinearGroupDEC|TestQuantLinearDEC|TestFP16PathByShape|TestFold.*)$'
tst gpukv gpukv.test '^(TestGPUGraphReplaySameBits|TestGPUBatchInvariant.*|TestGPUScheduler)$'
wait; t tests; snap
timeout 60 ./bitdecode bench gemv --rows 4,8,9,12,15,16 > $R/gemv.log 2>&1; echo "rc=$?" >> $R/gemv.log; t gemv; snap
for i in 1 2; do
  for b in bitdecode-main bitdecode; do
    timeout 40 ./$b bench model --ctx 32k --kv fp16 --batch max --steps 24 --no-linears > $R/max_${b}_$i.log 2>&1; echo "rc=$?" >> $R/max_${b}_$i.log
    timeout 40 ./$b bench model --ctx 8k --kv fp16,int4 --batch 12 --steps 24 --no-linears > $R/b12_${b}_$i.log 2>&1; echo "rc=$?" >> $R/b12_${b}_$i.log
    timeout 40 ./$b bench model --ctx 8k --kv fp16 --batch 9 --steps 24 --no-linears > $R/b9_${b}_$i.log 2>&1; echo "rc=$?" >> $R/b9_${b}_$i.log
    t "$b $i"; snap
  done
done
t end; snap; rm -rf $R
