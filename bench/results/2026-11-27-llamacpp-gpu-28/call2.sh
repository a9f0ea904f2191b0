#!/bin/bash
# Session 28 call 2 (same warm machine as call 1): bitdecode's bench model beside call 1's llama-bench rows, then batch 8 x 32K in both.
exec > >(tee -a $OUT/call2.log) 2>&1
set -x
date -u; W=/tmp/w; cd $W; ls build/bin/llama-bench m.gguf bitdecode || exit 1
export BITDECODE_CACHE_DIR=/tmp/bdc
timeout 250 ./bitdecode bench model --preset llama-3.1-8b --ctx 512,32768 --kv fp16,int8,int4,int2 --batch 1 --no-linears 2>&1 | tee $OUT/bd-b1.txt
echo "ours b1 done at $SECONDS"
timeout 120 ./bitdecode bench model --preset llama-3.1-8b --ctx 32768 --kv fp16,int8,int4 --batch 8 --no-linears 2>&1 | tee $OUT/bd-b8.txt
echo "ours b8 done at $SECONDS"
for kv in f16 q4_0; do
  [ $SECONDS -lt 480 ] && timeout $((580-SECONDS)) build/bin/llama-batched-bench -m m.gguf -ngl 99 -fa on -c $((8*32896)) -b 2048 -ub 512 -npp 32768 -ntg 32 -npl 8 -ctk $kv -ctv $kv 2>&1 | grep -v "^llama_\|^load\|^print_info\|^ggml_\|^\.\|^graph\|^sched\|^common" | tee $OUT/lbb-$kv.txt
done
echo "end at $SECONDS"
