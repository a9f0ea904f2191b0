#!/bin/bash
# Call 5 (session 15's last): the tests the merges after call 1 touch (s15-int3, s15-prefill, the
# lead's test refactors), with gocoder-23m for the model tests, then the packed-weight step at 32 rows
# (the dequantize + cuBLASLt path that s15-prefill sped up) and at one row, session 14's final binary
# (bitdecode-base, 31acbd1) against the merged tree. Run from the repo root with .gpu/ carried
# (bundle.tar.xz from build.sh with WITH_MODEL=1).
set -o pipefail
cd .gpu; G=$PWD; R=$OUT/r; mkdir -p $R; cp verify.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode* *.test
export BITDECODE_GOCODER_DIR=$G/gocoder-23m BITDECODE_CACHE_DIR=$G/cache
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
tst() { # name binary regexp
  (timeout 165 ./$2 -test.v -test.timeout 165s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) &
}
tst kgemvq kernels.test '^(TestGEMVQMatchesReference|TestGEMVQ52MatchesV51|TestGEMVQ6MatchesV5|TestGEMVQTiledMatchesWQ|TestPackTilesMatchesWQ)$'
tst backend backend.test '^(TestModelMatchesCPU|TestModelQuantMatchesCPU|TestQuantLinear|TestQuantLinearTiled|TestTiledOnlyCopy|TestLinearGraphReplay)$'
tst bdec backend.test '^(TestQuantLinearDEC|TestQuantLinearGroupDEC|TestModelDECMatchesCPU)$'
tst gpukv gpukv.test '^(TestGPUCacheGolden|TestGPUGreedyTokens)$'
wait; t tests; snap
run() { # name seconds binary args...
  local n=$1 s=$2 b=$3; shift 3
  timeout $s ./$b "$@" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; snap
}
M32="bench model --ctx 1k --kv int4 --weights int4,int3 --batch 32 --steps 16 --no-linears"
M1="bench model --ctx 1k --kv int4 --weights int4,int3 --batch 1 --steps 32 --no-linears"
run m32_base 60 bitdecode-base $M32
run m32_new 60 bitdecode $M32
run m1_new 40 bitdecode $M1
run m32_base2 40 bitdecode-base $M32
run m32_new2 40 bitdecode $M32
t end; snap; rm -rf $R
