#!/bin/bash
# session 27 call 2 (2026-11-27): the OLMo 3 and SmolLM3-window fixtures made by the
# device's transformers, then every transformers fixture (the new families and yarn
# among them) on the GPU in every KV format (kvcache/gpukv TestGPUTransformers).
set -o pipefail
T0=$(date +%s); R=$OUT
el() { echo $(( $(date +%s) - T0 )); }
t() { echo "$(date -u +%T) $(el) s $*" >> $R/times.txt; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/times.txt 2>&1
timeout 150 python3 tools/hfcheck/gen.py internal/hfcheck/testdata olmo3-swa16-yarn-gqa2-bf16 smollm3-nope-swa16-bf16 > $R/gen.log 2>&1; echo "rc=$?" >> $R/gen.log; t gen
(cd internal/hfcheck/testdata && tar cJf $R/fx2.tar.xz olmo3-swa16-yarn-gqa2-bf16 smollm3-nope-swa16-bf16)
cd .gpu-s27 && xz -d gpukv.test.xz && chmod +x gpukv.test
export BITDECODE_CACHE_DIR=/tmp/bdc
timeout 400 ./gpukv.test -test.v -test.run '^TestGPUTransformers$' > $R/gpukv.log 2>&1; echo "rc=$?" >> $R/gpukv.log; t gpukv
grep -E "^(---|    ---|ok|FAIL|PASS|rc=)" $R/gpukv.log | grep -E "FAIL|yarn|smollm3|olmo3|seedoss|rc=|^---|^ok|^PASS" | head -40
grep -E "ok;|FAILED|Error" $R/gen.log | cut -c1-300
cat $R/times.txt
