#!/bin/bash
# Session 15d (int3 over the tiled layout), the one call: the GPU tests of the change (4 processes in
# parallel, ~150 s each) while the two bitdecode binaries fill the kernel cache (short runs, discarded);
# then `bench gemvq --bits 3` (this branch's binary: v3.2 (v3) and v6.1 over the tiled layout (v8)
# alternated at every split), and the B = 1 step, main's binary (bitdecode-base, b5b48bb) against this
# branch's, alternated twice, and this branch's with BITDECODE_GEMVQ_INT3_V32=1 (the old int3 route).
# Run from the repo root with .gpu-int3/ carried (bundle.tar.xz: the binaries and gocoder-23m).
set -o pipefail
cd .gpu-int3; G=$PWD; R=$OUT/r; mkdir -p $R; cp call1.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode* *.test
export BITDECODE_GOCODER_DIR=$G/gocoder-23m BITDECODE_CACHE_DIR=$G/cache
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
T=${TESTS_S:-150}
tst() { # name binary regexp
  (timeout $T ./$2 -test.v -test.timeout ${T}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) &
}
tst k52 kernels.test '^TestGEMVQ52MatchesV51$'
tst ktiled kernels.test '^(TestGEMVQTiledMatchesWQ|TestPackTilesMatchesWQ|TestPackTilesInt3MatchesWQ)$'
tst kref kernels.test '^(TestGEMVQMatchesReference|TestGEMVQ6MatchesV5)$'
tst backend backend.test '^(TestQuantLinear|TestQuantLinearTiled|TestTiledOnlyCopy|TestTiledLayoutRouting|TestTiledLayoutBytes|TestModelQuantMatchesCPU|TestLinearGraphReplay)$'
W="bench model --ctx 1k,32k --kv int4 --weights int3,int4 --batch 1 --steps 32 --no-linears"
(timeout $T ./bitdecode-base bench model --ctx 1k --kv int4 --weights int3 --batch 1 --steps 2 --no-linears > $R/warm_base.log 2>&1;
 timeout $T ./bitdecode bench model --ctx 1k --kv int4 --weights int3 --batch 1 --steps 2 --no-linears > $R/warm_new.log 2>&1) &
wait; t tests; snap
run() { # name seconds binary args...
  local n=$1 s=$2 b=$3; shift 3
  timeout $s ./$b "$@" --json $R/$n.json > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; snap
}
run gemvq3 60 bitdecode bench gemvq --bits 3 --shapes "q/o proj,gate/up,down" --splits 1,2,4,8
for i in 1 2; do
  run w_base_$i 40 bitdecode-base $W
  run w_new_$i 40 bitdecode $W
done
BITDECODE_GEMVQ_INT3_V32=1 run w_v32 40 bitdecode $W
t end; snap; rm -rf $R
