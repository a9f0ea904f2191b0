#!/bin/bash
# session 27 call 10 (2026-11-27): the CWM fixture (integer special tokens) made by the device's
# transformers, then every fixture on the GPU (TestGPUTransformers).
set -o pipefail
T0=$(date +%s); R=$OUT
el() { echo $(( $(date +%s) - T0 )); }
t() { echo "$(date -u +%T) $(el) s $*" >> $R/times.txt; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/times.txt 2>&1
timeout 150 python3 tools/hfcheck/gen.py internal/hfcheck/testdata cwm-swa16-gqa2-bf16 > $R/gen.log 2>&1; echo "rc=$?" >> $R/gen.log; t gen
[ -f internal/hfcheck/testdata/cwm-swa16-gqa2-bf16/golden.json ] || rm -rf internal/hfcheck/testdata/cwm-swa16-gqa2-bf16
TD=$(python3 -c "import transformers,os;print(os.path.dirname(transformers.__file__))")
(cd $TD && tar cf /tmp/src3.tar models/cwm 2>>$R/gen.log)
(cd internal/hfcheck/testdata && tar cJf $R/fx10.tar.xz cwm-swa16-gqa2-bf16 2>>$R/gen.log)
cd .gpu-s27 && xz -d gpukv.test.xz && chmod +x gpukv.test
export BITDECODE_CACHE_DIR=/tmp/bdc
timeout 300 ./gpukv.test -test.v -test.run '^TestGPUTransformers$' > $R/gpukv.log 2>&1; echo "rc=$?" >> $R/gpukv.log; t gpukv
grep -E "^(---|    ---|ok|FAIL|PASS|rc=)" $R/gpukv.log | grep -E "FAIL|cwm|rc=|^---|^ok|^PASS" | head -20
grep -E "ok;|FAILED|Error|rror" $R/gen.log | cut -c1-400 | head -20
cat $R/times.txt
