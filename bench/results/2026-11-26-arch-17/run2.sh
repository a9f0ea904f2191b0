#!/bin/bash
# Device call 2 (session 17, arch): Gemma-2b's B = 1 step against a Llama
# of the very same shapes (SwiGLU, no embedding scale, norms as stored),
# alternated G L G L, to separate GeGLU's cost from the shapes'.
W=/tmp/arch2; mkdir -p $W && tar xJf .gpu-arch/bundle2.txz -C $W && cd $W || exit 1
for i in 1 2; do for m in gemma-2b llama-g2b; do
  echo "== $m $i" >> $OUT/g2b.log
  timeout 120 ./bitdecode bench model --preset $m --ctx 1k --kv fp16,int4 --batch 1 >> $OUT/g2b.log 2>&1
done; done
grep -E "^== |ms/step \(|read ceiling" $OUT/g2b.log
grep -B2 -A30 "GEMV time\|linear layer" $OUT/g2b.log | head -80
