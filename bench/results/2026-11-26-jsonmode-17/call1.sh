#!/bin/bash
# Structured output end to end on the GPU: bitdecode serve (the embedded
# gotiny model, --device cuda) answering constrained requests (json_object,
# json_schema strict, llama.cpp json_schema; greedy, sampled n 2 with
# logprobs, streamed) all at once beside plain greedy requests (whose token
# is picked on the device), every constrained answer checked by jcheck.
B=.gpu-jsonmode
tar xJf $B/bin.tar.xz -C $B && chmod +x $B/bitdecode $B/jcheck
nvidia-smi --query-gpu=name,driver_version --format=csv 2>&1 | tee $OUT/gpu.txt
$B/bitdecode serve --device cuda --addr 127.0.0.1:8199 > $OUT/serve.log 2>&1 &
PID=$!
for i in $(seq 1 180); do
  if $B/jcheck-health 2>/dev/null; then break; fi
  (exec 3<>/dev/tcp/127.0.0.1/8199) 2>/dev/null && break
  sleep 1
done
sleep 1
timeout 240 $B/jcheck http://127.0.0.1:8199 > $OUT/check.log 2>&1
echo "jcheck exit $?" | tee -a $OUT/check.log
tail -3 $OUT/check.log
kill $PID; wait $PID
tail -5 $OUT/serve.log
