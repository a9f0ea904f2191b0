#!/bin/bash
# H200: the attention grid and the step table (issue #19 item 4), and the DEC model test on merged main.
set -o pipefail
cd "$(dirname "$0")"
L=$OUT/logs; mkdir -p $L
python3 -c "import lzma,tarfile; tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('b')"
cd b; chmod +x bitdecode gpu.test
export BITDECODE_GOCODER_DIR=$PWD/gocoder-23m
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv; } > $L/gpu.txt 2>&1
t0=$(date +%s)
timeout 90 ./gpu.test -test.run 'TestModelDECMatchesCPU|TestQuantLinearDEC|TestModelMatchesCPU' -test.v > $L/backend.log 2>&1; echo "rc=$?" >> $L/backend.log
echo "tests $(( $(date +%s) - t0 )) s" >> $L/gpu.txt
timeout 100 ./bitdecode bench model --ctx 32k,128k --kv fp16,int4,int2 --steps 64 --no-linears --json $L/model_b1.json > $L/model_b1.log 2>&1; echo "rc=$?" >> $L/model_b1.log
echo "b1 $(( $(date +%s) - t0 )) s" >> $L/gpu.txt
timeout 150 ./bitdecode bench model --ctx 32k --kv fp16,int4,int2 --batch max --steps 16 --no-linears --json $L/model_max.json > $L/model_max.log 2>&1; echo "rc=$?" >> $L/model_max.log
echo "max $(( $(date +%s) - t0 )) s" >> $L/gpu.txt
timeout 200 ./bitdecode bench attn --device cuda --kernel auto --kv fp16,int8,int4,int2,k4v2 --json $L/gpu_attn.json > $L/gpu_attn.md 2> $L/gpu_attn.log; echo "rc=$?" >> $L/gpu_attn.log
echo "all $(( $(date +%s) - t0 )) s" >> $L/gpu.txt
cd $OUT && tar czf results.tgz logs && rm -rf logs
