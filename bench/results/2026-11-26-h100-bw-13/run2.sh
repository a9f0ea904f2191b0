#!/bin/bash
# s13-bw's second device call, 2026-11-26: the planes kernel's reference test again with the test's
# upload race fixed (planesOut synchronizes before the launch; call 1's one failure), the gocoder-23m
# tests (TestGPUPlaneCacheGolden, TestGPUPlaneScheduler: model9.tar.xz holds gocoder-23m with the
# first 20000 bytes of heldout.txt), then the second alternation over the whole grid (v2.12, then
# main), then h20:m40:l40 with BITDECODE_PLANES_DEAL=warps at 1 x 8K, 1 x 128K and 16 x 32K (at
# 128 x 8K, one split per (sequence, KV head), it plans what the default plans). b3.tar.xz:
# kernels.test, gpukv.test, bitdecode (s13-bw), bitdecode_main (main). Stays under ~195 s (guard).
set -o pipefail
C=$PWD/.gpu-bw; G=/tmp/g; R=$OUT/r; mkdir -p $R $G
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
stamp() { echo "$(date -u +%T) t=${SECONDS}s $*" >> $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/times.txt; stamp start
python3 -c "import lzma,tarfile,sys; [tarfile.open(fileobj=lzma.open(f)).extractall(sys.argv[1]) for f in sys.argv[2:]]" $G $C/b3.tar.xz $C/model9.tar.xz
chmod +x $G/b/*; export BITDECODE_GOCODER_DIR=$G/model; stamp unpacked
(cd gpu/kernels && timeout 90 $G/b/kernels.test -test.v -test.timeout 89s -test.run '^TestGPUPlanesMatchesReference$/^mma$' > $R/t_ref_mma.log 2>&1; echo "rc=$?" >> $R/t_ref_mma.log) &
(cd kvcache/gpukv && timeout 90 $G/b/gpukv.test -test.v -test.timeout 89s -test.run '^(TestGPUPlaneCacheGolden|TestGPUPlaneScheduler)$' > $R/t_golden.log 2>&1; echo "rc=$?" >> $R/t_golden.log) &
wait
stamp tests; snap
bench() {
  name=$1 bin=$2 kv=$3 grid=$4 need=$5; shift 5
  left=$((195 - SECONDS)); if [ $left -lt $need ]; then stamp "skip $name"; return; fi
  env "$@" timeout $left $G/b/$bin bench attn --device cuda --kv $kv --grid $grid --json $R/$name.json > $R/$name.md 2> $R/$name.log
  echo "rc=$?" >> $R/$name.log; stamp "$name"; snap
}
KV=fp16,bw:h100:w0:s0,bw:m100:w0:s0,bw:l100:w0:s0,bw:h20:m40:l40:w0:s0
A=1x8192,1x131072,16x32768,128x8192
bench new_2 bitdecode $KV $A 50
bench main_2 bitdecode_main $KV $A 50
bench mix_warps bitdecode fp16,bw:h20:m40:l40:w0:s0 1x8192,1x131072,16x32768 12 BITDECODE_PLANES_DEAL=warps
stamp end; snap
for f in $R/t_*.log; do echo "$(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(grep -c -- '--- SKIP' $f) SKIP, $(tail -1 $f)"; done
grep -h -E '^\| mma bw:h20' $R/*.md 2>/dev/null | cut -d'|' -f2-4,8,11
