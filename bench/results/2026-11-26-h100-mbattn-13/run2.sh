#!/bin/bash
# Session 20 call 2: tests of the splitWavesFill build, then main's binary against it, alternated.
set -o pipefail
D=$PWD/.gpu-mbattn
t0=$(date +%s)
el() { echo $(( $(date +%s)-t0 )); }
python3 -c "import lzma,tarfile; tarfile.open(fileobj=lzma.open('$D/bins.tar.xz')).extractall('$D/bin')" && chmod +x $D/bin/*
echo "unpacked $(el)s" >> $OUT/times.txt
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt 2>&1
# Tests, two processes in parallel, 35 s each.
( cd gpu/kernels && timeout 35 $D/bin/kernels.test -test.v -test.short -test.run 'TestGPUDecodeOneSplitMatchesCombine|TestGPUDecodeLong|TestDecodeDependentLaunch|TestMMAMinSplit|TestSplitWavesFill|TestGPUDecodeMatchesReference/mma' > $OUT/t_kernels.log 2>&1; echo "kernels rc=$? $(el)s" >> $OUT/times.txt ) &
( cd kvcache/gpukv && timeout 35 $D/bin/gpukv.test -test.v -test.short -test.run 'TestGPUGraphReplaySameBits|TestGPUBatchInvariantLogits' > $OUT/t_gpukv.log 2>&1; echo "gpukv rc=$? $(el)s" >> $OUT/times.txt ) &
wait
run() { # name binary args...
  local n=$1 b=$2; shift 2
  local left=$(( 112 - $(el) )); [ $left -lt 10 ] && { echo "$n skipped at $(el)s" >> $OUT/times.txt; return; }
  timeout $left $D/bin/$b "$@" > $OUT/$n.md 2>&1; echo "$n rc=$? end $(el)s" >> $OUT/times.txt
}
M="bench model --ctx 32k --kv fp16,int4,int2 --batch max --steps 16 --no-linears"
A="bench attn --device cuda --kv int4,int2 --grid 55x32768,100x32768"
run model_main1 bitdecode-main $M
run model_new1 bitdecode $M
run model_main2 bitdecode-main $M
run model_new2 bitdecode $M
run attn_main1 bitdecode-main $A
run attn_new1 bitdecode $A
cd $OUT && tar czf results.tgz *.md *.log times.txt gpu.txt && rm -f *.md *.log
