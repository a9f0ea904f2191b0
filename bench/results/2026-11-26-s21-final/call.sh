#!/bin/bash
# Session 21, the lead's call on the merged tree (main fbe62ee): the GPU tests the session's merges
# touch (linear.cu v5: pair kernels, early loads, persistent grids in the batch-invariant mode;
# decode_mma v2.32's int2 one-SM tile; gpu/kernels test helpers; tune dec's list charge), then the
# batch-invariant step against the fast one at B = 1, and `tune dec` on this tree with its 5% step
# against DEC off (three pairs).
set -o pipefail
cd .gpu; G=$PWD; R=$OUT/r; mkdir -p $R
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('a.tar.xz')).extractall('.')
"
chmod +x bitdecode *.test
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >> $R/times.txt
export BITDECODE_CACHE_DIR=$G/cache
mkdir -p $G/kvcache/gpukv $G/gpu/kernels $G/backend/gpu
tst() { local to=$1; shift; (cd $G/$4 && timeout $to $G/$2 -test.v -test.timeout ${to}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) & }
tst 170 klin kernels.test '^(TestLinear.*|TestGEMVRoPE|TestGEMVSwiGLU|TestGridDependentKernelsWait)$' gpu/kernels
tst 170 kdec kernels.test '^(TestGPUDecodeOneSMTile|TestGPUDecodeOneSplitMatchesCombine|TestOpsAddRMSNormSel|TestOpsOutSel|TestOpsGLUColsSel)$' gpu/kernels
tst 170 bl backend.test '^(TestLinear.*|TestFold.*|TestEarlyNormInputs.*|TestBatchInvariantLinear|TestJoinWeights|TestQ6DECNormSelect)$' backend/gpu
tst 170 gk1 gpukv.test '^(TestGPUBatchInvariantLogits|TestGPUBatchInvariantScheduler|TestGPUCacheBatchInvariant)$' kvcache/gpukv
tst 170 gk2 gpukv.test '^(TestGPUGraphReplaySameBits|TestGPUCacheLengthBuckets|TestGPUModelDECLists)$' kvcache/gpukv
(timeout 170 ./bitdecode bench model --ctx 1k --kv int4 --no-linears --steps 1 --weights int4 --dec-k 8 > $R/warm.log 2>&1) &
wait; t tests; snap
B1="--ctx 1k,8k --kv int4,fp16 --no-linears --cache-len 128k --steps 32"
for rep in 1 2; do
  timeout 45 ./bitdecode bench model $B1 > $R/fast_$rep.log 2>&1; t fast$rep
  BITDECODE_BATCH_INVARIANT=1 timeout 45 ./bitdecode bench model $B1 > $R/bi_$rep.log 2>&1; t bi$rep
done; snap
export BITDECODE_DEC_RESIDUAL=device
mkdir -p $R/tune
timeout 60 ./bitdecode tune dec --shapes llama-3.1-8b --weights int4 --residual-at device --slowdown 5%,10% --runs 20 --out $R/tune/bitdecode.json > $R/tune.log 2>&1; t tune; snap
MOD="--ctx 1k --kv int4 --no-linears --steps 16 --weights int4"
for rep in 1 2 3; do
  timeout 25 ./bitdecode bench model $MOD --dec-k 0 > $R/dec_off_$rep.log 2>&1; t off$rep
  timeout 25 ./bitdecode bench model $MOD --dec-k tuned:5% --dec-settings $R/tune > $R/dec_t5_$rep.log 2>&1; t t5_$rep
done; snap
for f in $R/*.log; do echo "== $(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(grep -c -- '--- PASS' $f) PASS, $(tail -1 $f)"; done
grep -h "ms\b\|floor" $R/fast_1.log $R/bi_1.log | head -20
grep -h "ms\b\|DEC" $R/dec_*.log | head -30
cat $R/times.txt
