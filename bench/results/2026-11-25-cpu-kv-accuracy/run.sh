#!/bin/bash
# CPU accuracy runs of issue 21 (rotation, the float32-parameter reference),
# gocoder-23m, 2-core VM; run from the repo root with the built binary in $B.
M=${M:-../shared/models/gocoder-23m} B=${B:-./bitdecode} D=bench/results/2026-11-25-cpu-kv-accuracy
$B eval ppl --device cpu --model $M --file $M/heldout.txt --ctx 2048 --windows 16 \
  --kv fp16,int8,int8:rot,int4,int4:rot,int4:kc32:v32,int4:kc32:v32:rot,int4:kt128,int4:kt128:rot,int2,int2:rot,int2:kc32:v32,int2:kc32:v32:rot,k4v2,k4v2:rot,int2@3+5=int8,int2:rot@3+5=int8:rot \
  --json $D/rot.json > $D/rot.md 2> $D/rot.log
$B eval ppl --device cpu --model $M --file $M/heldout.txt --ctx 2048 --windows 16 --kv-reference \
  --kv fp16,int4,int4:kc32:v32,int2,k4v2 --json $D/ref.json > $D/ref.md 2> $D/ref.log
