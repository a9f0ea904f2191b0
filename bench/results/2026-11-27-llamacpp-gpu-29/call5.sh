#!/bin/bash
# Session 29 call 5: time to first token of a 512-token prompt in a warm server (serve on the GPU, requests one
# after another) beside `run`'s one-shot figure, Llama-3.1-8B shapes with random fp16 weights (gen_st.py).
exec > >(tee -a $OUT/call5.log) 2>&1
date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
R=$PWD; P=$R/.gpu-s29; W=/tmp/w; mkdir -p $W; cd $W
xz -dc $P/bitdecode.xz > $W/bitdecode; chmod +x $W/bitdecode
python3 $P/gen_st.py /tmp/m8b $P/tokdir > $OUT/gen.log 2>&1; echo "model at $SECONDS s"
export BITDECODE_CACHE_DIR=/tmp/bdc
for bi in true false; do
  ./bitdecode serve --model /tmp/m8b --device cuda --kv fp16 --kv-memory 4GiB --max-seqs 4 --prefill-chunk 512 --batch-invariant=$bi --addr 127.0.0.1:18080 > $OUT/serve-$bi.log 2>&1 &
  SP=$!
  for i in $(seq 1 90); do grep -q "listening on" $OUT/serve-$bi.log && break; sleep 1; done
  echo "serve (batch-invariant=$bi) up at $SECONDS s"
  timeout 120 python3 $P/ttft.py http://127.0.0.1:18080 $P/p512.txt 6
  timeout 60 python3 $P/ttft.py http://127.0.0.1:18080 $P/p4096.txt 3
  kill $SP; wait $SP 2>/dev/null
  grep -o "prompt=[0-9]* .*ttft=[0-9.]*ms" $OUT/serve-$bi.log
done
echo "end at $SECONDS s"
