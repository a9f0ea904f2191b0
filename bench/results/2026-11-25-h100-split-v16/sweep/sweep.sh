#!/bin/bash
# Lead's call, session 9 (2026-11-25): fp16 at 15 x 32K (max batch), the decode attention's
# tuning knobs swept through bench attn (attention alone) and bench model (the whole step).
set -o pipefail
cd .gpu; R=$OUT/r; mkdir -p $R; cp sweep.sh $R/; chmod +x bitdecode
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $R/gpu.txt
CFGS=("" "BITDECODE_DECODE_SPLITS=target:132" "BITDECODE_DECODE_SPLITS=target:264" "BITDECODE_DECODE_SPLITS=target:396" "BITDECODE_DECODE_SPLITS=target:528" "BITDECODE_DECODE_SPLITS=target:792" "BITDECODE_WGMMA_MINB=2" "BITDECODE_WGMMA_STAGES=4" "BITDECODE_WGMMA_MW=2" "BITDECODE_DECODE_FUSE=0")
i=0
for c in "${CFGS[@]}"; do
  echo "== cfg $i: ${c:-default}" >> $R/attn.log
  env $c timeout 30 ./bitdecode bench attn --device cuda --kv fp16 --grid 15x32768,16x32768,15x8192 >> $R/attn.log 2>&1; echo "rc=$?" >> $R/attn.log
  i=$((i+1))
done
snap
for rep in 1 2; do
  i=0
  for c in "${CFGS[@]}"; do
    echo "== rep $rep cfg $i: ${c:-default}" >> $R/model.log
    env $c timeout 30 ./bitdecode bench model --ctx 32k --kv fp16 --batch max --steps 16 --no-linears 2>&1 | grep -E "ms/step|error|Error" >> $R/model.log; echo "rc=$?" >> $R/model.log
    i=$((i+1))
  done
  snap
done
snap
