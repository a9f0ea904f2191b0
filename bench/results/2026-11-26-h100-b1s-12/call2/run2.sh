#!/bin/bash
# s12-b1s call 2 (2026-11-26): decode_mma.cu v2.17 (the fused merge's loads ahead) against main's
# binary (35f372b's code: bitdecode-main), alternated: the GPU tests first, then bench model at
# B = 1 and bench attn at one sequence in pairs, ncu of one int4 1 x 32K launch if time is left.
# Run from the repo root with .gpu-b1s carried (b/: bitdecode, bitdecode-main, kernels.test, gpukv.test).
set -o pipefail
TEND=${TEND:-182}
cd .gpu-b1s; mkdir -p b; python3 -c "import lzma,tarfile; tarfile.open(fileobj=lzma.open('bins.tar.xz')).extractall('b')"; cd b; R=$OUT/r; mkdir -p $R; cp ../run2.sh $R/ 2>/dev/null
chmod +x bitdecode bitdecode-main kernels.test gpukv.test
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { echo "t=$SECONDS $*" >> $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/gpu.txt 2>&1; t start
(timeout 80 ./kernels.test -test.v -test.timeout 80s -test.run '^TestGPUDecodeMatchesReference$/^mma$' > $R/t_mma.log 2>&1; echo "rc=$?" >> $R/t_mma.log) &
(timeout 80 ./kernels.test -test.v -test.timeout 80s -test.run '^(TestGPUDecodeLong|TestGPUDecodeOneSplitMatchesCombine|TestDecodeDependentLaunch|TestMMAMinSplit|TestSplitBlocks)$' > $R/t_kernels.log 2>&1; echo "rc=$?" >> $R/t_kernels.log) &
(timeout 80 ./gpukv.test -test.v -test.timeout 80s -test.run '^(TestGPUGraphReplaySameBits|TestGPUBatchInvariantLogits|TestGPUCacheBatchInvariant)$' > $R/t_gpukv.log 2>&1; echo "rc=$?" >> $R/t_gpukv.log) &
wait; t tests; snap
last=0
fits() { [ $((SECONDS + last)) -lt $TEND ] || { echo "skip $1 t=$SECONDS" >> $R/skipped.txt; return 1; }; }
run() { # name binary args...
  local n=$1 b=$2 s=$SECONDS; shift 2; fits $n || return 0
  timeout $((TEND + 5 - SECONDS)) ./$b "$@" > $R/$n.md 2> $R/$n.log; echo "rc=$? t=$SECONDS" >> $R/$n.log
  last=$((SECONDS - s)); t $n; snap
}
M="bench model --ctx 1k,32k,128k --kv fp16,int4,int2 --batch 1 --steps 32 --no-linears"
A="bench attn --device cuda --grid 1x8192,1x32768,1x131072"
run model_main1 bitdecode-main $M
run model_new1 bitdecode $M
run attn_main1 bitdecode-main $A --kv int4,int4:kt128,int2,k4v2
run attn_new1 bitdecode $A --kv int4,int4:kt128,int2,k4v2
run model_main2 bitdecode-main $M
run model_new2 bitdecode $M
run attn_main2 bitdecode-main $A --kv int4,int2
run attn_new2 bitdecode $A --kv int4,int2
if fits ncu; then
  s=$SECONDS; timeout $((TEND + 5 - SECONDS)) ncu --clock-control none --kernel-name regex:decode_mma --launch-skip 6 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \
    ./bitdecode bench attn --device cuda --kv int4 --grid 1x32768 > $R/ncu_new.txt 2>&1; echo "rc=$?" >> $R/ncu_new.txt; t ncu; snap
fi
t end; snap
grep -h "^--- \|^ok\|^FAIL\|^PASS\|rc=" $R/t_*.log | grep -v "^    " | head -40
grep -H "^| auto" $R/attn*.md | sed "s/| 32\/8\/128 | 0//" | cut -c1-120
grep -H "ms\b\|floor" $R/model*.md | head -60
grep -h "Duration\|Achieved Occ\|Long Scoreboard\|DRAM Throughput\|Warp Cycles Per Issued\|Theoretical Occ\|Registers" $R/ncu_*.txt 2>/dev/null | head -20
cat $R/times.txt $R/skipped.txt 2>/dev/null
