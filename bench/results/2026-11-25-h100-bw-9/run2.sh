#!/bin/bash
# s9-bw's second device call, 2026-11-25: the branch's final code (retier_v3 with the racecheck
# fix, MEDIUM/LOW double buffering off) against main b76b90f (bitdecode_main), alternated in one
# session, tests first; then knob variants of the branch's binary for the all-8-bit rows (tiles of
# 4 MEDIUM groups; fewer, longer splits; 3 CTAs per SM). Run from the repository root with
# .gpu-bw/b carried. Stays under ~290 s.
set -o pipefail
G=$PWD/.gpu-bw/b; R=$OUT/r; mkdir -p $R
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
stamp() { echo "$(date -u +%T) t=${SECONDS}s $*" >> $R/c2_times.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/c2_times.txt; stamp start
chmod +x $G/*
(cd gpu/kernels
 T() { log=$1; shift; timeout 85 $G/kernels.test -test.v -test.timeout 84s -test.run "$@" > $R/$log 2>&1; echo "rc=$?" >> $R/$log; }
 T c2_t_ref_mma.log '^TestGPUPlanesMatchesReference$/^mma$' &
 T c2_t_splits.log '^TestGPUPlanesSplits$' &
 T c2_t_rest.log '^(TestGPUPlanesFilter|TestGPUPlanesHighMatchesFP16|TestGPUPlanesWrite)$' &
 wait) &
(cd kvcache/gpukv
 timeout 85 $G/gpukv.test -test.v -test.timeout 84s -test.run 'Plane|Retier|LiveBound|NearTie' > $R/c2_t_gpukv.log 2>&1; echo "rc=$?" >> $R/c2_t_gpukv.log) &
(cd kvcache/gpukv
 timeout 45 compute-sanitizer --tool racecheck $G/gpukv.test -test.short -test.v -test.run '^TestGPUPlaneRetierMatchesPolicy$/^v3$' > $R/c2_t_racecheck.log 2>&1; echo "rc=$?" >> $R/c2_t_racecheck.log
 timeout 40 compute-sanitizer --tool memcheck $G/gpukv.test -test.short -test.v -test.run '^TestGPUPlaneRetierMatchesPolicy$/^v3$' > $R/c2_t_memcheck.log 2>&1; echo "rc=$?" >> $R/c2_t_memcheck.log) &
wait
stamp tests; snap
export BITDECODE_PTXAS_VERBOSE=1
KV=bw:h100,bw:m100:w0:s0,bw:h20:m40:l40,bw:l100:w0:s0
bench() {
  name=$1 bin=$2 kv=$3 grid=$4; shift 4
  left=$((290 - SECONDS)); if [ $left -lt 12 ]; then stamp "skip $name"; return; fi
  t=$((left < 75 ? left : 75))
  env "$@" timeout $t $G/$bin bench attn --device cuda --kv $kv --grid $grid --json $R/$name.json > $R/$name.md 2> $R/$name.log
  echo "rc=$?" >> $R/$name.log; stamp "$name"; snap
}
bench c2_main_a bitdecode_main $KV 1x8192,1x131072
bench c2_new_a bitdecode $KV 1x8192,1x131072
bench c2_main_b bitdecode_main $KV 16x32768,128x8192
bench c2_new_b bitdecode $KV 16x32768,128x8192
M=bw:m100:w0:s0
bench c2_v_mt142 bitdecode $M,bw:h20:m40:l40 1x131072,16x32768,128x8192 BITDECODE_PLANES_MT=1,4,2
bench c2_v_t256 bitdecode $M,bw:h100 16x32768 BITDECODE_PLANES_SPLITS=target:256
bench c2_v_t512 bitdecode $M 16x32768 BITDECODE_PLANES_SPLITS=target:512
bench c2_v_minb3a bitdecode $M 1x131072 BITDECODE_PLANES_MINB=3 BITDECODE_PLANES_SPLITS=target:392
bench c2_v_minb3b bitdecode $M 16x32768 BITDECODE_PLANES_MINB=3 BITDECODE_PLANES_SPLITS=target:384
stamp end; snap
