#!/bin/bash
# Session 28 call 1: llama.cpp (82bb4850) built for CUDA on the device, then
# llama-bench and bitdecode's bench model on Llama-3.1-8B shapes, random fp16 weights.
exec > >(tee -a $OUT/call1.log) 2>&1
set -x
date -u; nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv
nvcc --version | tail -2; cmake --version | head -1
R=$PWD; W=/tmp/w; mkdir -p $W; cd $W
tar -xJf $R/.gpu-s28/llama.cpp.tar.xz
xz -dc $R/.gpu-s28/bitdecode.xz > $W/bitdecode; chmod +x $W/bitdecode
( cmake -S llama.cpp -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_HTML=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF > $OUT/cmake.log 2>&1 \
  && timeout 470 cmake --build build -j 16 --target llama-bench llama-batched-bench > $OUT/build.log 2>&1
  echo "build rc $? at $SECONDS s" ) &
BPID=$!
python3 $R/.gpu-s28/gen_gguf.py $W/m.gguf $W/llama.cpp/gguf-py > $OUT/gen.log 2>&1
echo "gguf done at $SECONDS s"; ls -la $W/m.gguf
wait $BPID
tail -5 $OUT/build.log; ls -la build/bin
export BITDECODE_CACHE_DIR=/tmp/bdc
LB=build/bin/llama-bench
if [ -x $LB ] && [ $SECONDS -lt 500 ]; then
  $LB -m m.gguf -ngl 99 -fa on -p 512 -n 64 -d 0 -r 3 -o md 2>&1 | tee $OUT/lb-d0.md
fi
for kv in f16 q4_0 q8_0; do
  [ -x $LB ] && [ $SECONDS -lt 540 ] && timeout $((585-SECONDS)) $LB -m m.gguf -ngl 99 -fa on -p 0 -n 64 -d 32768 -ctk $kv -ctv $kv -r 2 -o md 2>&1 | tee $OUT/lb-d32k-$kv.md
done
echo "end at $SECONDS s"
