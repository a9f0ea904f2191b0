#!/bin/bash
# Session 21-int2 call 1: the GPU tests of the new build (three processes in parallel), then main's
# binary against the new one (bitdecode-new: addresses + rniMul16 + L2 ahead; bitdecode-nopf: the
# same without the L2 prefetch), alternated, under a time guard.
set -o pipefail
D=$PWD/.gpu-int2
LIMIT=${LIMIT:-128}
t0=$(date +%s)
el() { echo $(( $(date +%s)-t0 )); }
python3 -c "import lzma,tarfile; tarfile.open(fileobj=lzma.open('$D/bins.tar.xz')).extractall('$D/bin')" && chmod +x $D/bin/*
echo "unpacked $(el)s" >> $OUT/times.txt
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt 2>&1
if [ -z "$SKIPTESTS" ]; then
( cd gpu/kernels && timeout 60 $D/bin/kernels.test -test.v -test.run 'TestGPUDecodeMatchesReference/mma' > $OUT/t_ref.log 2>&1; echo "t_ref rc=$? $(el)s" >> $OUT/times.txt ) &
( cd gpu/kernels && timeout 60 $D/bin/kernels.test -test.v -test.short -test.run 'TestGPUDecodeLong|TestGPUDecodeOneSplitMatchesCombine' > $OUT/t_long.log 2>&1; echo "t_long rc=$? $(el)s" >> $OUT/times.txt ) &
( cd gpu/kernels && timeout 60 $D/bin/kernels.test -test.v -test.short -test.run 'TestGPUDecodeRingMatchesPipeline' > $OUT/t_ring.log 2>&1; echo "t_ring rc=$? $(el)s" >> $OUT/times.txt ) &
wait
fi
run() { # name binary args...
  local n=$1 b=$2; shift 2
  local left=$(( LIMIT - $(el) )); [ $left -lt 12 ] && { echo "$n skipped at $(el)s" >> $OUT/times.txt; return; }
  timeout $left $D/bin/$b "$@" > $OUT/$n.md 2>&1; echo "$n rc=$? end $(el)s" >> $OUT/times.txt
}
A="bench attn --device cuda --kv int2,k4v2 --grid 100x32768,55x32768,128x8192,1x131072"
M="bench model --ctx 32k --kv fp16,int2 --batch max --steps 16 --no-linears"
for step in $STEPS; do
  case $step in
    am*) BITDECODE_PTXAS_VERBOSE=1 run attn_$step bitdecode-main $A ;;
    an*) BITDECODE_PTXAS_VERBOSE=1 run attn_$step bitdecode-new $A ;;
    ap*) BITDECODE_PTXAS_VERBOSE=1 run attn_$step bitdecode-nopf $A ;;
    mm*) run model_$step bitdecode-main $M ;;
    mn*) run model_$step bitdecode-new $M ;;
    mp*) run model_$step bitdecode-nopf $M ;;
  esac
done
cd $OUT && tar czf results.tgz *.md *.log times.txt gpu.txt 2>/dev/null; rm -f *.md *.log
