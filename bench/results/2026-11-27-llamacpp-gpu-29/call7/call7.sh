#!/bin/bash
# Session 29 call 7: decode with low-bit weights beside llama.cpp's CUDA engine on one H100: llama.cpp's Q4_0
# (llama-quantize of the F16 GGUF, its default q6_K output) against bitdecode's --weights int4 (the int8 head),
# Llama-3.1-8B's layer shapes with random fp16 weights and an 8192-token vocabulary, one sequence.
exec > >(tee -a $OUT/call7.log) 2>&1
date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
R=$PWD; P=$R/.gpu-s29; W=/tmp/w; mkdir -p $W; cd $W
tar -xJf $P/llama.cpp.tar.xz
xz -dc $P/bitdecode.xz > $W/bitdecode; chmod +x $W/bitdecode
( cmake -S llama.cpp -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_HTML=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF > $OUT/cmake.log 2>&1 \
  && timeout 380 cmake --build build -j 16 --target llama-bench llama-quantize > $OUT/build.log 2>&1
  echo "build rc $? at $SECONDS s" ) &
BPID=$!
python3 $P/gen_st.py /tmp/m8b $P/tokdir > $OUT/gen.log 2>&1
python3 $P/gen_gguf.py $W/m8b.gguf $W/llama.cpp/gguf-py 8192 >> $OUT/gen.log 2>&1
echo "models at $SECONDS s"
export BITDECODE_CACHE_DIR=/tmp/bdc
# bitdecode first (the GPU is free while llama.cpp builds on the CPU cores; its load quantizes on the CPU)
for p in 512 32000; do
  timeout 150 ./bitdecode run --model /tmp/m8b --device cuda --weights int4 --kv int4 --max-tokens 128 --temperature 0 --prompt-file $P/p$p.txt 2>&1 >/dev/null | grep "prompt tokens\|rror" | sed "s/^/int4 weights p$p: /" | tee -a $OUT/bd-decode.txt
done
wait $BPID
tail -2 $OUT/build.log
[ -x build/bin/llama-quantize ] && build/bin/llama-quantize m8b.gguf m8b-q4_0.gguf Q4_0 > $OUT/quant.log 2>&1; tail -2 $OUT/quant.log
# again after the build, the CPU quiet; and with an fp16 cache, as llama.cpp's default
for c in "512 int4" "32000 int4" "32000 fp16"; do
  set -- $c
  [ $SECONDS -lt 430 ] && timeout 100 ./bitdecode run --model /tmp/m8b --device cuda --weights int4 --kv $2 --max-tokens 128 --temperature 0 --prompt-file $P/p$1.txt 2>&1 >/dev/null | grep "prompt tokens\|rror" | sed "s/^/int4 weights p$1 kv $2 (quiet CPU): /" | tee -a $OUT/bd-decode.txt
done
[ -x build/bin/llama-bench ] && [ $SECONDS -lt 500 ] && timeout $((590-SECONDS)) build/bin/llama-bench -m m8b-q4_0.gguf -ngl 99 -fa on -p 0 -n 128 -d 512,32000 -r 2 -o md 2>&1 | tee $OUT/lb-q4_0.md
echo "end at $SECONDS s"
