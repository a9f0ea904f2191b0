#!/bin/bash
# s18-pad call 1: GPU tests of load-time head padding (gpukv: transformers fixtures incl. phi3-d96,
# synthetic families incl. d96/d80 padded, RoPE-append same bits; backend/gpu: gocoder vs CPU),
# then bench model: Phi-3-mini shapes (32 heads x 96, padded to 128) vs the same hidden size as
# 24 heads x 128 (same real parameters and KV bytes as an unpadded 96 would have), base vs new.
set -o pipefail
cd .gpu-pad; G=$PWD; R=$OUT/r; mkdir -p $R
python3 -c "
import lzma,shutil,glob
for f in glob.glob('*.xz'):
    with lzma.open(f) as a, open(f[:-3],'wb') as b: shutil.copyfileobj(a,b)
"
chmod +x bitdecode bitdecode.base *.test
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >> $R/times.txt
export BITDECODE_CACHE_DIR=$G/cache
tst() { local to=$1; shift; (cd $G/$4 && timeout $to $G/$2 -test.v -test.timeout ${to}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) & }
mkdir -p $G/kvcache/gpukv $G/backend/gpu
tst 300 gpukv1 gpukv.test '^(TestGPUTransformers)$' kvcache/gpukv
tst 300 gpukv2 gpukv.test '^(TestGPUSyntheticFamilies)$' kvcache/gpukv
tst 300 gpukv3 gpukv.test '^(TestGPURoPEAppendSameBits)$' kvcache/gpukv
tst 240 backend1 backend.test '^(TestModelMatchesCPU)$' backend/gpu
wait; t tests; snap
for f in $R/*.log; do echo "== $(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(grep -c -- '--- PASS' $f) PASS, $(tail -1 $f)"; done
b() { timeout 75 ./$1 bench model --preset $G/$2 --ctx 1k,16k --kv int4 --weights fp16 --batch 1 --steps 16 --no-linears > $R/$3.log 2>&1; echo "rc=$?" >> $R/$3.log; t $3; }
b bitdecode.base phi3mini phi3-base
b bitdecode phi3mini phi3-new-a
b bitdecode native128 native-new-a
b bitdecode phi3mini phi3-new-b
b bitdecode native128 native-new-b
snap
grep -h -i 'ceiling\|ms\b\|error\|head dim' $R/phi3-*.log $R/native-*.log | head -40
cat $R/times.txt
