#!/bin/bash
# s5-bw call 2: retier v2 (+v1) tests, memcheck, eval ppl (model dir named gocoder-23m so its settings apply), bench attn bookkeeping, bench model.
set -o pipefail
cd "$(dirname "$0")"; R=$OUT/r; mkdir -p $R
python3 -c "
import lzma,tarfile,shutil
tarfile.open(fileobj=lzma.open('gocoder.tar.xz')).extractall('.')
for f in ['bitdecode','gpukv.test']:
    shutil.copyfileobj(lzma.open(f+'.xz'), open(f,'wb'))
"
rm -rf gocoder-23m; mv gm gocoder-23m; chmod +x gpukv.test bitdecode
export BITDECODE_GOCODER_DIR=$PWD/gocoder-23m
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version --format=csv >> $R/times.txt
(timeout 75 ./gpukv.test -test.run 'TestGPUPlane|TestRetier|TestPlaneBook' -test.v -test.timeout 70s > $R/gpukv.log 2>&1; echo "rc=$?" >> $R/gpukv.log) &
(timeout 75 compute-sanitizer --tool memcheck ./gpukv.test -test.run 'TestGPUPlaneRetierMatchesPolicy|TestGPUPlaneCacheMatchesReference/bw:h30:m30' -test.short -test.v > $R/memcheck.log 2>&1; echo "rc=$?" >> $R/memcheck.log) &
(timeout 75 ./bitdecode eval ppl --device cuda --model gocoder-23m --file gocoder-23m/heldout.txt --ctx 4096 --windows 2 --chunk 16 --reuse-gap 1024 --kv fp16,int4,bw:h100,bw:m100:w0:s0,bw:h20:m40:l40 --json $R/eval.json > $R/eval.md 2> $R/eval.err; echo "rc=$?" >> $R/eval.err) &
wait
date -u >> $R/times.txt
timeout 45 ./bitdecode bench attn --device cuda --kv bw:h20:m40:l40 --grid 1x8192,1x131072,128x8192 --json $R/attn.json > $R/attn.md 2>&1; echo "rc=$?" >> $R/attn.md
date -u >> $R/times.txt
timeout 40 ./bitdecode bench model --ctx 32k --batch 1 --no-linears --kv fp16,int4,bw:h100,bw:m100:w0:s0,bw:h20:m40:l40 --json $R/model_b1.json > $R/model_b1.md 2>&1; echo "rc=$?" >> $R/model_b1.md
date -u >> $R/times.txt
timeout 40 ./bitdecode bench model --ctx 32k --batch 8 --no-linears --kv fp16,int4,bw:h100,bw:m100:w0:s0,bw:h20:m40:l40 --json $R/model_b8.json > $R/model_b8.md 2>&1; echo "rc=$?" >> $R/model_b8.md
date -u >> $R/times.txt
cd $OUT && tar czf results.tgz r && rm -rf r; ls -la $OUT
