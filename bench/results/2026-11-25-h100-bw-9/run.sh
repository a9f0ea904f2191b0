#!/bin/bash
# s9-bw's first device call, 2026-11-25: retier_v3 and split_mma v2.5 (MEDIUM/LOW double
# buffering) of branch s9-bw (bitdecode, kernels.test, gpukv.test) against main b76b90f
# (bitdecode_main), alternated in one session; tests first. Run from the repository root with
# .gpu-bw/b carried. Stays under ~290 s.
set -o pipefail
G=$PWD/.gpu-bw/b; R=$OUT/r; mkdir -p $R
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
stamp() { echo "$(date -u +%T) t=${SECONDS}s $*" >> $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/times.txt; stamp start
chmod +x $G/*
(cd gpu/kernels
 T() { log=$1; shift; timeout 85 $G/kernels.test -test.v -test.timeout 84s -test.run "$@" > $R/$log 2>&1; echo "rc=$?" >> $R/$log; }
 T t_ref_mma.log '^TestGPUPlanesMatchesReference$/^mma$' &
 T t_splits.log '^TestGPUPlanesSplits$' &
 T t_rest.log '^(TestGPUPlanesFilter|TestGPUPlanesHighMatchesFP16|TestGPUPlanesWrite)$' &
 wait) &
(cd kvcache/gpukv
 timeout 85 $G/gpukv.test -test.v -test.timeout 84s -test.run 'Plane|Retier|LiveBound|NearTie' > $R/t_gpukv.log 2>&1; echo "rc=$?" >> $R/t_gpukv.log) &
(cd kvcache/gpukv
 timeout 40 compute-sanitizer --tool memcheck $G/gpukv.test -test.short -test.v -test.run '^TestGPUPlaneRetierMatchesPolicy$/^v3$' > $R/t_memcheck.log 2>&1; echo "rc=$?" >> $R/t_memcheck.log
 timeout 45 compute-sanitizer --tool racecheck $G/gpukv.test -test.short -test.v -test.run '^TestGPUPlaneRetierMatchesPolicy$/^v3$' > $R/t_racecheck.log 2>&1; echo "rc=$?" >> $R/t_racecheck.log) &
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
bench new_a bitdecode $KV 1x8192,1x131072
bench main_a bitdecode_main $KV 1x8192,1x131072
bench new_b bitdecode $KV 16x32768,128x8192
bench main_b bitdecode_main $KV 16x32768,128x8192
bench v_nopf bitdecode bw:m100:w0:s0,bw:h20:m40:l40 1x131072,16x32768,128x8192 BITDECODE_PLANES_PREFETCH_M=0 BITDECODE_PLANES_PREFETCH_L=0
bench v_nopfl bitdecode bw:h20:m40:l40 1x131072,16x32768,128x8192 BITDECODE_PLANES_PREFETCH_L=0
stamp end; snap
