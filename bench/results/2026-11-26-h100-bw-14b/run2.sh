#!/bin/bash
# s14-bw's call of round 2 (session 14b), 2026-11-26: split_mma v2.14 (chunks claimed from a counter,
# branch s14-bw: bitdecode, kernels.test) against main (bitdecode_main, /work/main HEAD 1cdcdc9 = v2.13).
# Tests first (5 processes, each under timeout), then main and v2.14 alternated twice at 1 x 32K and
# 1 x 128K (one process per binary and pass: fp16 measured once in it), v2.14's timeline at 1 x 128K,
# then the unchanged plans (1 x 8K, 16 x 32K) once each. Guard: LIMIT s of command time.
# Run from the repository root with .gpu-bw carried (b.tar.xz, this script).
set -o pipefail
LIMIT=${LIMIT:-120}
C=$PWD/.gpu-bw; G=/tmp/g; R=$OUT/r; mkdir -p $R $G
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
stamp() { echo "$(date -u +%T) t=${SECONDS}s $*" >> $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/times.txt; stamp start
python3 -c "import lzma,tarfile,sys; tarfile.open(fileobj=lzma.open(sys.argv[2])).extractall(sys.argv[1])" $G $C/b.tar.xz
chmod +x $G/b/*; stamp unpacked
(cd gpu/kernels
 T() { log=$1; to=$2; shift 2; timeout $to $G/b/kernels.test -test.v -test.timeout $((to-1))s "$@" > $R/$log 2>&1; echo "rc=$?" >> $R/$log; }
 T t_chunks.log 42 -test.run '^TestGPUPlanesChunks$' &
 T t_timeline.log 42 -test.short -test.run '^(TestGPUPlanesTimelineSameBits|TestPlanes.*|TestTier.*|TestParse.*)$' &
 T t_deal.log 42 -test.short -test.run '^TestGPUPlanesDeal$' &
 T t_spec.log 42 -test.short -test.run '^TestGPUPlanesSpecPlans$' &
 T t_filter.log 42 -test.run '^TestGPUPlanesFilter$' &
 wait)
stamp tests; snap
bench() {
  name=$1 bin=$2 kv=$3 grid=$4 need=$5; shift 5
  left=$((LIMIT - SECONDS)); if [ $left -lt $need ]; then stamp "skip $name"; return; fi
  env "$@" timeout $left $G/b/$bin bench attn --device cuda --kv $kv --grid $grid --json $R/$name.json > $R/$name.md 2> $R/$name.log
  echo "rc=$?" >> $R/$name.log; stamp "$name"; snap
}
KV=fp16,bw:h100:w0:s0,bw:m100:w0:s0,bw:l100:w0:s0,bw:h20:m40:l40:w0:s0
LONG=1x32768,1x131072
bench main_1 bitdecode_main $KV $LONG 12
bench new_1 bitdecode $KV $LONG 12 BITDECODE_PTXAS_VERBOSE=1
bench main_2 bitdecode_main $KV $LONG 12
bench new_2 bitdecode $KV $LONG 12
bench tl_new bitdecode bw:m100:w0:s0,bw:l100:w0:s0 1x131072 6 BITDECODE_PLANES_TIMELINE=1
bench main_3 bitdecode_main $KV 1x8192 5
bench new_3 bitdecode $KV 1x8192 5
KV16=fp16,bw:m100:w0:s0,bw:l100:w0:s0
bench main_4 bitdecode_main $KV16 16x32768 10
bench new_4 bitdecode $KV16 16x32768 10
stamp end; snap
for f in $R/t_*.log; do echo "$(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(grep -c -- '--- PASS' $f) PASS, $(tail -1 $f)"; done
grep -h -E '^  (auto|mma) ' $R/main_*.log $R/new_*.log $R/tl_*.log 2>/dev/null | cut -c1-140
cat $R/times.txt
