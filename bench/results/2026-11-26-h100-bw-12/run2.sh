#!/bin/bash
# s12-bw's second device call, 2026-11-26: the gocoder-23m tests the first call could not carry
# (TestGPUPlaneCacheGolden, TestGPUPlaneScheduler: model9.tar.xz holds gocoder-23m with the first
# 20000 bytes of heldout.txt), the second alternation of 16 x 32K and 128 x 8K (v2.10, then main),
# then h20:m40:l40 under v2.10's plan and two knobs (weights 5, 3, 2; 3 CTAs per SM), then all-8-bit
# and all-4-bit with register double buffering at 1 x 128K and 16 x 32K. b2.tar.xz: gpukv.test,
# bitdecode (s12-bw 8be2f37), bitdecode_main (main 5a0fc94). Stays under ~195 s (guard).
set -o pipefail
C=$PWD/.gpu-bw; G=/tmp/g; R=$OUT/r; mkdir -p $R $G/b
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
stamp() { echo "$(date -u +%T) t=${SECONDS}s $*" >> $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/times.txt; stamp start
python3 -c "import lzma,tarfile,sys; tarfile.open(fileobj=lzma.open(sys.argv[2])).extractall(sys.argv[1]); tarfile.open(fileobj=lzma.open(sys.argv[4])).extractall(sys.argv[3])" $G/b $C/b2.tar.xz $G $C/model9.tar.xz
chmod +x $G/b/*; export BITDECODE_GOCODER_DIR=$G/model; stamp unpacked
(cd kvcache/gpukv && timeout 70 $G/b/gpukv.test -test.v -test.timeout 69s -test.run '^(TestGPUPlaneCacheGolden|TestGPUPlaneScheduler)$' > $R/t_golden.log 2>&1; echo "rc=$?" >> $R/t_golden.log)
stamp tests; snap
bench() {
  name=$1 bin=$2 kv=$3 grid=$4 need=$5; shift 5
  left=$((195 - SECONDS)); if [ $left -lt $need ]; then stamp "skip $name"; return; fi
  env "$@" timeout $left $G/b/$bin bench attn --device cuda --kv $kv --grid $grid --json $R/$name.json > $R/$name.md 2> $R/$name.log
  echo "rc=$?" >> $R/$name.log; stamp "$name"; snap
}
KV=fp16,bw:h100:w0:s0,bw:m100:w0:s0,bw:l100:w0:s0,bw:h20:m40:l40:w0:s0
B=16x32768,128x8192; M=1x131072,16x32768,128x8192; P=1x131072,16x32768
bench new_b2 bitdecode $KV $B 36
bench main_b2 bitdecode_main $KV $B 36
bench mix_base bitdecode bw:h20:m40:l40:w0:s0 $M 20
bench mix_w532 bitdecode bw:h20:m40:l40:w0:s0 $M 20 BITDECODE_PLANES_WEIGHTS=5,3,2
bench mix_minb3 bitdecode bw:h20:m40:l40:w0:s0 $M 20 BITDECODE_PLANES_MINB=3 BITDECODE_PTXAS_VERBOSE=1
bench pf_base bitdecode bw:m100:w0:s0,bw:l100:w0:s0 $P 14
bench pf_m bitdecode bw:m100:w0:s0 $P 9 BITDECODE_PLANES_PREFETCH_M=1
bench pf_l bitdecode bw:l100:w0:s0 $P 9 BITDECODE_PLANES_PREFETCH_L=1
stamp end; snap
echo "t_golden.log: $(grep -c -- '--- FAIL' $R/t_golden.log) FAIL, $(grep -E -- '--- (PASS|SKIP)' $R/t_golden.log | tr '\n' ' ') $(tail -1 $R/t_golden.log)"
cat $R/times.txt
grep -h -E '^\| (fp16|mma)' $R/*.md 2>/dev/null | cut -d'|' -f2-4,8,11 | head -40
