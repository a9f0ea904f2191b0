#!/bin/bash
# Session 5 call 6 (v3.2: every consumer thread arrives on the stage's empty barrier): racecheck of decode_wgmma, its tests, its timing.
# carry: [".gpu/s5", ".gpu/m5"]
cd "$(dirname "$0")"
xz -d -k -f bitdecode.xz engine.test.xz gpu_kernels.test.xz; chmod +x bitdecode engine.test gpu_kernels.test
R=$OUT/r; mkdir -p $R
export BITDECODE_GOCODER_DIR=$(cd ../m5 && pwd)
for s in fp16 int8 int4:kt128; do
  timeout 50 compute-sanitizer --tool racecheck --kernel-name kns=decode_wgmma ./engine.test -test.run "^TestGPUCacheMatchesReference\$/^$s\$" -test.v > $R/racecheck_wgmma_${s/:/_}.txt 2>&1; echo "rc=$?" >> $R/racecheck_wgmma_${s/:/_}.txt
done
timeout 90 compute-sanitizer --tool memcheck --kernel-name kns=decode_wgmma ./engine.test -test.run '^TestGPUCacheMatchesReference$/^(fp16|int8|int4:kt128)$|^TestGPUCacheBatchInvariant$' -test.v > $R/memcheck_wgmma.txt 2>&1; echo "rc=$?" >> $R/memcheck_wgmma.txt
timeout 60 ./bitdecode bench attn --device cuda --kernel wgmma --kv fp16,int8,int4:kt128 --grid 1x8192,16x32768,128x8192 > $R/wgmma.md 2> $R/wgmma.log; echo "rc=$?" >> $R/wgmma.log
timeout 200 ./gpu_kernels.test -test.run 'TestGPUDecodeMatchesReference/wgmma|TestGPUDecodeLong' -test.v > $R/test_decode.log 2>&1; echo "rc=$?" >> $R/test_decode.log
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
