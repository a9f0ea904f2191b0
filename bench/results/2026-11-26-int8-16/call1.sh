#!/bin/bash
# Session 16 (int8 over the tiled layout), call 1: the GPU tests of the change (4 processes in
# parallel, <= 150 s each) while both bitdecode binaries fill the kernel cache (short runs, discarded);
# then `bench gemvq --diag --bits 8` (the int8 forms incl. v4.1, alone and back to back; two variants
# of the ring), `bench gemvq --bits 8` (v4.1 = v4 and v6.1 = v8 at every split), and the B = 1 step,
# main's binary (bitdecode-base, f37916d) against this branch's, alternated twice, then this branch's
# with BITDECODE_GEMVQ_INT8_V4=1 (the old int8 route).
set -o pipefail
cd .gpu-int8; G=$PWD; R=$OUT/r; mkdir -p $R; cp call1.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode* *.test
export BITDECODE_CACHE_DIR=$G/cache
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
T=${TESTS_S:-150}
tst() { # name binary regexp
  (timeout $T ./$2 -test.v -test.timeout ${T}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) &
}
tst k52 kernels.test '^TestGEMVQ52MatchesV51$'
tst ktiled kernels.test '^(TestGEMVQTiledMatchesWQ|TestPackTilesMatchesWQ|TestPackTilesInt8MatchesWQ)$'
tst kref kernels.test '^(TestGEMVQMatchesReference|TestGEMVQ6MatchesV5)$'
tst backend backend.test '^(TestQuantLinear|TestQuantLinearTiled|TestTiledOnlyCopy|TestTiledLayoutRouting|TestTiledLayoutBytes|TestLinearGraphReplay)$'
W="bench model --ctx 1k,32k --kv int4 --weights int8,int4 --batch 1 --steps 32 --no-linears"
(timeout $T ./bitdecode-base bench model --ctx 1k --kv int4 --weights int8 --batch 1 --steps 2 --no-linears > $R/warm_base.log 2>&1;
 timeout $T ./bitdecode bench model --ctx 1k --kv int4 --weights int8 --batch 1 --steps 2 --no-linears > $R/warm_new.log 2>&1) &
wait; t tests; snap
run() { # name seconds binary args...
  local n=$1 s=$2 b=$3; shift 3
  timeout $s ./$b "$@" --json $R/$n.json > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; snap
}
for i in 1 2; do
  run w_base_$i 60 bitdecode-base $W
  run w_new_$i 60 bitdecode $W
done
BITDECODE_GEMVQ_INT8_V4=1 run w_v4 60 bitdecode $W
run gemvq8 90 bitdecode bench gemvq --bits 8 --shapes "q/o proj,gate/up,down" --splits 1,2,4,8
run diag8 150 bitdecode bench gemvq --diag --bits 8 --variants ';GEMVQ5_STAGES=3 GEMVQ5_MIN_BLOCKS=3'
t end; snap; rm -rf $R
