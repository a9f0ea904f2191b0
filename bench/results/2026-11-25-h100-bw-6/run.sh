#!/bin/bash
# s6-bw3's one device call, 2026-11-25: split_mma v2.3 (LOW rebuilt as sign and exponent, one
# division per entry, MEDIUM/LOW addresses computed once) planes tests, then bench attn new (v2.3)
# vs old (main d443acd, v2.2), then v2.3 knob variants (weights 5,3,2; 3 CTAs per SM). Run from the
# repository root with the binaries in .gpu-bw3 (kernels.test, bitdecode: s6-bw3;
# bitdecode_old: main). Stays under ~172 s in all.
set -o pipefail
G=$PWD/.gpu-bw3; R=$OUT/r; mkdir -p $R
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
stamp() { echo "$(date -u +%T) t=${SECONDS}s $*" >> $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/times.txt; stamp start
chmod +x $G/kernels.test $G/bitdecode $G/bitdecode_old
(cd gpu/kernels
 T() { log=$1; shift; timeout 75 $G/kernels.test -test.v -test.timeout 74s -test.run "$@" > $R/$log 2>&1; echo "rc=$?" >> $R/$log; }
 T t_ref_mma.log '^TestGPUPlanesMatchesReference$/^mma$' &
 T t_splits.log '^TestGPUPlanesSplits$' &
 T t_rest.log '^(TestGPUPlanesFilter|TestGPUPlanesHighMatchesFP16|TestGPUPlanesWrite)$' &
 BITDECODE_PLANES_MT=1,2,2 BITDECODE_PLANES_MINB=3 BITDECODE_PLANES_WEIGHTS=5,3,2 T t_variant.log '^(TestGPUPlanesSplits|TestGPUPlanesFilter)$' &
 wait)
stamp tests done; snap
export BITDECODE_PTXAS_VERBOSE=1
GRID=1x131072,16x32768,128x8192
# bench NAME BIN KV GRID [ENV=...]: skipped when under 15 s are left of 172.
bench() {
  name=$1 bin=$2 kv=$3 grid=$4; shift 4
  left=$((172 - SECONDS)); if [ $left -lt 15 ]; then stamp "skip $name"; return; fi
  t=$((left < 50 ? left : 50))
  env "$@" timeout $t $G/$bin bench attn --device cuda --kv $kv --grid $grid --json $R/$name.json > $R/$name.md 2> $R/$name.log
  echo "rc=$?" >> $R/$name.log; stamp "$name"; snap
}
bench new1 bitdecode fp16,bw:h100,bw:m100:w0:s0,bw:h20:m40:l40,bw:l100:w0:s0 $GRID
bench old1 bitdecode_old bw:h100,bw:m100:w0:s0,bw:h20:m40:l40,bw:l100:w0:s0 $GRID
bench new_w532 bitdecode bw:h20:m40:l40 16x32768,128x8192 BITDECODE_PLANES_WEIGHTS=5,3,2
bench new_lb3 bitdecode bw:m100:w0:s0,bw:h20:m40:l40 16x32768,128x8192 BITDECODE_PLANES_MINB=3
stamp end; snap
