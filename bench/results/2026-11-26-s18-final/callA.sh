#!/bin/bash
# Session 18, lead call A on the merged tree: the GPU tests the session's merges touch (MoE, padded head
# dims, int2's look-ahead refold v2.24, the padded one-sequence fp16 plan v28f, TestGPUDecodeLong), a GPU
# serve check with the official OpenAI Python client, and the step at B = 1 and max batch.
set -o pipefail
cd .gpu; G=$PWD; R=$OUT/r; mkdir -p $R
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('a.tar.xz')).extractall('.')
"
chmod +x bitdecode *.test
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >> $R/times.txt
export BITDECODE_CACHE_DIR=$G/cache
mkdir -p $G/kvcache/gpukv $G/gpu/kernels
tst() { local to=$1; shift; (cd $G/$4 && timeout $to $G/$2 -test.v -test.timeout ${to}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) & }
tst 280 gpukv1 gpukv.test '^(TestGPUTransformers)$' kvcache/gpukv
tst 280 gpukv2 gpukv.test '^(TestGPUSyntheticFamilies|TestGPUMoEGraphReplaySameBits|TestGPUMoEQuantizedExperts)$' kvcache/gpukv
tst 280 gpukv3 gpukv.test '^(TestGPUGraphReplaySameBits|TestGPURoPEAppendSameBits|TestGPUCacheGolden)$' kvcache/gpukv
tst 280 kern1 kernels.test '^(TestGPUDecodeLong|TestGPUDecodeLookAheadMatchesRefold)$' gpu/kernels
tst 280 kern2 kernels.test '^(TestGPUDecodeOneSplitMatchesCombine|TestGPUDecodeRingMatchesPipeline)$' gpu/kernels
wait; t tests; snap
# serve on the GPU (embedded model, int4 KV) through the official OpenAI Python client
mkdir -p /tmp/oai && tar xf oai.tar -C /tmp/oai
./bitdecode serve --device cuda --kv int4 --addr 127.0.0.1:8095 > $R/serve.log 2>&1 &
SP=$!
for i in $(seq 90); do curl -s localhost:8095/health >/dev/null && break; sleep 1; done
PP=/tmp/oai/src:/tmp/oai/stub
python3 -c "import httpx, pydantic, anyio, distro" 2>/dev/null || PP=$PP:/tmp/oai/deps
PYTHONPATH=$PP python3 -c "import httpx, pydantic, anyio, distro; print('PYTHONPATH', '$PP', 'httpx', httpx.__version__, 'pydantic', pydantic.VERSION)" > $R/pyclient.log 2>&1
PYTHONPATH=$PP BASE_URL=http://127.0.0.1:8095/v1 MODEL=gotiny timeout 120 python3 check.py >> $R/pyclient.log 2>&1; echo "rc=$?" >> $R/pyclient.log
kill $SP; t serve; snap
# the step (Llama-3.1-8B shapes): B = 1 at 32K/128K, max batch at 32K
timeout 150 ./bitdecode bench model --ctx 32k,128k --kv fp16,int4,int2 --batch 1 --steps 32 > $R/b1.log 2>&1; echo "rc=$?" >> $R/b1.log; t b1; snap
timeout 200 ./bitdecode bench model --ctx 32k --kv fp16,int4,int2 --batch max --steps 16 > $R/max.log 2>&1; echo "rc=$?" >> $R/max.log; t max; snap
for f in $R/*.log; do echo "== $(basename $f): $(grep -c -- '--- FAIL' $f) FAIL, $(grep -c -- '--- PASS' $f) PASS, $(tail -1 $f)"; done
tail -3 $R/pyclient.log
grep -h "ms\b\|x fp16\|floor" $R/b1.log $R/max.log | tail -30
cat $R/times.txt
