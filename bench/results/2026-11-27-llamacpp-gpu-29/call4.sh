#!/bin/bash
# Session 29 call 4: prefill (time to first token) of bitdecode's `run` (prefill.cu v4, main d34b959f) and
# llama.cpp's llama-bench (82bb4850) on one H100, Llama-3.1-8B's shapes with random fp16 weights and an
# 8192-token vocabulary, as session 28's call 3 (bench/results/2026-11-27-llamacpp-gpu-28).
exec > >(tee -a $OUT/call4.log) 2>&1
date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
R=$PWD; P=$R/.gpu-s29; W=/tmp/w; mkdir -p $W; cd $W
tar -xJf $P/llama.cpp.tar.xz
xz -dc $P/bitdecode.xz > $W/bitdecode; chmod +x $W/bitdecode
( cmake -S llama.cpp -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_HTML=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF > $OUT/cmake.log 2>&1 \
  && timeout 380 cmake --build build -j 16 --target llama-bench > $OUT/build.log 2>&1
  echo "build rc $? at $SECONDS s" ) &
BPID=$!
python3 $P/gen_st.py /tmp/m8b $P/tokdir > $OUT/gen.log 2>&1
python3 $P/gen_gguf.py $W/m8b.gguf $W/llama.cpp/gguf-py 8192 >> $OUT/gen.log 2>&1
echo "models at $SECONDS s"; ls -la /tmp/m8b $W/m8b.gguf | tail -4
wait $BPID
tail -3 $OUT/build.log
export BITDECODE_CACHE_DIR=/tmp/bdc
for kv in fp16 int4; do for p in 512 512 4096 32000; do
  [ $SECONDS -lt 470 ] && timeout 90 ./bitdecode run --model /tmp/m8b --device cuda --kv $kv --max-tokens 1 --temperature 0 --prompt-file $P/p$p.txt 2>&1 >/dev/null | grep "prompt tokens\|rror" | sed "s/^/$kv p$p: /" | tee -a $OUT/bd-prefill.txt
done; done
[ -x build/bin/llama-bench ] && [ $SECONDS -lt 500 ] && timeout $((590-SECONDS)) build/bin/llama-bench -m m8b.gguf -ngl 99 -fa on -p 512,4096,32000 -n 0 -r 2 -o md 2>&1 | tee $OUT/lb-pp.md
echo "end at $SECONDS s"
