#!/bin/bash
# s7-bwspeed's device call, 2026-11-25: split_mma v2.4 (wave-rule splits, equal-cost splits, merge
# in the last split) planes tests, then bench attn v2.4 (bitdecode) against main 7de578c (v2.3,
# bitdecode_main) on the grid, then v2.4 knob variants. Run from the repository root with the
# binaries in .gpu-bwspeed. Stays under ~212 s in all.
set -o pipefail
G=$PWD/.gpu-bwspeed; R=$OUT/r; mkdir -p $R
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
stamp() { echo "$(date -u +%T) t=${SECONDS}s $*" >> $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/times.txt; stamp start
chmod +x $G/kernels.test $G/bitdecode $G/bitdecode_main
(cd gpu/kernels
 T() { log=$1; shift; timeout 72 $G/kernels.test -test.v -test.timeout 71s -test.run "$@" > $R/$log 2>&1; echo "rc=$?" >> $R/$log; }
 T t_ref_mma.log '^TestGPUPlanesMatchesReference$/^mma$' &
 T t_splits.log '^TestGPUPlanesSplits$' &
 T t_rest.log '^(TestGPUPlanesFilter|TestGPUPlanesHighMatchesFP16|TestGPUPlanesWrite)$' &
 BITDECODE_PLANES_SPLIT_COST=0 BITDECODE_PLANES_FUSE=0 BITDECODE_PLANES_SPLITS=target:528 T t_v23geo.log '^(TestGPUPlanesSplits|TestGPUPlanesFilter)$' &
 BITDECODE_PLANES_WEIGHTS=64,1,1 T t_w64.log '^TestGPUPlanesSplits$' &
 wait)
stamp tests done; snap
export BITDECODE_PTXAS_VERBOSE=1
KV=bw:h100,bw:m100:w0:s0,bw:h20:m40:l40,bw:l100:w0:s0
# bench NAME BIN KV GRID [ENV=...]: skipped when under 12 s are left of 212.
bench() {
  name=$1 bin=$2 kv=$3 grid=$4; shift 4
  left=$((212 - SECONDS)); if [ $left -lt 12 ]; then stamp "skip $name"; return; fi
  t=$((left < 70 ? left : 70))
  env "$@" timeout $t $G/$bin bench attn --device cuda --kv $kv --grid $grid --json $R/$name.json > $R/$name.md 2> $R/$name.log
  echo "rc=$?" >> $R/$name.log; stamp "$name"; snap
}
bench new_a bitdecode $KV 1x8192,1x131072
bench main_a bitdecode_main $KV 1x8192,1x131072
bench main_b bitdecode_main $KV 16x32768,128x8192
bench new_b bitdecode $KV 16x32768,128x8192
bench v_pos bitdecode bw:h20:m40:l40 1x131072,16x32768 BITDECODE_PLANES_SPLIT_COST=0
bench v_nofuse bitdecode bw:h100,bw:m100:w0:s0 1x8192,1x131072 BITDECODE_PLANES_FUSE=0
bench v_t528 bitdecode bw:h100,bw:m100:w0:s0,bw:h20:m40:l40 1x131072,16x32768 BITDECODE_PLANES_SPLITS=target:528
bench v_ms256 bitdecode $KV 1x8192 BITDECODE_PLANES_MIN_SPLIT=256
bench v_minb3 bitdecode bw:m100:w0:s0,bw:h20:m40:l40 128x8192 BITDECODE_PLANES_MINB=3
stamp end; snap
