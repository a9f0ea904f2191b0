#!/bin/bash
# Lead's TP call 2 (2026-11-25, nvidia-h100-x2): where the TP 2 8B step's time goes (host profile, shard linears).
set -o pipefail
cd .gpu; G=$PWD; R=$OUT/r; mkdir -p $R
python3 -c "import lzma,tarfile; tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')"
chmod +x bitdecode
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export BITDECODE_LIBNCCL=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { date -u +%T" $*" >> $R/times.txt; }
date -u > $R/times.txt
for tp in 2 1; do
  BITDECODE_CPUPROFILE=$R/cpu_tp$tp.pprof timeout 90 ./bitdecode bench model --preset llama-3.1-8b --ctx 1k --kv fp16 --tp $tp --steps 400 --no-linears \
    > $R/prof_tp$tp.log 2>&1; echo "rc=$?" >> $R/prof_tp$tp.log; t prof_tp$tp; snap
done
BITDECODE_NO_GRAPHS=1 timeout 60 ./bitdecode bench model --preset llama-3.1-8b --ctx 1k --kv fp16 --tp 2 --steps 64 --no-linears > $R/nographs_tp2.log 2>&1; t nographs; snap
timeout 120 ./bitdecode bench model --preset llama-3.1-8b --ctx 32k --kv fp16,int4 --tp 2 --steps 64 > $R/linears_tp2.log 2>&1; echo "rc=$?" >> $R/linears_tp2.log; t linears; snap
