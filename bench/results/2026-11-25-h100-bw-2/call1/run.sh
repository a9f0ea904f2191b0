#!/bin/bash
# s5-bw call: GPU re-tier + run offsets tests, memcheck, eval ppl, bench attn bookkeeping, bench model.
set -o pipefail
cd "$(dirname "$0")"; L=$OUT
python3 -c "
import lzma,tarfile,shutil
tarfile.open(fileobj=lzma.open('gocoder.tar.xz')).extractall('.')
for f in ['bitdecode','gpukv.test','kernels.test']:
    shutil.copyfileobj(lzma.open(f+'.xz'), open(f,'wb'))
"
chmod +x kernels.test gpukv.test bitdecode
export BITDECODE_GOCODER_DIR=$PWD/gm
date -u > $L/start.txt; nvidia-smi --query-gpu=name,driver_version --format=csv >> $L/start.txt
(timeout 160 ./kernels.test -test.run 'TestGPUPlanes(MatchesReference|Filter|Write|HighMatchesFP16)' -test.v -test.timeout 155s > $L/kernels.log 2>&1; echo "rc=$?" >> $L/kernels.log) &
(timeout 160 ./kernels.test -test.run 'TestGPUPlanesSplits' -test.v -test.timeout 155s > $L/kernels_splits.log 2>&1; echo "rc=$?" >> $L/kernels_splits.log) &
(timeout 160 ./gpukv.test -test.run 'TestGPUPlane|TestRetier|TestPlaneBook' -test.v -test.timeout 155s > $L/gpukv.log 2>&1; echo "rc=$?" >> $L/gpukv.log) &
(timeout 160 compute-sanitizer --tool memcheck ./gpukv.test -test.run 'TestGPUPlaneRetierMatchesPolicy|TestGPUPlaneCacheMatchesReference/bw:h30:m30' -test.short -test.v > $L/memcheck.log 2>&1; echo "rc=$?" >> $L/memcheck.log) &
(timeout 160 ./bitdecode eval ppl --device cuda --model gm --file gm/heldout.txt --ctx 4096 --windows 2 --chunk 16 --reuse-gap 1024 --kv fp16,int4,bw:h100,bw:m100:w0:s0,bw:h20:m40:l40 --json $L/eval.json > $L/eval.md 2> $L/eval.err; echo "rc=$?" >> $L/eval.err) &
wait
date -u >> $L/start.txt
timeout 50 ./bitdecode bench attn --device cuda --kv bw:h20:m40:l40,bw:m100:w0:s0 --grid 1x8192,1x131072,16x32768,128x8192 --json $L/attn.json > $L/attn.md 2>&1; echo "rc=$?" >> $L/attn.md
date -u >> $L/start.txt
timeout 60 ./bitdecode bench model --ctx 32k --batch 1 --no-linears --kv fp16,int4,bw:h100,bw:m100:w0:s0,bw:h20:m40:l40 --json $L/model_b1.json > $L/model_b1.md 2>&1; echo "rc=$?" >> $L/model_b1.md
date -u >> $L/start.txt
cd $L && tar czf results.tgz *.log *.md *.json *.txt *.err 2>/dev/null; ls $L
