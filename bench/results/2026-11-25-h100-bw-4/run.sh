#!/bin/bash
# s6-bw's one device call, 2026-11-25: split_mma v2.1 (pipeline + per-tier loops) planes tests,
# then bench attn old (main, v2) vs new (v2.1), then v2.1 with MT 1,1,2 and PF if time is left.
# Run from the repository root with the binaries in .gpu-bw (kernels.test, bitdecode: s6-bw;
# bitdecode_old: main c34b029; bitdecode_lb3: s6-bw with __launch_bounds__(kThreads, 3) on
# split_mma, built for this call only). Stays under ~232 s in all.
set -o pipefail
G=$PWD/.gpu-bw; R=$OUT/r; mkdir -p $R
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
stamp() { echo "$(date -u +%T) t=${SECONDS}s $*" >> $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/times.txt; stamp start
chmod +x $G/kernels.test $G/bitdecode $G/bitdecode_old $G/bitdecode_lb3
(cd gpu/kernels
 T() { log=$1; shift; timeout 75 $G/kernels.test -test.v -test.timeout 74s -test.run "$@" > $R/$log 2>&1; echo "rc=$?" >> $R/$log; }
 T t_ref_mma.log '^TestGPUPlanesMatchesReference$/^mma$' &
 T t_ref_v1.log '^TestGPUPlanesMatchesReference$/^v1$' &
 T t_splits.log '^TestGPUPlanesSplits$' &
 T t_rest.log '^(TestGPUPlanesFilter|TestGPUPlanesHighMatchesFP16|TestGPUPlanesWrite)$' &
 wait)
stamp tests done; snap
export BITDECODE_PTXAS_VERBOSE=1
KV=fp16,bw:h100,bw:m100:w0:s0,bw:h20:m40:l40
GRID=1x8192,1x131072,16x32768,128x8192
# bench NAME BIN GRID [ENV=...]: skipped when under 30 s are left of 232.
bench() {
  name=$1 bin=$2 grid=$3; shift 3
  left=$((232 - SECONDS)); if [ $left -lt 30 ]; then stamp "skip $name"; return; fi
  t=$((left < 62 ? left : 62))
  env "$@" timeout $t $G/$bin bench attn --device cuda --kv $KV --grid $grid --json $R/$name.json > $R/$name.md 2> $R/$name.log
  echo "rc=$?" >> $R/$name.log; stamp "$name"; snap
}
bench old1 bitdecode_old $GRID
bench new1 bitdecode $GRID
bench new_mt112 bitdecode 1x131072,128x8192 BITDECODE_PLANES_MT=1,1,2
bench lb3_mt122 bitdecode_lb3 1x131072,128x8192 BITDECODE_PLANES_MT=1,2,2
bench new_pf bitdecode 1x131072,128x8192 BITDECODE_PLANES_PREFETCH=1
stamp end; snap
