#!/bin/bash
# Lead's call, session 9 (2026-11-25): v16, one wave of splits for decode_wgmma.cu with 16-bit KV
# (splitOneWave), A/B against main's binary (v15): the fp16/bf16 attention grid, fp16 max batch;
# the decode reference test on wgmma and the gpukv tests. Run from the repo root, .gpu carried.
set -o pipefail
cd .gpu; R=$OUT/r; mkdir -p $R; cp v16.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode* *.test
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $R/gpu.txt
(timeout 70 ./kernels.test -test.v -test.timeout 70s -test.run '^(TestGPUDecodeMatchesReference/wgmma|TestSplitBlocks)$' > $R/kernels.log 2>&1; echo "rc=$?" >> $R/kernels.log) &
(timeout 70 ./gpukv.test -test.v -test.timeout 70s -test.run '^(TestGPUCacheMatchesReference|TestGPUGraphReplaySameBits|TestGPUBatchInvariantLogits)$' > $R/gpukv.log 2>&1; echo "rc=$?" >> $R/gpukv.log) &
wait; snap
G=2x32768,4x32768,8x32768,15x32768,16x32768,16x8192,32x8192,48x8192,64x8192,128x8192
for b in bitdecode-main bitdecode; do
  timeout 40 ./$b bench attn --device cuda --kv fp16,bf16 --grid $G > $R/attn_$b.log 2>&1; echo "rc=$?" >> $R/attn_$b.log
done
snap
for i in 1 2; do for b in bitdecode-main bitdecode; do
  timeout 25 ./$b bench model --ctx 32k --kv fp16 --batch max --steps 24 --no-linears 2>&1 | grep -E "ms/step|rror" >> $R/model_$b.log
done; done
snap
