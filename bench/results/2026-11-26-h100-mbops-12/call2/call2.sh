#!/bin/bash
# s12-mbops call 2 (2026-11-26): v22 (ops.cu v11: a rotated KV cache's attention output written in
# fp16 too for o's GEMM; the logits through the pinned ring at 4 MiB chunks) against main (7063940):
# the GPU tests the change touches, then main and v22 alternated twice at max batch (fp16, int4, int2
# at 32K), v22 with the pageable download (BITDECODE_DOWNLOAD_CHUNK=0) and with 8 MiB chunks once
# each, and B = 1 at 32K once each. Run from the repo root with .gpu-mbops carried.
set -o pipefail
T0=$(date +%s)
cd .gpu-mbops; R=$OUT/r; mkdir -p $R; cp call2.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
cd b; chmod +x bitdecode* *.test
# gocoder-23m (34 MB compressed) does not fit beside the binaries and the 28 MB tree: the model tests skip
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
el() { echo $(( $(date +%s) - T0 )); }
t() { echo "$(date -u +%T) $(el) s $*" >> $R/times.txt; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/times.txt 2>&1; t extracted
one() { for n in "$@"; do timeout 60 ./gpu.test -test.v -test.timeout 60s -test.run "^$n\$" > $R/backend_$n.log 2>&1; echo "rc=$?" >> $R/backend_$n.log; done; }
(timeout 60 ./kernels.test -test.v -test.timeout 60s -test.run '^(TestOps.*|TestKVAppendRot|TestGPUPackMatchesGo)$' > $R/kernels.log 2>&1; echo "rc=$?" >> $R/kernels.log) &
(timeout 70 ./gpukv.test -test.v -test.short -test.timeout 70s -test.run '^(TestGPUCacheGolden|TestGPUGraphReplaySameBits|TestGPUBatchInvariantLogits|TestGPUCacheMatchesReference|TestGPUScheduler|TestGPUPerLayerFormats|TestGPUPrefixBatched)$' > $R/gpukv.log 2>&1; echo "rc=$?" >> $R/gpukv.log) &
one TestEnqueueOutWith TestModelPDLSameBits &
one TestLinearGraphReplay TestBatchInvariantLinear TestEnqueueOutHalf TestFoldHalfAndRoPEJoined &
one TestPinnedDownload TestParseDownloadChunk TestParallelCopy TestParseOptions &
wait; t tests; snap
M="bench model --ctx 32k --kv fp16,int4,int2 --no-linears"
for i in 1 2; do
  for b in bitdecode-main bitdecode; do
    timeout 40 ./$b $M --batch max --steps 16 --json $R/max_${b}_$i.json > $R/max_${b}_$i.log 2>&1; echo "rc=$?" >> $R/max_${b}_$i.log
    t "max $b $i"; snap
  done
done
for c in 0 8192; do
  BITDECODE_DOWNLOAD_CHUNK=$c timeout 40 ./bitdecode $M --batch max --steps 16 --json $R/max_bitdecode_c$c.json > $R/max_bitdecode_c$c.log 2>&1; echo "rc=$?" >> $R/max_bitdecode_c$c.log
  t "max c$c"; snap
done
for b in bitdecode-main bitdecode; do
  timeout 25 ./$b $M --batch 1 --steps 32 --json $R/b1_$b.json > $R/b1_$b.log 2>&1; echo "rc=$?" >> $R/b1_$b.log
  t "b1 $b"; snap
done
t end; snap
grep -h "^--- FAIL\|^FAIL\|^ok\|^PASS\|rc=\|panic" $R/kernels.log $R/gpukv.log $R/backend_*.log | sort | uniq -c
grep -l "FAIL\|panic" $R/*.log
for f in $R/max_*.log $R/b1_*.log; do echo "== $f"; grep -h "ms/step\|last direct\|rc=" $f; done
cat $R/times.txt
