#!/bin/bash
# Serving throughput of gocoder-23m on the GPU: bitdecode serve + tools/servebench, per KV format,
# beside bench model on the same shapes. Run from the repo root with .gpu/ carried.
set -o pipefail
G=${G:-$PWD/.gpu}; M=$G/gocoder-23m; R=$OUT/r/serve; mkdir -p $R
C=${C:-64}; P=${P:-3072}; N=${N:-512}
for kv in fp16 int4 int2; do
  for bi in false; do
    port=$((18100 + RANDOM % 500))
    $G/bitdecode serve --device cuda --model $M --kv $kv --addr 127.0.0.1:$port --max-seqs $C --ctx-size 4096 \
      --kv-memory 8GiB --batch-invariant=$bi --max-queue 4096 > $R/serve_${kv}_bi$bi.log 2>&1 &
    pid=$!
    for i in $(seq 60); do python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$port/health')" 2>/dev/null && break; sleep 1; done
    timeout 100 $G/servebench --url http://127.0.0.1:$port --concurrency $C --requests $((2*C)) --prompt-tokens $P \
      --max-tokens $N --id-max 8000 --json $R/sb_${kv}_bi$bi.json 2>&1 | tee $R/sb_${kv}_bi$bi.txt
    python3 -c "import urllib.request as u; print(u.urlopen('http://127.0.0.1:$port/metrics').read().decode())" > $R/metrics_${kv}_bi$bi.txt
    kill -INT $pid; wait $pid
  done
done
timeout 60 $G/bitdecode bench model --preset $M --ctx 3k,4k --kv fp16,int4,int2 --batch $C --steps 32 --no-linears \
  --json $R/model.json 2>&1 | tee $R/model.txt
