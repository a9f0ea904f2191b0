#!/bin/bash
# Tensor parallelism on two GPUs of one host (issue #23), for the lead: kind nvidia-h100-x2.
# Run from the repo root with .gpu-tp/ carried, holding this script and bundle.tar.xz (bitdecode,
# servebench and gocoder-23m; README.md here says how to build it). About 5 minutes; logs under
# $OUT/r, tarred into $OUT/results.tgz.
set -o pipefail
G=${G:-$PWD/.gpu-tp}; M=$G/gocoder-23m; R=$OUT/r; mkdir -p $R
if [ ! -x $G/bitdecode ]; then # no xz binary there: python's lzma
  python3 -c "import lzma, sys, tarfile; tarfile.open(fileobj=lzma.open(sys.argv[1])).extractall(sys.argv[2])" $G/bundle.tar.xz $G || exit 1
fi
export NCCL_NVLS_ENABLE=0 # bitdecode sets it in libc's environment itself; this is for anything else
nvidia-smi --query-gpu=index,name,memory.total --format=csv > $R/gpus.txt 2>&1
nvidia-smi topo -m >> $R/gpus.txt 2>&1
# bitdecode finds libnccl.so.2 itself or through BITDECODE_LIBNCCL (docs/gpu.md):
# (pip's nvidia-nccl-cu13 there: bench/results/2026-11-25-h100x2-nccl).
if [ -z "$BITDECODE_LIBNCCL" ]; then
  export BITDECODE_LIBNCCL=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2
  [ -f "$BITDECODE_LIBNCCL" ] || export BITDECODE_LIBNCCL=$(find / -name libnccl.so.2 2>/dev/null | head -1)
fi
echo "BITDECODE_LIBNCCL=$BITDECODE_LIBNCCL" | tee $R/env.txt

# 1. gocoder-23m greedy, --tp 2 against --tp 1, token for token (256 tokens, int4 and fp16 KV).
for kv in int4 fp16; do
  for tp in 1 2; do
    timeout 120 $G/bitdecode run --device cuda --tp $tp --model $M --kv $kv --max-tokens 256 --compare-fp16=false \
      "func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {" > $R/run_${kv}_tp$tp.txt 2> $R/run_${kv}_tp$tp.err
  done
  python3 - $R/run_${kv}_tp1.txt $R/run_${kv}_tp2.txt <<'PY' | tee $R/run_${kv}_cmp.txt
import sys
a, b = (open(p).read() for p in sys.argv[1:3])
n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
print(f"{sys.argv[1]} vs {sys.argv[2]}: {'identical' if a == b else f'first difference at character {n} of {len(a)}/{len(b)}'}")
PY
done

# 2. Llama-3.1-8B shapes at 32K, B = 1 and --batch max, TP 1 then TP 2 (same call, same GPUs).
for tp in 1 2; do
  timeout 150 $G/bitdecode bench model --preset llama-3.1-8b --ctx 32k --kv int4,fp16 --tp $tp --no-linears \
    --json $R/model_8b_tp$tp.json 2>&1 | tee $R/model_8b_tp$tp.log
  timeout 150 $G/bitdecode bench model --preset llama-3.1-8b --ctx 32k --kv int4 --batch max --steps 8 --tp $tp --no-linears \
    --json $R/model_8b_max_tp$tp.json 2>&1 | tee $R/model_8b_max_tp$tp.log
done

# 3. Llama-3.1-70B shapes: fp16 weights do not fit one GPU (the message), and run at TP 2.
timeout 60 $G/bitdecode bench model --preset llama-3.1-70b --ctx 32k --kv int4 --tp 1 --no-linears 2>&1 | tee $R/model_70b_tp1.log
timeout 240 $G/bitdecode bench model --preset llama-3.1-70b --ctx 32k --kv int4,fp16 --tp 2 --no-linears \
  --json $R/model_70b_tp2.json 2>&1 | tee $R/model_70b_tp2.log

# 4. serve --tp 2 under servebench (gocoder-23m, 64 streams), against --tp 1.
for tp in 1 2; do
  port=$((18100 + RANDOM % 500))
  $G/bitdecode serve --device cuda --tp $tp --model $M --kv int4 --addr 127.0.0.1:$port --max-seqs 64 --ctx-size 4096 \
    --kv-memory 8GiB --max-queue 4096 > $R/serve_tp$tp.log 2>&1 &
  pid=$!
  for i in $(seq 60); do python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$port/health')" 2>/dev/null && break; sleep 1; done
  timeout 100 $G/servebench --url http://127.0.0.1:$port --concurrency 64 --requests 128 --prompt-tokens 3072 \
    --max-tokens 512 --id-max 8000 --json $R/sb_tp$tp.json 2>&1 | tee $R/sb_tp$tp.txt
  kill -INT $pid; wait $pid
done
tar czf $OUT/results.tgz -C $OUT r
