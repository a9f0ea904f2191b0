#!/bin/bash
# s7-bwspeed's second device call, 2026-11-25: split_mma v2.4 with the planner's final rule (splits
# of at least 256 positions, as short as their count allows: bitdecode) against the first call's
# v2.4 (bitdecode_v24a, a917d25) and main 7de578c (v2.3, bitdecode_main), after the planes tests.
# Run from the repository root with the binaries in .gpu-bwspeed. Stays under ~205 s in all.
set -o pipefail
G=$PWD/.gpu-bwspeed; R=$OUT/r; mkdir -p $R
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
stamp() { echo "$(date -u +%T) t=${SECONDS}s $*" >> $R/c2_times.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/c2_times.txt; stamp start
chmod +x $G/kernels.test $G/bitdecode $G/bitdecode_v24a $G/bitdecode_main
(cd gpu/kernels
 T() { log=$1; shift; timeout 72 $G/kernels.test -test.v -test.timeout 71s -test.run "$@" > $R/$log 2>&1; echo "rc=$?" >> $R/$log; }
 T c2_t_ref_mma.log '^TestGPUPlanesMatchesReference$/^mma$' &
 T c2_t_splits.log '^TestGPUPlanesSplits$' &
 T c2_t_rest.log '^(TestGPUPlanesFilter|TestGPUPlanesHighMatchesFP16)$' &
 BITDECODE_PLANES_SPLIT_COST=0 T c2_t_pos.log '^TestGPUPlanesSplits$' &
 wait)
stamp tests done; snap
export BITDECODE_PTXAS_VERBOSE=1
KV=bw:h100,bw:m100:w0:s0,bw:h20:m40:l40,bw:l100:w0:s0
bench() {
  name=$1 bin=$2 kv=$3 grid=$4; shift 4
  left=$((205 - SECONDS)); if [ $left -lt 12 ]; then stamp "skip $name"; return; fi
  t=$((left < 70 ? left : 70))
  env "$@" timeout $t $G/$bin bench attn --device cuda --kv $kv --grid $grid --json $R/$name.json > $R/$name.md 2> $R/$name.log
  echo "rc=$?" >> $R/$name.log; stamp "$name"; snap
}
bench c2_new_a bitdecode $KV 1x8192,1x131072
bench c2_v24a_a bitdecode_v24a $KV 1x8192,1x131072
bench c2_main_a bitdecode_main $KV 1x8192,1x131072
bench c2_new_b bitdecode $KV 16x32768,128x8192
bench c2_v24a_b bitdecode_v24a $KV 16x32768,128x8192
stamp end; snap
