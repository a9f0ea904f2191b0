#!/bin/bash
# Session 29 call 8: the prefill chunk with int4 weights (each chunk dequantizes the layers' weights to fp16 for
# cuBLASLt): a 31,993-token prompt at --prefill-chunk 512, 1024, 2048, int4 and fp16 KV.
exec > >(tee -a $OUT/call8.log) 2>&1
date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
R=$PWD; P=$R/.gpu-s29; W=/tmp/w; mkdir -p $W; cd $W
xz -dc $P/bitdecode.xz > $W/bitdecode; chmod +x $W/bitdecode
python3 $P/gen_st.py /tmp/m8b $P/tokdir > $OUT/gen.log 2>&1; echo "model at $SECONDS s"
export BITDECODE_CACHE_DIR=/tmp/bdc
for w in int4 fp16; do for kv in int4; do for c in 512 1024 2048 512; do
  [ $SECONDS -lt 420 ] && timeout 100 ./bitdecode run --model /tmp/m8b --device cuda --weights $w --kv $kv --prefill-chunk $c --max-tokens 1 --temperature 0 --prompt-file $P/p32000.txt 2>&1 >/dev/null | grep -o "[0-9]* prompt tokens in [0-9.]*[m]*s ([0-9]* tok/s)\|rror.*" | sed "s/^/weights $w kv $kv chunk $c: /"
done; done; done
echo "end at $SECONDS s"
