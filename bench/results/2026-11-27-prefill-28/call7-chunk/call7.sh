#!/bin/bash
# Session 28 call 7: bitdecode run's prefill of a 32K prompt by --prefill-chunk (512, the default, 1024, 2048), fp16 and int4 KV, the merged tree (bc92d041).
exec > >(tee -a $OUT/call.log) 2>&1
date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
R=$PWD; P=$R/.gpu-s28b; W=/tmp/w; mkdir -p $W
xz -dc $P/bitdecode.xz > $W/bitdecode; chmod +x $W/bitdecode
export BITDECODE_CACHE_DIR=/tmp/bdc
python3 $P/gen_st.py /tmp/m8b $P/tokdir > $OUT/gen.log 2>&1; echo "gen rc $? at $SECONDS s"
$W/bitdecode run --model /tmp/m8b --device cuda --kv fp16 --max-tokens 1 --temperature 0 --prompt-file $P/p4096.txt 2>&1 >/dev/null | grep "prompt tokens"
for rep in 1 2; do for kv in fp16 int4; do for c in 512 1024 2048; do
  [ $SECONDS -lt 240 ] || continue
  echo -n "rep $rep kv $kv chunk $c: "; timeout 40 $W/bitdecode run --model /tmp/m8b --device cuda --kv $kv --prefill-chunk $c --max-tokens 1 --temperature 0 --prompt-file $P/p32000.txt 2>&1 >/dev/null | grep -o "[0-9]* prompt tokens in [0-9.]*m*s ([0-9]* tok/s)\|rror.*"
done; done; done
echo "end at $SECONDS s"
