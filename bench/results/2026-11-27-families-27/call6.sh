#!/bin/bash
# session 27 call 6 (2026-11-27): the ERNIE 4.5 fixture; then the final tree's GPU tests of
# the model path (every transformers fixture, the synthetic families, greedy tokens, graph
# replay, batch invariance, the scheduler) in two processes; then serve on the GPU with the
# embedded model: chat, completions and /v1/responses, streamed and whole, by curl.
set -o pipefail
T0=$(date +%s); R=$OUT
el() { echo $(( $(date +%s) - T0 )); }
t() { echo "$(date -u +%T) $(el) s $*" >> $R/times.txt; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/times.txt 2>&1
timeout 100 python3 tools/hfcheck/gen.py internal/hfcheck/testdata ernie45-bias-gqa2-bf16 > $R/gen.log 2>&1; echo "rc=$?" >> $R/gen.log; t gen
(cd internal/hfcheck/testdata && tar cJf $R/fx6.tar.xz ernie45-bias-gqa2-bf16 2>>$R/gen.log)
cd .gpu-s27 && xz -d gpukv.test.xz bitdecode.xz && chmod +x gpukv.test bitdecode
export BITDECODE_CACHE_DIR=/tmp/bdc
( timeout 330 ./gpukv.test -test.v -test.run '^(TestGPUTransformers|TestGPUSyntheticFamilies|TestGPUGreedyTokens|TestGPUCacheGolden|TestGPURoPEAppendSameBits)$' > $R/kv1.log 2>&1; echo "rc=$?" >> $R/kv1.log; t kv1 ) &
( timeout 330 ./gpukv.test -test.v -test.run '^(TestGPUBatchInvariantLogits|TestGPUGraphReplaySameBits|TestGPUCacheMatchesReference|TestGPUScheduler|TestGPUPrefixScheduler|TestGPUPerLayerFormats)$' > $R/kv2.log 2>&1; echo "rc=$?" >> $R/kv2.log; t kv2 ) &
wait
./bitdecode serve --device cuda --kv int4 --addr 127.0.0.1:8090 > $R/serve.log 2>&1 &
for i in $(seq 60); do curl -sf 127.0.0.1:8090/health >/dev/null && break; sleep 1; done
{
echo "== chat"; curl -s 127.0.0.1:8090/v1/chat/completions -H 'Content-Type: application/json' -d '{"model":"gotiny","messages":[{"role":"user","content":"func main() {"}],"max_tokens":24,"temperature":0}'
echo; echo "== completions stream"; curl -sN 127.0.0.1:8090/v1/completions -H 'Content-Type: application/json' -d '{"model":"gotiny","prompt":"package main","max_tokens":12,"temperature":0,"stream":true}' | head -c 1500
echo; echo "== responses"; curl -s -D - 127.0.0.1:8090/v1/responses -H 'Content-Type: application/json' -d '{"model":"gotiny","input":"func main() {","max_output_tokens":24,"temperature":0}'
echo; echo "== responses stream"; curl -sN 127.0.0.1:8090/v1/responses -H 'Content-Type: application/json' -d '{"model":"gotiny","instructions":"Go code.","input":[{"role":"user","content":"func add(a, b int) int {"}],"max_output_tokens":16,"temperature":0,"stream":true}' | grep -E "^event:" | sort | uniq -c
echo; echo "== metrics"; curl -s 127.0.0.1:8090/metrics | grep -E "^bitdecode_(requests|generated)" | head
} > $R/serve-check.txt 2>&1
pkill -f "bitdecode serve" 2>/dev/null; t serve
for f in kv1 kv2; do echo "== $f: $(grep -c '^--- FAIL\|^    --- FAIL' $R/$f.log) FAIL, $(grep -c '^--- PASS\|^    --- PASS' $R/$f.log) PASS, $(tail -1 $R/$f.log)"; done
grep -E "^--- |ernie" $R/kv1.log $R/kv2.log | head -20
grep -E "ok;|FAILED" $R/gen.log | cut -c1-200
head -c 2500 $R/serve-check.txt
cat $R/times.txt
