#!/bin/bash
# Device call 1 (session 17, arch). Phase 1 (parallel): GeGLU/Scale kernels,
# the GeGLU folds, the Gemma and Phi-3 synthetic families on cuda against
# the CPU, bitdecode run --device cuda/cpu on random Gemma / Phi-3
# checkpoints. Phase 2 (serial): B = 1 decode step, main (base) against
# this branch (new), A B A B, Llama-3.1-8B fp16 weights fp16 KV 1K (the
# SwiGLU epilogue now takes an activation argument); then a Gemma-2b-shaped
# model's step on the branch.
W=/tmp/arch; mkdir -p $W && tar xJf .gpu-arch/bundle.txz -C $W && cd $W || exit 1
for m in gemma phi3; do cp tok/* ck/$m/; done
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt 2>&1
./kernels.test -test.run 'TestOpsElementwise|TestOpsSplitCols|TestGEMVSwiGLU' -test.timeout 250s -test.v > $OUT/kernels.log 2>&1 &
./gpu.test -test.run 'TestElementwise$|TestFoldSwiGLU|TestFoldSwiGLUJoined' -test.timeout 250s -test.v > $OUT/gpu.log 2>&1 &
./gpukv.test -test.run 'TestGPUSyntheticFamilies' -test.timeout 250s -test.v > $OUT/gpukv.log 2>&1 &
(for m in gemma phi3; do for dev in cuda cpu; do for kv in fp16 int4; do
  echo "== $m $dev $kv"; timeout 120 ./bitdecode run --model ck/$m --device $dev --max-tokens 24 --temperature 0 --kv $kv "func main() {"; echo "rc=$?"
done; done; done) > $OUT/run.log 2>&1 &
wait
for f in kernels gpu gpukv; do echo "== $f"; grep -E "^(--- |ok|FAIL|PASS)" $OUT/$f.log | tail -30; done
echo "== run"; grep -v "^$" $OUT/run.log | tail -40
B="bench model --preset llama-3.1-8b --ctx 1k --kv fp16 --batch 1 --no-linears"
for i in 1 2; do for v in base new; do
  bin=./bitdecode; [ $v = base ] && bin=./bitdecode-base
  echo "== $v $i" >> $OUT/ab.log; timeout 150 $bin $B >> $OUT/ab.log 2>&1
done; done
echo "== gemma-2b new" >> $OUT/ab.log; timeout 150 ./bitdecode bench model --preset ck/gemma-2b --ctx 1k,8k --kv fp16,int4 --batch 1 --no-linears >> $OUT/ab.log 2>&1
echo "== ab"; grep -v "^$" $OUT/ab.log | tail -60
