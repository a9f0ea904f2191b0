#!/bin/bash
# s6-bw2's one device call, 2026-11-25: split_mma v2.2 (warps balanced by tier cost, one lop3 per
# top-byte merge, MINB/WEIGHTS knobs, mass grid cap) planes tests, then bench attn old (main
# f62e513, v2.1) vs new (v2.2), then v2.2 variants by environment. Run from the repository root
# with the binaries in .gpu-bw2 (kernels.test, bitdecode: s6-bw2; bitdecode_old: main f62e513).
# Stays under ~192 s in all.
set -o pipefail
G=$PWD/.gpu-bw2; R=$OUT/r; mkdir -p $R
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
stamp() { echo "$(date -u +%T) t=${SECONDS}s $*" >> $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/times.txt; stamp start
chmod +x $G/kernels.test $G/bitdecode $G/bitdecode_old
(cd gpu/kernels
 T() { log=$1; shift; timeout 70 $G/kernels.test -test.v -test.timeout 69s -test.run "$@" > $R/$log 2>&1; echo "rc=$?" >> $R/$log; }
 T t_ref_mma.log '^TestGPUPlanesMatchesReference$/^mma$' &
 T t_ref_v1.log '^TestGPUPlanesMatchesReference$/^v1$' &
 T t_splits.log '^TestGPUPlanesSplits$' &
 T t_rest.log '^(TestGPUPlanesFilter|TestGPUPlanesHighMatchesFP16|TestGPUPlanesWrite)$' &
 BITDECODE_PLANES_MT=1,2,2 BITDECODE_PLANES_MINB=3 BITDECODE_PLANES_WEIGHTS=5,3,2 T t_variant.log '^(TestGPUPlanesSplits|TestGPUPlanesFilter)$' &
 wait)
stamp tests done; snap
export BITDECODE_PTXAS_VERBOSE=1
KV=fp16,bw:h100,bw:m100:w0:s0,bw:h20:m40:l40,bw:l100:w0:s0
GRID=1x8192,1x131072,16x32768,128x8192
# bench NAME BIN KV GRID [ENV=...]: skipped when under 20 s are left of 192.
bench() {
  name=$1 bin=$2 kv=$3 grid=$4; shift 4
  left=$((192 - SECONDS)); if [ $left -lt 20 ]; then stamp "skip $name"; return; fi
  t=$((left < 60 ? left : 60))
  env "$@" timeout $t $G/$bin bench attn --device cuda --kv $kv --grid $grid --json $R/$name.json > $R/$name.md 2> $R/$name.log
  echo "rc=$?" >> $R/$name.log; stamp "$name"; snap
}
bench old1 bitdecode_old $KV $GRID
bench new1 bitdecode $KV $GRID
bench new_mt122 bitdecode bw:m100:w0:s0,bw:h20:m40:l40,bw:l100:w0:s0 1x131072,16x32768,128x8192 BITDECODE_PLANES_MT=1,2,2
bench new_lb3 bitdecode bw:h100,bw:m100:w0:s0,bw:h20:m40:l40,bw:l100:w0:s0 1x131072,16x32768,128x8192 BITDECODE_PLANES_MT=1,2,2 BITDECODE_PLANES_MINB=3
bench new_w532 bitdecode bw:h20:m40:l40 16x32768,128x8192 BITDECODE_PLANES_WEIGHTS=5,3,2
bench new_w111 bitdecode bw:h20:m40:l40 16x32768,128x8192 BITDECODE_PLANES_WEIGHTS=1,1,1
stamp end; snap
