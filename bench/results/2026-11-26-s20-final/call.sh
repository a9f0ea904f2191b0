#!/bin/bash
# Session 20, the lead's call on the merged tree: the GPU tests the session's merges touch (DEC's
# lists where x is produced and their one-barrier ranking, ops.cu's shared bodies, one sequence's
# split plans, DEC per layer), then the 8B step with DEC tuned at 5% beside DEC off (alternated,
# three pairs), and the step at B = 1.
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
tst 200 kops kernels.test '^(TestOpsAddRMSNormSel|TestOpsOutSel|TestOpsGLUColsSel|TestOpsAddRMSNorm|TestOpsHadamard|TestOpsSplitCols|TestOpsConvert|TestOpsElementwise)$' gpu/kernels
tst 200 kdec kernels.test '^(TestGPUDecodeOneSplitMatchesCombine|TestGPUDecodeTimelineSameBits|TestGPUDecodeLong|TestGPUPlanesSplits)$' gpu/kernels
tst 220 kref kernels.test '^TestGPUDecodeMatchesReference$/^mma$' gpu/kernels
tst 200 bdec backend.test '^(TestQ6DECNormSelect|TestQ6DECOutSelect|TestQ6DECDownSelect|TestQuantLinearQ6DEC|TestQueueAfterSel)$' backend/gpu
tst 200 gk1 gpukv.test '^(TestGPUGraphReplaySameBits|TestGPUBatchInvariantLogits|TestGPUAttendDECList|TestGPUModelDECLists)$' kvcache/gpukv
tst 200 gk2 gpukv.test '^(TestGPUTransformers|TestGPUSyntheticFamilies|TestGPUCacheMatchesReference)$' kvcache/gpukv
export BITDECODE_DEC_RESIDUAL=device
MOD="--ctx 1k --kv int4 --no-linears --steps 16 --weights int4"
(timeout 200 ./bitdecode bench model $MOD --dec-k 8 --steps 1 > $R/warm.log 2>&1) &
wait; t tests; snap
for rep in 1 2 3; do
  timeout 40 ./bitdecode bench model $MOD --dec-k 0 > $R/dec_off_$rep.log 2>&1; t off$rep
  timeout 40 ./bitdecode bench model $MOD --dec-k tuned:5% --dec-settings $G/tune4 > $R/dec_t5_$rep.log 2>&1; t t5_$rep
done; snap
timeout 40 ./bitdecode bench model $MOD --dec-k 4 > $R/dec_k4.log 2>&1; t k4
timeout 40 ./bitdecode bench model $MOD --dec-k 8 > $R/dec_k8.log 2>&1; t k8; snap
timeout 100 ./bitdecode bench model --ctx 1k,32k,128k --kv fp16,int4,int2 --batch 1 --steps 32 > $R/b1.log 2>&1; echo "rc=$?" >> $R/b1.log; t b1; snap
for f in $R/*.log; do echo "== $(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(grep -c -- '--- PASS' $f) PASS, $(tail -1 $f)"; done
grep -h "ms\b\|floor\|DEC" $R/dec_*.log | head -40
grep -h "ms\b\|floor" $R/b1.log | tail -12
cat $R/times.txt
