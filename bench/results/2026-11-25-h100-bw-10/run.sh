#!/bin/bash
# s10-bw's first device call, 2026-11-25: split_mma v2.7 (divNr, fetchAhead per tile, padAddress)
# of branch s10-bw (bitdecode, kernels.test, gpukv.test) against main da8fb91 (bitdecode_main),
# alternated twice in one session; tests first. Run from the repository root with .gpu-bw carried.
# Stays under ~230 s.
set -o pipefail
G=$PWD/.gpu-bw/b; R=$OUT/r; mkdir -p $R
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
stamp() { echo "$(date -u +%T) t=${SECONDS}s $*" >> $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/times.txt; stamp start
chmod +x $G/*
(cd gpu/kernels
 T() { log=$1; shift; timeout 80 $G/kernels.test -test.v -test.timeout 79s -test.run "$@" > $R/$log 2>&1; echo "rc=$?" >> $R/$log; }
 T t_ref_mma.log '^TestGPUPlanesMatchesReference$/^mma$' &
 T t_ref_v1.log '^TestGPUPlanesMatchesReference$/^v1$' &
 T t_splits.log '^TestGPUPlanesSplits$' &
 T t_rest.log '^(TestGPUPlanesFilter|TestGPUPlanesHighMatchesFP16|TestGPUPlanesWrite|TestPlanes.*|TestTier.*)$' &
 wait) &
(cd kvcache/gpukv
 timeout 80 $G/gpukv.test -test.v -test.timeout 79s -test.run 'Plane|Retier|LiveBound|NearTie' > $R/t_gpukv.log 2>&1; echo "rc=$?" >> $R/t_gpukv.log) &
wait
stamp tests; snap
KV=bw:h100,bw:m100:w0:s0,bw:h20:m40:l40,bw:l100:w0:s0
bench() {
  name=$1 bin=$2 grid=$3; shift 3
  left=$((232 - SECONDS)); if [ $left -lt 12 ]; then stamp "skip $name"; return; fi
  t=$((left < 45 ? left : 45))
  env "$@" timeout $t $G/$bin bench attn --device cuda --kv $KV --grid $grid --json $R/$name.json > $R/$name.md 2> $R/$name.log
  echo "rc=$?" >> $R/$name.log; stamp "$name"; snap
}
A=1x8192,1x131072; B=16x32768,128x8192
bench main_a1 bitdecode_main $A
bench new_a1 bitdecode $A BITDECODE_PTXAS_VERBOSE=1
bench main_b1 bitdecode_main $B
bench new_b1 bitdecode $B
bench new_a2 bitdecode $A
bench main_a2 bitdecode_main $A
bench new_b2 bitdecode $B
bench main_b2 bitdecode_main $B
stamp end; snap
