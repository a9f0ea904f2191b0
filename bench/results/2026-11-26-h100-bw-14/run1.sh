#!/bin/bash
# s14-bw's first device call, 2026-11-26: split_mma's launch timeline and v2.13 (branch s14-bw:
# bitdecode_tl0 = 46413ff, the timeline alone; bitdecode and kernels.test = v2.13) against main
# (bitdecode_main, /work/main HEAD baf9455). The changed paths' tests first (3 processes), then
# the timeline of 46413ff and of v2.13 at 1 x 8K and 1 x 128K, then main and v2.13 over the
# whole grid, one run each. Run from the repository root with .gpu-bw carried (b.tar.xz).
# Stays under ~165 s (guard).
set -o pipefail
C=$PWD/.gpu-bw; G=/tmp/g; R=$OUT/r; mkdir -p $R $G
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
stamp() { echo "$(date -u +%T) t=${SECONDS}s $*" >> $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/times.txt; stamp start
python3 -c "import lzma,tarfile,sys; tarfile.open(fileobj=lzma.open(sys.argv[2])).extractall(sys.argv[1])" $G $C/b.tar.xz
chmod +x $G/b/*; stamp unpacked
(cd gpu/kernels
 T() { log=$1; shift; timeout 80 $G/b/kernels.test -test.v -test.timeout 79s -test.run "$@" > $R/$log 2>&1; echo "rc=$?" >> $R/$log; }
 T t_ref_mma.log '^TestGPUPlanesMatchesReference$/^mma$' &
 T t_splits_mma.log '^TestGPUPlanesSplits$/^mma$' &
 T t_timeline.log '^(TestGPUPlanesTimelineSameBits|TestPlanes.*|TestTier.*)$' &
 wait)
stamp tests; snap
bench() {
  name=$1 bin=$2 kv=$3 grid=$4 need=$5; shift 5
  left=$((165 - SECONDS)); if [ $left -lt $need ]; then stamp "skip $name"; return; fi
  env "$@" timeout $left $G/b/$bin bench attn --device cuda --kv $kv --grid $grid --json $R/$name.json > $R/$name.md 2> $R/$name.log
  echo "rc=$?" >> $R/$name.log; stamp "$name"; snap
}
ONE=1x8192,1x131072
TLKV=bw:m100:w0:s0,bw:l100:w0:s0,bw:h20:m40:l40:w0:s0
bench tl_tl0 bitdecode_tl0 $TLKV $ONE 20 BITDECODE_PLANES_TIMELINE=1
bench tl_new bitdecode $TLKV $ONE 20 BITDECODE_PLANES_TIMELINE=1 BITDECODE_PTXAS_VERBOSE=1
KV=fp16,bw:h100:w0:s0,bw:m100:w0:s0,bw:l100:w0:s0,bw:h20:m40:l40:w0:s0
A=1x8192,1x131072,16x32768,128x8192
bench main_1 bitdecode_main $KV $A 40
bench new_1 bitdecode $KV $A 40
stamp end; snap
for f in $R/t_*.log; do echo "$(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(tail -1 $f)"; done
grep -h -E '^\| (fp16|mma)' $R/*_1.md 2>/dev/null | cut -d'|' -f2-4,8,11 | head -50
