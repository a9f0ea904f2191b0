#!/bin/bash
# Lead's final call (2026-11-25, nvidia-h100-x2): merged main after the pool change (s8-tpgraph) and the
# caches' bounded waits: the GPU tests they touch, TP greedy, one TP 1 / TP 2 step.
set -o pipefail
cd .gpu; G=$PWD; M=$G/gocoder-23m; R=$OUT/r; mkdir -p $R
python3 -c "import lzma,tarfile; tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')"
chmod +x bitdecode *.test
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export BITDECODE_LIBNCCL=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2
export BITDECODE_GOCODER_DIR=$M
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt
T=110
tst() { (timeout $T ./$2 -test.v -test.timeout ${T}s -test.run "$3" > $R/$1.log 2>&1; echo "rc=$?" >> $R/$1.log) & }
tst backend backend.test '^(TestPool.*|TestGroup.*|TestModelMatchesCPU|TestModelPDLSameBits|TestLinearGraphReplay|TestQueuedUploads|TestLinearGroup|TestBatchInvariantLinear)$'
tst gpukv gpukv.test '^(TestGPUCacheGolden|TestGPUCacheMatchesReference|TestGPUGraphReplaySameBits|TestGPUBatchInvariantLogits|TestGPUCacheBatchInvariant|TestGPUPlaneCacheGolden|TestGPUScheduler)$'
wait; t tests; snap
for tp in 1 2; do
  timeout 40 ./bitdecode run --device cuda --tp $tp --model $M --kv int4 --max-tokens 256 --compare-fp16=false \
    "func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {" > $R/run_tp$tp.txt 2> $R/run_tp$tp.err
done
cmp $R/run_tp1.txt $R/run_tp2.txt > $R/run_cmp.txt 2>&1 && echo identical >> $R/run_cmp.txt; t greedy; snap
for tp in 1 2; do
  timeout 45 ./bitdecode bench model --preset llama-3.1-8b --ctx 32k --kv fp16,int4 --tp $tp --steps 32 --no-linears > $R/model_tp$tp.log 2>&1; echo "rc=$?" >> $R/model_tp$tp.log; t model_tp$tp; snap
done
