#!/bin/bash
# s12-mbops call 1 (2026-11-26): where the max-batch step's time goes outside attention and the GEMMs.
# TestPinnedDownload; bench model at max batch (fp16, int4, int2) with the logits' download pageable
# (BITDECODE_DOWNLOAD_CHUNK=0) and through the pinned ring (4096, 1024 KiB) alternated; int4 with the knobs BITDECODE_NO_PDL / NO_GRAPHS /
# NO_NORM_EARLY, then ncu per-kernel times (duration, DRAM bytes) of int4 55 x 32K and int2 100 x 32K
# steps, the KV fill's ~25,000 launches skipped. Run from the repo root with .gpu-mbops carried.
set -o pipefail
T0=$(date +%s)
cd .gpu-mbops; R=$OUT/r; mkdir -p $R; cp call1.sh ncu_step.py $R/
chmod +x bitdecode
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
el() { echo $(( $(date +%s) - T0 )); }
t() { echo "$(date -u +%T) $(el) s $*" >> $R/times.txt; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > $R/times.txt 2>&1; t start
M="bench model --ctx 32k --batch max --steps 16 --no-linears"
chmod +x gpu.test
timeout 40 ./gpu.test -test.v -test.run '^(TestPinnedDownload|TestParseDownloadChunk|TestParallelCopy)$' > $R/test.log 2>&1; echo "rc=$?" >> $R/test.log; t test
# the A/B: default (pageable logits) against the pinned ring at 4096 and 1024 KiB chunks, alternated
for c in 0 4096 0 1024; do i=$((i+1))
  env BITDECODE_DOWNLOAD_CHUNK=$c timeout 40 ./bitdecode $M --kv fp16,int4,int2 --json $R/max_${i}_c$c.json > $R/max_${i}_c$c.log 2>&1; echo "rc=$?" >> $R/max_${i}_c$c.log; t "max $i c$c"; snap
done
for kn in NO_PDL NO_GRAPHS NO_NORM_EARLY; do
  env BITDECODE_$kn=1 timeout 25 ./bitdecode $M --kv int4 > $R/knob_$kn.log 2>&1; echo "rc=$?" >> $R/knob_$kn.log; t "knob $kn"; snap
done
prof() { # kv skip limit
  LEFT=$(( 188 - $(el) )); L=$(( LEFT < $3 ? LEFT : $3 ))
  [ $L -gt 20 ] || return
  timeout $L ncu --graph-profiling node --cache-control none --clock-control none --launch-skip $2 --launch-count 3600 \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum --csv \
    ./bitdecode bench model --ctx 32k --kv $1 --batch max --steps 2 --no-linears > $R/ncu_$1.csv 2> $R/ncu_$1.err
  echo "rc=$?" >> $R/ncu_$1.err; python3 ncu_step.py $R/ncu_$1.csv > $R/ncu_$1.step.txt 2>&1; gzip $R/ncu_$1.csv
  t "ncu $1"; snap
}
prof int4 24000 75
prof int2 25000 75
t end; snap
grep -h "^--- \|^ok\|^PASS\|^FAIL\|rc=" $R/test.log
for f in $R/max_*.log $R/knob_*.log; do echo $f; grep -h "ms/step\|last direct\|rc=" $f; done
head -40 $R/ncu_int4.step.txt; head -12 $R/ncu_int2.step.txt
cat $R/times.txt
