#!/bin/bash
# s11-bw's second device call, 2026-11-26: split_mma v2.9 (branch s11-bw: bitdecode, kernels.test,
# gpukv.test) against main 3868dca (bitdecode_main), alternated twice over the grid; the planes,
# plane-cache and re-tier tests first. Run from the repository root with .gpu-bw carried. Stays
# under ~192 s (later runs are skipped by the guard).
set -o pipefail
G=$PWD/.gpu-bw/b; R=$OUT/r; mkdir -p $R
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
stamp() { echo "$(date -u +%T) t=${SECONDS}s $*" >> $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/times.txt; stamp start
chmod +x $G/*
(cd gpu/kernels
 T() { log=$1; shift; timeout 75 $G/kernels.test -test.v -test.timeout 74s -test.run "$@" > $R/$log 2>&1; echo "rc=$?" >> $R/$log; }
 T t_ref_mma.log '^TestGPUPlanesMatchesReference$/^mma$' &
 T t_splits.log '^TestGPUPlanesSplits$' &
 T t_plans.log '^TestGPUPlanesSpecPlans$' &
 T t_rest.log '^(TestGPUPlanesFilter|TestGPUPlanesHighMatchesFP16|TestGPUPlanesWrite|TestPlanes.*|TestTier.*)$' &
 wait) &
(cd kvcache/gpukv
 timeout 75 $G/gpukv.test -test.v -test.timeout 74s -test.run 'Plane|Retier|LiveBound|NearTie' > $R/t_gpukv.log 2>&1; echo "rc=$?" >> $R/t_gpukv.log) &
wait
stamp tests; snap
KV=bw:h100,bw:m100:w0:s0,bw:h20:m40:l40,bw:l100:w0:s0
bench() {
  name=$1 bin=$2 grid=$3 need=$4; shift 4
  left=$((192 - SECONDS)); if [ $left -lt $need ]; then stamp "skip $name"; return; fi
  env "$@" timeout $left $G/$bin bench attn --device cuda --kv $KV --grid $grid --json $R/$name.json > $R/$name.md 2> $R/$name.log
  echo "rc=$?" >> $R/$name.log; stamp "$name"; snap
}
A=1x8192,1x131072; B=16x32768,128x8192
bench main_a1 bitdecode_main $A 8
bench new_a1 bitdecode $A 8 BITDECODE_PTXAS_VERBOSE=1
bench main_b1 bitdecode_main $B 28
bench new_b1 bitdecode $B 28
bench new_a2 bitdecode $A 8
bench main_a2 bitdecode_main $A 8
bench new_b2 bitdecode $B 28
bench main_b2 bitdecode_main $B 28
KV=bw:h20:m40:l40
bench new_w1054 bitdecode 1x131072,16x32768 8 BITDECODE_PLANES_WEIGHTS=10,5,4
stamp end; snap
