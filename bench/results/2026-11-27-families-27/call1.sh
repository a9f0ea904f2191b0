#!/bin/bash
# session 27 call 1 (2026-11-27): the GPU tests session 26's calls did not reach, and the
# conformance fixtures of new families/RoPE rules made by the device's transformers.
set -o pipefail
T0=$(date +%s); R=$OUT; cd .gpu-s27
el() { echo $(( $(date +%s) - T0 )); }
t() { echo "$(date -u +%T) $(el) s $*" >> $R/times.txt; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/times.txt 2>&1
xz -d kernels.test.xz; chmod +x kernels.test
export BITDECODE_CACHE_DIR=/tmp/bdc
( timeout 330 ./kernels.test -test.v -test.run '^TestGPUDecodeWindowMatchesReference$' > $R/win.log 2>&1; echo "rc=$?" >> $R/win.log; t win ) &
( timeout 330 ./kernels.test -test.v -test.run '^TestGPUPlanesSplits$' > $R/planes.log 2>&1; echo "rc=$?" >> $R/planes.log; t planes ) &
( timeout 330 ./kernels.test -test.v -test.run '^TestGPUDecodeLookAheadMatchesRefold$' > $R/la.log 2>&1; echo "rc=$?" >> $R/la.log; t la ) &
# fixtures (CPU torch), the device's transformers sources for the new families
(
  python3 -c "import transformers,torch;print(transformers.__version__, torch.__version__)" > $R/src.txt 2>&1
  TD=$(python3 -c "import transformers,os;print(os.path.dirname(transformers.__file__))")
  python3 -c "from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES as M; print(' '.join(sorted(M)))" >> $R/src.txt 2>&1
  mkdir -p /tmp/src && cd $TD && tar cf /tmp/src/src.tar modeling_rope_utils.py $(ls -d models/smollm3 models/olmo3 models/seed_oss models/olmo2 models/qwen3 models/exaone4 models/glm4 models/ernie4_5 models/apertus models/hunyuan_v1_dense models/arcee models/falcon3 2>/dev/null) 2>>$R/src.txt
  cd - >/dev/null
  timeout 200 python3 ../tools/hfcheck/gen.py /tmp/fx qwen3-yarn-gqa2-d128-bf16 llama-yarn-mscale-d64-fp16 qwen2-yarn-af-notrunc-bf16 smollm3-nope-gqa2-bf16 olmo3-swa16-gqa2-bf16 seedoss-bias-gqa2-bf16 > $R/gen.log 2>&1; echo "rc=$?" >> $R/gen.log
  (cd /tmp && tar cJf $R/fx.tar.xz fx src/src.tar)
  t gen
) &
wait
t end
for f in win planes la; do echo "== $f: $(grep -c '^--- FAIL' $R/$f.log) FAIL, $(grep -c '^--- PASS\|^    --- PASS' $R/$f.log) PASS, $(tail -1 $R/$f.log)"; done
grep -h "^---\|^FAIL\|^ok\|^PASS" $R/*.log | head -40
tail -30 $R/gen.log; cat $R/src.txt | head -5; cat $R/times.txt
