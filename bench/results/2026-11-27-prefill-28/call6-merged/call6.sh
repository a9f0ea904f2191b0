#!/bin/bash
# Session 28 call 4: the merged tree (s28-prefill into main): the prefill kernel's and the paged cache's GPU tests, one end-to-end prefill.
exec > >(tee -a $OUT/call.log) 2>&1
date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
R=$PWD; P=$R/.gpu-s28b; W=/tmp/w; mkdir -p $W
for f in bitdecode kernels.test gpukv.test; do xz -dc $P/$f.xz > $W/$f; chmod +x $W/$f; done
export BITDECODE_CACHE_DIR=/tmp/bdc
( python3 $P/gen_st.py /tmp/m8b $P/tokdir > $OUT/gen.log 2>&1; echo "gen rc $? at $SECONDS s" ) &
PIDS="$!"
KT='TestGPUPrefillMatchesReference/'
( cd $R/gpu/kernels && timeout 230 $W/kernels.test -test.run "TestPrefillRoute|${KT}(fp16|bf16|int8|int4)\$" -test.v -test.timeout 240s > $OUT/k1.log 2>&1; echo "k1 rc $? at $SECONDS s" ) &
PIDS="$PIDS $!"
( cd $R/gpu/kernels && timeout 230 $W/kernels.test -test.run "${KT}(int4:kt128|int4:kt32:v32|int2|int2:kc32:v32|k8v4|k4v2|int4:kc64:res64)\$" -test.v -test.timeout 240s > $OUT/k2.log 2>&1; echo "k2 rc $? at $SECONDS s" ) &
PIDS="$PIDS $!"
( cd $R/kvcache/gpukv && timeout 230 $W/gpukv.test -test.run 'TestGPUCacheMatchesReference|TestGPUSoftcapPaged|TestGPUCacheBatchInvariant|TestGPUPrefixSharing|TestGPURoPEAppendSameBits' -test.v -test.timeout 240s > $OUT/g1.log 2>&1; echo "g1 rc $? at $SECONDS s" ) &
PIDS="$PIDS $!"
( cd $R/kvcache/gpukv && timeout 230 $W/gpukv.test -test.run 'TestGPUSyntheticFamilies|TestGPUTransformers|TestGPUGreedyTokens|TestGPUGraphReplaySameBits' -test.v -test.timeout 240s > $OUT/g2.log 2>&1; echo "g2 rc $? at $SECONDS s" ) &
PIDS="$PIDS $!"
wait $PIDS
grep -h -- "^--- \|^ok\|^FAIL\|^PASS\|panic" $OUT/k1.log $OUT/k2.log $OUT/g1.log $OUT/g2.log | grep -v "^    " | head -60
echo "tests done at $SECONDS s"
for kv in fp16 int4; do
  [ $SECONDS -lt 330 ] && timeout 60 $W/bitdecode run --model /tmp/m8b --device cuda --kv $kv --max-tokens 1 --temperature 0 --prompt-file $P/p32000.txt 2>&1 >/dev/null | grep "prompt tokens\|rror"
done
echo "end at $SECONDS s"
