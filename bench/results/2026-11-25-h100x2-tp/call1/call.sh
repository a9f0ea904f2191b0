#!/bin/bash
# Lead's TP call 1 (2026-11-25, nvidia-h100-x2): merged main's GPU tests, then TP 2 vs TP 1.
set -o pipefail
cd .gpu; G=$PWD; M=$G/gocoder-23m; R=$OUT/r; mkdir -p $R
python3 -c "import lzma,tarfile; tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')"
chmod +x bitdecode servebench *.test
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export BITDECODE_LIBNCCL=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2
[ -f "$BITDECODE_LIBNCCL" ] || export BITDECODE_LIBNCCL=$(find / -name libnccl.so.2 2>/dev/null | head -1)
export BITDECODE_GOCODER_DIR=$M
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt; nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv >> $R/times.txt
nvidia-smi topo -m > $R/topo.txt 2>&1; echo "LIBNCCL=$BITDECODE_LIBNCCL" >> $R/times.txt
T=120
tst() { (timeout $T ./$2 -test.v -test.timeout ${T}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) & }
tst backend backend.test '^(TestGroup.*|TestModelMatchesCPU|TestModelPDLSameBits|TestLinearGraphReplay|TestLinearGroup)$'
tst cuda cuda.test '^(TestGPUNCCLOneRank|TestGPUGEMMGraphReplay)$'
tst kernels_planes kernels.test '^(TestGPUPlanesSplits|TestGPUPlanesMatchesReference)$'
tst gpukv gpukv.test '^(TestGPUCacheGolden|TestGPUGraphReplaySameBits|TestGPUPlaneCacheGolden)$'
wait; t tests; snap
for kv in int4 fp16; do for tp in 1 2; do
  timeout 60 ./bitdecode run --device cuda --tp $tp --model $M --kv $kv --max-tokens 256 --compare-fp16=false \
    "func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {" > $R/run_${kv}_tp$tp.txt 2> $R/run_${kv}_tp$tp.err
  echo "rc=$?" >> $R/run_${kv}_tp$tp.err
done; cmp $R/run_${kv}_tp1.txt $R/run_${kv}_tp2.txt > $R/run_${kv}_cmp.txt 2>&1 && echo "identical" >> $R/run_${kv}_cmp.txt; done
t greedy; snap
for tp in 1 2; do
  timeout 90 ./bitdecode bench model --preset llama-3.1-8b --ctx 1k,32k --kv fp16,int4 --tp $tp --steps 32 --no-linears \
    --json $R/model_8b_tp$tp.json > $R/model_8b_tp$tp.log 2>&1; echo "rc=$?" >> $R/model_8b_tp$tp.log
  t 8b_tp$tp; snap
done
timeout 30 ./bitdecode bench model --preset llama-3.1-70b --ctx 32k --kv int4 --tp 1 --no-linears > $R/model_70b_tp1.log 2>&1; echo "rc=$?" >> $R/model_70b_tp1.log
timeout 120 ./bitdecode bench model --preset llama-3.1-70b --ctx 1k,32k --kv fp16,int4 --tp 2 --steps 16 --no-linears \
  --json $R/model_70b_tp2.json > $R/model_70b_tp2.log 2>&1; echo "rc=$?" >> $R/model_70b_tp2.log
t 70b; snap
for tp in 1 2; do
  timeout 70 ./bitdecode bench model --preset llama-3.1-8b --ctx 32k --kv int4 --batch max --steps 8 --tp $tp --no-linears \
    --json $R/model_8b_max_tp$tp.json > $R/model_8b_max_tp$tp.log 2>&1; echo "rc=$?" >> $R/model_8b_max_tp$tp.log
  t max_tp$tp; snap
done
for tp in 1 2; do
  port=$((18100 + RANDOM % 500))
  ./bitdecode serve --device cuda --tp $tp --model $M --kv int4 --addr 127.0.0.1:$port --max-seqs 64 --ctx-size 4096 \
    --kv-memory 8GiB --max-queue 4096 > $R/serve_tp$tp.log 2>&1 &
  pid=$!
  for i in $(seq 60); do python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$port/health')" 2>/dev/null && break; sleep 1; done
  timeout 45 ./servebench --url http://127.0.0.1:$port --concurrency 64 --requests 64 --prompt-tokens 3072 \
    --max-tokens 256 --id-max 8000 --json $R/sb_tp$tp.json > $R/sb_tp$tp.txt 2>&1
  kill -INT $pid; wait $pid; t serve_tp$tp; snap
done
