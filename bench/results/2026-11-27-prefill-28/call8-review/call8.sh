#!/bin/bash
# Session 28 call 8 (review mend): prefill.cu reading its queries through loadQueryFrag, and the planners' shared compileReporting, on one H100.
exec > >(tee -a $OUT/call.log) 2>&1
date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
R=$PWD; W=/tmp/w; mkdir -p $W; xz -dc $R/.gpu-s28c/kernels.test.xz > $W/kernels.test; chmod +x $W/kernels.test
export BITDECODE_CACHE_DIR=/tmp/bdc
KT='TestGPUPrefillMatchesReference/'
cd $R/gpu/kernels
( BITDECODE_PTXAS_VERBOSE=1 timeout 220 $W/kernels.test -test.run "TestPrefillRoute|${KT}(fp16|bf16|int8|int4)\$" -test.v -test.timeout 230s > $OUT/k1.log 2>&1; echo "k1 rc $? at $SECONDS s" ) &
( timeout 220 $W/kernels.test -test.run "${KT}(int4:kt128|int4:kt32:v32|int2|int2:kc32:v32|k8v4|k4v2|int4:kc64:res64)\$" -test.v -test.timeout 230s > $OUT/k2.log 2>&1; echo "k2 rc $? at $SECONDS s" ) &
( BITDECODE_PTXAS_VERBOSE=1 timeout 220 $W/kernels.test -test.run 'TestGPUDecodeOneSplitMatchesCombine|TestGPUPlanesSplits' -test.v -test.timeout 230s > $OUT/k3.log 2>&1; echo "k3 rc $? at $SECONDS s" ) &
wait
grep -h -- "^--- \|^ok\|^FAIL\|^PASS\|panic" $OUT/k1.log $OUT/k2.log $OUT/k3.log | grep -v "^    " | head -40
echo "ptxas reports: prefill $(grep -c 'prefill.cu \[' $OUT/k1.log), decode $(grep -c 'decode_mma.cu \[\|decode.cu \[\|decode_wgmma.cu \[' $OUT/k3.log), planes $(grep -c 'planes.cu \[' $OUT/k3.log)"
grep -h -m3 -A2 "prefill.cu \[" $OUT/k1.log
echo "end at $SECONDS s"
