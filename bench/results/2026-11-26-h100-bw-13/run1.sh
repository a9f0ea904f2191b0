#!/bin/bash
# s13-bw's first device call, 2026-11-26: split_mma v2.12 (branch s13-bw: bitdecode, kernels.test,
# gpukv.test) against main (bitdecode_main, /work/main HEAD); the planes, plane-cache and re-tier
# tests first (TestGPUPlanesDeal new), then main and v2.12 over the whole grid, one run each (the
# second alternation, v2.12 then main, and the gocoder-23m tests are call 2's). Run from the
# repository root with .gpu-bw carried (b.tar.xz). Stays under ~195 s (guard).
set -o pipefail
C=$PWD/.gpu-bw; G=/tmp/g; R=$OUT/r; mkdir -p $R $G
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
stamp() { echo "$(date -u +%T) t=${SECONDS}s $*" >> $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/times.txt; stamp start
python3 -c "import lzma,tarfile,sys; tarfile.open(fileobj=lzma.open(sys.argv[2])).extractall(sys.argv[1])" $G $C/b.tar.xz
chmod +x $G/b/*; stamp unpacked
(cd gpu/kernels
 T() { log=$1; shift; timeout 85 $G/b/kernels.test -test.v -test.timeout 84s -test.run "$@" > $R/$log 2>&1; echo "rc=$?" >> $R/$log; }
 T t_ref_mma.log '^TestGPUPlanesMatchesReference$/^mma$' &
 T t_splits_mma.log '^TestGPUPlanesSplits$/^mma$' &
 T t_splits_v1.log '^TestGPUPlanesSplits$/^v1$' &
 T t_plans.log '^(TestGPUPlanesSpecPlans|TestGPUPlanesDeal)$' &
 T t_rest.log '^(TestGPUPlanesFilter|TestGPUPlanesHighMatchesFP16|TestGPUPlanesWrite|TestPlanes.*|TestTier.*)$' &
 wait) &
(cd kvcache/gpukv
 T() { log=$1; shift; timeout 85 $G/b/gpukv.test -test.v -test.timeout 84s -test.run "$@" > $R/$log 2>&1; echo "rc=$?" >> $R/$log; }
 T t_cache.log '^(TestGPUPlaneCacheMatchesReference)$' &
 T t_mass.log '^(TestGPUPlaneSampledMassMatchesCPU|TestGPUPlaneRetierMatchesPolicy|TestRetier.*|TestLiveBound|TestNearTieSwap)$' &
 wait) &
wait
stamp tests; snap
KV=fp16,bw:h100:w0:s0,bw:m100:w0:s0,bw:l100:w0:s0,bw:h20:m40:l40:w0:s0
bench() {
  name=$1 bin=$2 grid=$3 need=$4; shift 4
  left=$((195 - SECONDS)); if [ $left -lt $need ]; then stamp "skip $name"; return; fi
  env "$@" timeout $left $G/b/$bin bench attn --device cuda --kv $KV --grid $grid --json $R/$name.json > $R/$name.md 2> $R/$name.log
  echo "rc=$?" >> $R/$name.log; stamp "$name"; snap
}
A=1x8192,1x131072,16x32768,128x8192
bench main_1 bitdecode_main $A 50
bench new_1 bitdecode $A 50 BITDECODE_PTXAS_VERBOSE=1
stamp end; snap
for f in $R/t_*.log; do echo "$(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(tail -1 $f)"; done
grep -h -E '^\| (fp16|mma)' $R/*_1.md 2>/dev/null | cut -d'|' -f2-4,8,11 | head -50
