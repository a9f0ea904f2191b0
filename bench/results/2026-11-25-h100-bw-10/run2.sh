#!/bin/bash
# s10-bw's second device call, 2026-11-25: split_mma v2.8 (ex2, predicated pipeline loads) of
# branch s10-bw (bitdecode, kernels.test, gpukv.test) against main da8fb91 (bitdecode_main), then
# v2.7 (bitdecode_v27, 085dee7) in the same session; tests first. Run from the repository root
# with .gpu-bw carried (the binaries xz-compressed). Stays under ~160 s.
set -o pipefail
G=$PWD/.gpu-bw/b; R=$OUT/r; mkdir -p $R
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
stamp() { echo "$(date -u +%T) t=${SECONDS}s $*" >> $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/times.txt; stamp start
python3 -c "
import lzma,glob,os
for f in glob.glob('$G/*.xz'):
    open(f[:-3],'wb').write(lzma.open(f).read()); os.remove(f)"
chmod +x $G/*; stamp unpacked
(cd gpu/kernels
 T() { log=$1; shift; timeout 70 $G/kernels.test -test.v -test.timeout 69s -test.run "$@" > $R/$log 2>&1; echo "rc=$?" >> $R/$log; }
 T t_ref_mma.log '^TestGPUPlanesMatchesReference$/^mma$' &
 T t_splits.log '^TestGPUPlanesSplits$' &
 T t_rest.log '^(TestGPUPlanesFilter|TestGPUPlanesHighMatchesFP16|TestGPUPlanesWrite|TestPlanes.*|TestTier.*)$' &
 wait) &
(cd kvcache/gpukv
 timeout 70 $G/gpukv.test -test.v -test.timeout 69s -test.run 'Plane|Retier|LiveBound|NearTie' > $R/t_gpukv.log 2>&1; echo "rc=$?" >> $R/t_gpukv.log) &
wait
stamp tests; snap
KV=bw:h100,bw:m100:w0:s0,bw:h20:m40:l40,bw:l100:w0:s0
bench() {
  name=$1 bin=$2 grid=$3; shift 3
  left=$((158 - SECONDS)); if [ $left -lt 10 ]; then stamp "skip $name"; return; fi
  t=$((left < 40 ? left : 40))
  env "$@" timeout $t $G/$bin bench attn --device cuda --kv $KV --grid $grid --json $R/$name.json > $R/$name.md 2> $R/$name.log
  echo "rc=$?" >> $R/$name.log; stamp "$name"; snap
}
A=1x8192,1x131072; B=16x32768,128x8192
bench new_a bitdecode $A BITDECODE_PTXAS_VERBOSE=1
bench main_a bitdecode_main $A
bench new_b bitdecode $B
bench main_b bitdecode_main $B
bench v27_b bitdecode_v27 $B
bench v27_a bitdecode_v27 $A
stamp end; snap
