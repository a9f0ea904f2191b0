#!/bin/bash
# s19-dec call 2: gocoder-23m perplexity, int3 weights, DEC k_chunk 0 and 64, fp16 KV, ctx 512,
# 2 windows (pplmini: eval ppl's core, a small driver so that the model fits the call), on the
# CPU and on the GPU: the q6 route (residual in device memory; chunks of 1 token: decode, and of
# 256: prefill) and the old route (BITDECODE_DEC_Q3=1). The model travels as its two byte planes.
D=$(cd "$(dirname "$0")" && pwd)
R=/tmp/r; rm -rf $R; mkdir -p $R; cp $D/call2.sh $R/
T0=$(date +%s); END=$((T0 + 250))
tl() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/timeline.txt; }
lim() { local left=$((END - $(date +%s))); [ $left -gt $1 ] && echo $1 || echo $((left > 1 ? left : 1)); }
snap() { tar czf $OUT/results.tmp -C /tmp r && mv $OUT/results.tmp $OUT/results.tgz; }
M=/tmp/m/gocoder-23m; mkdir -p $M /tmp/bin
cp $D/config.json $D/generation_config.json $D/tokenizer_config.json $M/
xz -dc $D/tokenizer.json.xz > $M/tokenizer.json; xz -dc $D/heldout.txt.xz > $M/heldout.txt
xz -dc $D/pplmini.xz > /tmp/bin/pplmini; chmod +x /tmp/bin/pplmini
xz -dc $D/lo.xz > /tmp/lo.bin; xz -dc $D/hi.xz > /tmp/hi.bin
python3 -c "
lo=open('/tmp/lo.bin','rb').read(); hi=open('/tmp/hi.bin','rb').read()
b=bytearray(len(lo)+len(hi)); b[0::2]=lo; b[1::2]=hi
open('$M/model.safetensors','wb').write(b)"
sha256sum $M/model.safetensors > $R/model.sha256
tl "unpacked"
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/gpu.txt 2>&1
export BITDECODE_CACHE_DIR=/tmp/bdc; mkdir -p /tmp/bdc
t() { local n=$1 l=$2; shift 2; timeout $(lim $l) "$@" > $R/$n.log 2>&1; local rc=$?; tl "$n rc=$rc"; return $rc; }
P="/tmp/bin/pplmini --model $M --file $M/heldout.txt"
# the CPU figure came from the first attempt of this call (cpu_c256.log)
BITDECODE_DEC_RESIDUAL=device t gpu_c256 240 $P --device cuda --chunk 256 &
BITDECODE_DEC_RESIDUAL=device t gpu_c1 240 $P --device cuda --chunk 1 &
BITDECODE_DEC_RESIDUAL=device BITDECODE_DEC_Q3=1 t gpu_c1_q3 240 $P --device cuda --chunk 1 --dec-k 64 &
wait
tl end; snap
