#!/bin/bash
# Session 16, lead call C: the final tree (int8 in gemmq.cu merged): the GPU tests the last merge
# touches, then the packed-weight steps at B = 1, 32, 64 (fp16, int4, int3, int8 weights; int4 KV; 1K).
# Run from the repo root with .gpu/ carried (bundle.tar.xz from build.sh).
set -o pipefail
cd .gpu; G=$PWD; R=$OUT/r; mkdir -p $R
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode* *.test
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
export BITDECODE_CACHE_DIR=$G/cache
tst() { local to=$1; shift; (timeout $to ./$2 -test.v -test.timeout ${to}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) & }
tst 200 kgemmq kernels.test '^(TestGEMMQMatchesReference|TestGEMMQConfigs|TestGEMVQTiledMatchesWQ)$'
tst 260 backend1 backend.test '^(TestQuantLinearTiled)$'
tst 200 backend2 backend.test '^(TestJoinTiled|TestJoinTiledSwiGLU|TestQuantLinear|TestLinearGraphReplay|TestGEMMQRoutes|TestTiledOnlyCopy)$'
wait; t tests; snap
run() { local n=$1 s=$2 bin=$3; shift 3; timeout $s ./$bin "$@" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; snap; }
for b in 1 32 64; do
  run b${b} 90 bitdecode bench model --ctx 1k --kv int4 --weights fp16,int4,int3,int8 --batch $b --steps 16 --no-linears
done
t end; snap
for f in $R/*.log; do echo "== $(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(grep -c -- '--- PASS' $f) PASS, $(tail -1 $f)"; done
for f in $R/b*.log; do grep -h "ms/step" $f; done
cat $R/times.txt
