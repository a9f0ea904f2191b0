#!/bin/bash
# eval ppl on gocoder-23m as in bench/results/2026-11-22-cpu-weights (2 windows of 2048, fp16 KV,
# int4 RTN and GPTQ, DEC k_chunk 0 and 32): the new binary on its default integer int4 path and on
# the float path (BITDECODE_CPU_INT4=float), and the base binary on v2.9's int8dot.
M=/work/shared/models/gocoder-23m
tail -c 300000 $M/heldout.txt > calib.txt
run() { # binary mode out
  BITDECODE_CPU_INT4=$2 $1 eval ppl --model $M --file $M/heldout.txt \
    --ctx 2048 --windows 2 --kv fp16 --weights fp16,int4,int4:gptq --dec-k 0,32 \
    --calib calib.txt --device cpu --json $3.json > $3.md 2> $3.log
}
run /tmp/q4/bd-new int8dot ppl_new_int
run /tmp/q4/bd-new float ppl_new_float
run /tmp/q4/bd-base int8dot ppl_base_int8dot
# int3 (after the int3 integer path, binary bd-new3 of this branch):
run3() {
  BITDECODE_CPU_INT4=$2 $1 eval ppl --model $M --file $M/heldout.txt \
    --ctx 2048 --windows 2 --kv fp16 --weights fp16,int3,int3:gptq --dec-k 0,32 \
    --calib calib.txt --device cpu --json $3.json > $3.md 2> $3.log
}
run3 /tmp/q4/bd-new3 int8dot ppl3_new_int
run3 /tmp/q4/bd-new3 float ppl3_new_float
