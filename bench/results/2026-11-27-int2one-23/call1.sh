#!/bin/bash
# Session 30 (int2one-23) call 1: the census at one sequence against many.
# One binary, main d56ce9d (bitdecode-main). Warm the CUBIN cache for every
# variant in parallel (the plain build with CUDA 13's ptxas report, the
# timeline build, MINB=3); then, one process at a time: the plain rows, the
# timeline at int2/int4 1 x 128K and int2 100 x 32K (per-tile time at both),
# ncu of one int2 launch at 1 x 128K and at 100 x 32K (issue and stall mix),
# the probes (MINB=3: 3 CTAs an SM; SPLITS=target:128: one CTA an SM; FUSE=0:
# the merge in its own launch), and the plain rows again.
set -o pipefail
D=$PWD/.gpu-int2one
W=/tmp/w; R=$W/r; mkdir -p $R
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
B=$D/bitdecode-main; chmod +x $B
pack() { (cd $W && tar czf $OUT/results.tgz r); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm,temperature.gpu,power.draw --format=csv > $R/gpu.txt 2>&1
G1="--grid 1x131072"
TL=BITDECODE_DECODE_TIMELINE=1
warm() { local n=$1; shift; ( timeout 110 "$@" > $R/warm_$n.md 2>&1; echo "warm_$n rc=$? $(el)s" >> $R/times.txt ) & }
warm ptx env BITDECODE_PTXAS_VERBOSE=1 $B bench attn --device cuda --kv int2,int4 --grid 1x131072,100x32768
warm plain $B bench attn --device cuda --kv int2,int4,k4v2 $G1
warm tl env $TL $B bench attn --device cuda --kv int2,int4 $G1
warm minb env BITDECODE_DECODE_MINB=3 BITDECODE_PTXAS_VERBOSE=1 $B bench attn --device cuda --kv int2,int4 $G1
warm minbq env BITDECODE_DECODE_MINB=3 $B bench attn --device cuda --kv int2,int4 $G1
wait
pack
END=285
step() { local n=$1 lim=$2; shift 2; if [ $(el) -lt $lim ]; then timeout $(( END - $(el) )) "$@" > $R/$n.md 2>&1; echo "$n rc=$? $(el)s" >> $R/times.txt; else echo "$n skipped at $(el)s" >> $R/times.txt; fi; pack; }
A="bench attn --device cuda"
step plain1 200 $B $A --kv int2,int4,k4v2 --grid 1x131072,100x32768
step tl1 210 env $TL BITDECODE_DECODE_TIMELINE_CSV=$R/tl1.csv $B $A --kv int2,int4 $G1
step tl100 220 env $TL $B $A --kv int2 --grid 100x32768
if command -v ncu >/dev/null; then
  step ncu1 235 ncu --clock-control none -k regex:decode_mma --launch-skip 6 --launch-count 1 --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --page details $B $A --kv int2 $G1
  step ncu100 250 ncu --clock-control none -k regex:decode_mma --launch-skip 6 --launch-count 1 --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --page details $B $A --kv int2 --grid 100x32768
fi
step minb 258 env BITDECODE_DECODE_MINB=3 $B $A --kv int2,int4 $G1
step t128 264 env BITDECODE_DECODE_SPLITS=target:128 $B $A --kv int2,int4 $G1
step fuse0 270 env BITDECODE_DECODE_FUSE=0 $B $A --kv int2,int4 $G1
step plain2 282 $B $A --kv int2,int4,k4v2 --grid 1x131072,100x32768
for f in $R/*.csv; do [ -f $f ] && xz -9 $f; done
pack
cat $R/times.txt $R/gpu.txt
for f in plain1 plain2 minb t128 fuse0 minbq; do echo "== $f"; grep -h '^read ceiling\|^| \(auto\|int\|k4\)' $R/$f.md $R/warm_$f.md 2>/dev/null | cut -d'|' -f2-4,7-11 | cut -c1-120; done
grep -h "registers\|spill\|decode_mma<" $R/warm_ptx.md $R/warm_minb.md | grep -B1 -A2 "decode_mma<" | cut -c1-200 | head -30
for f in tl1 tl100; do echo "== $f"; grep -h 'per tile\|first tile\|prologue:\|loop:\|end: first\|per-SM\|running CTAs\|merge: arr\|partial:\|count:\|timeline\|  auto' $R/$f.md | cut -c1-140; done
for f in ncu1 ncu100; do echo "== $f"; grep -h 'Duration\|DRAM Throughput\|Issue Slots Busy\|Issued Warp\|Eligible Warps\|Active Warps Per\|No Eligible\|Achieved Occupancy\|Warp Cycles Per Issued\|Registers Per\|Executed Ipc A' $R/$f.md | head -16; done
