#!/bin/bash
# moe call 1: make the three MoE fixtures with transformers 5.17, list what save_pretrained
# wrote, dump transformers' MoE modeling code, and check torch.topk's tie order.
H=$(cd "$(dirname "$0")" && pwd)
W=/tmp/hfw; rm -rf $W; mkdir -p $W
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/env.log
python3 -c 'import torch, transformers, safetensors; print("torch", torch.__version__, "transformers", transformers.__version__, "safetensors", safetensors.__version__)' 2>&1 | tee -a $OUT/env.log
export PYTHONUNBUFFERED=1
NEW="mixtral-e8top2-gqa3-bf16 qwen2moe-e4top2-shared-fp16 qwen3moe-e8top2-gqa3-d128-bf16"
( time python3 $H/gen.py $W $NEW ) > $OUT/gen.log 2>&1
echo "gen rc=$?" | tee -a $OUT/gen.log
grep -E "ok;|FAILED|Error|error" $OUT/gen.log | cut -c1-1200
python3 - > $OUT/keys.log 2>&1 <<'PY'
import json, os, glob
from safetensors import safe_open
for d in sorted(glob.glob('/tmp/hfw/*')):
    print("==", os.path.basename(d), sorted(os.listdir(d)))
    print(open(d + '/config.json').read())
    for f in sorted(glob.glob(d + '/*.safetensors')):
        with safe_open(f, 'pt') as g:
            for k in sorted(g.keys()):
                t = g.get_slice(k)
                print(k, t.get_dtype(), t.get_shape())
PY
head -c 3000 $OUT/keys.log
python3 - > $OUT/topk.log 2>&1 <<'PY'
import torch
for dev in ("cpu", "cuda"):
    for x in ([1., 2., 2., 1., 2.], [0.25]*8, [3., 1., 3., 3., 0., 3.]):
        t = torch.tensor(x, device=dev)
        for k in (2, 3):
            print(dev, x, k, torch.topk(t, k).indices.tolist(), torch.topk(torch.softmax(t, -1), k).indices.tolist())
    t = torch.tensor([[0.1, 0.5, 0.5, 0.2]] * 3, device=dev)
    print(dev, "2d", torch.topk(t, 2, dim=-1).indices.tolist())
PY
cat $OUT/topk.log
P=$(python3 -c 'import transformers, os; print(os.path.dirname(transformers.__file__))')
mkdir -p /tmp/src
cp $P/models/mixtral/modeling_mixtral.py $P/models/qwen2_moe/modeling_qwen2_moe.py $P/models/qwen3_moe/modeling_qwen3_moe.py \
   $P/models/qwen2_moe/configuration_qwen2_moe.py $P/models/qwen3_moe/configuration_qwen3_moe.py $P/models/mixtral/configuration_mixtral.py /tmp/src/ 2>&1
cp $P/conversion_mapping.py /tmp/src/ 2>&1; cp $P/integrations/moe.py /tmp/src/ 2>&1
ls $P/integrations | grep -i -E "moe|expert" ; ls $P | grep -i -E "conver|core_model"
cp $P/core_model_loading.py /tmp/src/ 2>&1
grep -rn "def save_pretrained" $P/modeling_utils.py | head -3
(cd /tmp/src && tar czf $OUT/src.tgz *)
(cd $W && tar czf $OUT/fixtures.tgz $NEW)
du -sh $W/*
