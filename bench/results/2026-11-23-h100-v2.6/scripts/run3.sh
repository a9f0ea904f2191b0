#!/bin/bash
# Session 5 call 3: A/B of HEAD eee341a (old), v2.6 unpack with the in-loop mask (unp), v2.6 (new: unpack, edge-only mask after the loop, int2 MT4/MINB3, wgmma int8 MINB2); decode tests of v2.6.
# carry: [".gpu/s5"]
cd "$(dirname "$0")"
xz -d -k -f bitdecode.xz bitdecode_old.xz bitdecode_unp.xz gpu_kernels.test.xz; chmod +x bitdecode bitdecode_old bitdecode_unp gpu_kernels.test
R=$OUT/r; mkdir -p $R
G=1x8192,16x32768,128x8192
for b in bitdecode_old bitdecode_unp bitdecode; do
  timeout 60 ./$b bench attn --device cuda --kernel mma --kv int4,int2,k4v2 --grid $G > $R/ab_mma_$b.md 2> $R/ab_mma_$b.log; echo "rc=$?" >> $R/ab_mma_$b.log
  timeout 60 ./$b bench attn --device cuda --kernel wgmma --kv fp16,int8,int4:kt128 --grid $G > $R/ab_wg_$b.md 2> $R/ab_wg_$b.log; echo "rc=$?" >> $R/ab_wg_$b.log
done
timeout 300 ./gpu_kernels.test -test.run 'TestGPUDecodeMatchesReference/(mma|wgmma)|TestGPUDecodeLong' -test.v > $R/test_decode.log 2>&1; echo "rc=$?" >> $R/test_decode.log
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
