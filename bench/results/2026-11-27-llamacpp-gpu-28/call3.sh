#!/bin/bash
# Session 28 call 3: prefill (time to first token) of bitdecode's `run` and llama.cpp's llama-bench on one
# H100, Llama-3.1-8B's shapes with random fp16 weights and an 8192-token vocabulary (gocoder-23m's tokenizer).
exec > >(tee -a $OUT/call3.log) 2>&1
set -x
date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
R=$PWD; W=/tmp/w; mkdir -p $W; cd $W
tar -xJf $R/.gpu-s28/llama.cpp.tar.xz
xz -dc $R/.gpu-s28/bitdecode.xz > $W/bitdecode; chmod +x $W/bitdecode
( cmake -S llama.cpp -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_HTML=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF > $OUT/cmake.log 2>&1 \
  && timeout 400 cmake --build build -j 16 --target llama-bench > $OUT/build.log 2>&1
  echo "build rc $? at $SECONDS s" ) &
BPID=$!
python3 $R/.gpu-s28/gen_st.py /tmp/m8b $R/.gpu-s28/tokdir > $OUT/gen.log 2>&1
python3 $R/.gpu-s28/gen_gguf.py $W/m8b.gguf $W/llama.cpp/gguf-py 8192 >> $OUT/gen.log 2>&1
echo "models at $SECONDS s"; ls -la /tmp/m8b $W/m8b.gguf
wait $BPID
export BITDECODE_CACHE_DIR=/tmp/bdc
for p in 512 512 4096 32000; do
  [ $SECONDS -lt 450 ] && timeout 120 ./bitdecode run --model /tmp/m8b --device cuda --kv fp16 --max-tokens 1 --temperature 0 --prompt-file $R/.gpu-s28/p$p.txt 2>&1 >/dev/null | grep -v "^loading\|^\s*$" | tee -a $OUT/bd-prefill.txt
done
for p in 4096 32000; do
  [ $SECONDS -lt 480 ] && timeout 120 ./bitdecode run --model /tmp/m8b --device cuda --kv int4 --max-tokens 1 --temperature 0 --prompt-file $R/.gpu-s28/p$p.txt 2>&1 >/dev/null | grep -v "^loading\|^\s*$" | tee -a $OUT/bd-prefill.txt
done
[ -x build/bin/llama-bench ] && [ $SECONDS -lt 520 ] && timeout $((590-SECONDS)) build/bin/llama-bench -m m8b.gguf -ngl 99 -fa on -p 512,4096,32000 -n 0 -r 2 -o md 2>&1 | tee $OUT/lb-pp.md
echo "end at $SECONDS s"
