#!/bin/bash
# s12-gemv's call 2 (2026-11-26): v21b's defaults (gate|up split 2, the RoPE launch's early weights,
# add_rmsnorm's early h and w) against main (5a0fc94, this branch's base): the backend tests
# (gocoder-23m travels; kernels.test did not fit: its tests ran in call 1 on the same kernel code), bench model B = 1 main/new alternated twice (1K, 32K, 128K; fp16,
# int4, int2) with each default turned off in the same rounds (1K, 32K; fp16, int4), B = 2 main/new
# twice, then bench gemv --variants with the time left.
set -o pipefail
T0=$(date +%s)
cd .gpu-gemv; R=$OUT/r; mkdir -p $R
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
cd b; cp run2.sh $R/
chmod +x bitdecode* *.test
export BITDECODE_GOCODER_DIR=$PWD/gocoder-23m
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
el() { echo $(( $(date +%s) - T0 )); }
t() { echo "$(date -u +%T) $(el) s $*" >> $R/times.txt; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/times.txt 2>&1; t extracted
T=50
tst() { (timeout $T ./$2 -test.v -test.timeout ${T}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) & }
tst backend backend.test '^(TestModelMatchesCPU|TestModelPDLSameBits|TestFoldSwiGLU|TestFoldRoPE|TestFoldSwiGLUJoined|TestLinearGroup|TestLinearGraphReplay|TestBatchInvariantLinear|TestEarlyNormInputs|TestEarlyNormInputsDecision|TestParseOptions|TestOpenRejectsBadOptions)$'
wait; t tests; snap
run() { # name binary args, env...
  local v=$1 b=$2 a=$3; shift 3
  env "$@" timeout 25 ./$b bench model $a --steps 32 --no-linears --json $R/b_${v}.json > $R/b_${v}.log 2>&1; echo "rc=$?" >> $R/b_${v}.log
  t "$v"; snap
}
FULL="--batch 1 --ctx 1k,32k,128k --kv fp16,int4,int2"
SMALL="--batch 1 --ctx 1k,32k --kv fp16,int4"
for i in 1 2; do
  run main_$i bitdecode-main "$FULL" X=0
  run new_$i bitdecode "$FULL" X=0
  run noearly_$i bitdecode "$SMALL" BITDECODE_GEMV_EARLY=none
  run nonorm_$i bitdecode "$SMALL" BITDECODE_NO_NORM_EARLY=1
  run gu1_$i bitdecode "$SMALL" BITDECODE_GEMV_SPLITS=0,0,1,0
  run gu4_$i bitdecode "$SMALL" BITDECODE_GEMV_SPLITS=0,0,4,0
  run qkv4_$i bitdecode "$SMALL" BITDECODE_GEMV_SPLITS=0,4,0,0
  run lm2_$i bitdecode "$SMALL" BITDECODE_GEMV_SPLITS=0,0,0,2
done
for i in 1 2; do
  [ $(el) -gt 115 ] && break
  run b2main_$i bitdecode-main "--batch 2 --ctx 1k,32k --kv fp16" X=0
  run b2new_$i bitdecode "--batch 2 --ctx 1k,32k --kv fp16" X=0
done
LEFT=$(( 140 - $(el) ))
if [ $LEFT -gt 15 ]; then
  timeout $LEFT ./bitdecode bench gemv --rows 1 --variants --json $R/variants.json > $R/variants.log 2>&1; echo "rc=$?" >> $R/variants.log
  t variants; snap
fi
t end; snap
grep -H "ms/step\|rc=" $R/b_*.log | sed 's|.*/b_||' | grep -v "^.*weights" | head -90
grep -h "^--- FAIL\|^--- PASS\|^--- SKIP\|^FAIL\|^ok\|rc=\|panic" $R/backend.log
grep -h "rc=\|ceiling\|T=1.*\*" $R/variants.log 2>/dev/null | head -20
cat $R/times.txt
