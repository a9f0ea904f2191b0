#!/bin/bash
# Session 16, lead call A: the merged tree (int8's tiled layout + gemmq.cu) on the GPU.
# Tests the merges touch (4 processes in parallel), then the packed-weight steps at B = 1, 32, 64
# (fp16, int4, int3, int8 weights; int4 KV; 1K), then issue #22's one-sequence bw row (1 x 128K)
# with split_mma's split count swept (BITDECODE_PLANES_SPLITS=target:N) and 3 CTAs an SM.
# Run from the repo root with .gpu/ carried (bundle.tar.xz from build.sh).
set -o pipefail
cd .gpu; G=$PWD; R=$OUT/r; mkdir -p $R; cp callA.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode *.test
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> $R/times.txt
export BITDECODE_CACHE_DIR=$G/cache
T=${TESTS_S:-170}
tst() { (timeout $T ./$2 -test.v -test.timeout ${T}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) & }
tst kgemvq kernels.test '^(TestGEMVQMatchesReference|TestGEMVQ52MatchesV51|TestPackTilesMatchesWQ|TestGEMVQ6MatchesV5|TestGEMVQTiledMatchesWQ)$'
tst kgemmq kernels.test '^(TestGEMMQMatchesReference)$'
tst backend backend.test '^(TestQuantLinear|TestQuantLinearTiled|TestTiledOnlyCopy|TestTiledLayoutRouting|TestTiledLayoutBytes|TestLinearGraphReplay)$'
tst backend2 backend.test '^(TestModelQuantMatchesCPU|TestModelMatchesCPU|TestForwardGreedyTokens)$'
wait; t tests; snap
run() { local n=$1 s=$2; shift 2; timeout $s ./bitdecode "$@" > $R/$n.log 2>&1; echo "rc=$?" >> $R/$n.log; t $n; snap; }
for b in 1 32 64; do
  run model_b$b 90 bench model --ctx 1k --kv int4 --weights fp16,int4,int3,int8 --batch $b --steps 16 --no-linears
done
BW="bench attn --device cuda --kv fp16,bw:m100:w0:s0,bw:l100:w0:s0,bw:h20:m40:l40:w0:s0 --grid 1x131072"
run bw_default 60 $BW
for n in 528 792 1056; do BITDECODE_PLANES_SPLITS=target:$n run bw_t$n 60 $BW; done
BITDECODE_PLANES_MINB=3 run bw_minb3 60 $BW
run bw_default2 60 $BW
t end; snap
for f in $R/*.log; do echo "== $(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(grep -c -- '--- PASS' $f) PASS, $(tail -1 $f)"; done
grep -h "ms\b" $R/model_b*.log | head -40
grep -h -E "bw:|fp16" $R/bw_*.log | head -60
cat $R/times.txt
