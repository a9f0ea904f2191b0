#!/bin/bash
# Lead's second final call, session 10 (2026-11-25): TestGPUPlaneCacheGolden with heldout.txt (the
# first final call's bundle left it out), and gocoder-23m's perplexity on the GPU for fp16, int4,
# int2, k4v2 and bw:m100 (final-6's command) on the merged tree (decode_mma v2.12 and split_mma v2.8 change low bits).
set -o pipefail
cd .gpu; G=$PWD; R=$OUT/r; mkdir -p $R; cp golden.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
chmod +x bitdecode *.test
export BITDECODE_GOCODER_DIR=$G/gocoder-23m
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/gpu.txt
(timeout 100 ./gpukv.test -test.v -test.timeout 100s -test.run '^TestGPUPlaneCacheGolden$' > $R/golden.log 2>&1; echo "rc=$?" >> $R/golden.log) &
(timeout 90 ./bitdecode eval ppl --device cuda --model gocoder-23m --file gocoder-23m/heldout.txt --ctx 4096 --windows 2 --chunk 16 --reuse-gap 1024 --kv fp16,int4,int2,k4v2,bw:m100 --json $R/eval.json > $R/eval.md 2> $R/eval.err; echo "rc=$?" >> $R/eval.err) &
wait; snap
