#!/bin/bash
# s11-b1a call 1 (2026-11-26): fp16 decode attention at one sequence. main's binary, then c1 (v3.3a:
# producer fills the ring before the CTA barrier, block table read one tile ahead; same plans) and c2
# (c1 + tile-granular splits for one sequence), then main's split sweep through the tuning knobs,
# then ncu's per-kernel time of main and c2 at 1 x 32K (fused, and the merge in its own launch).
set -o pipefail
TEND=${TEND:-85}
cd .gpu-b1a; G=$PWD; R=$OUT/r; mkdir -p $R; cp run1.sh $R/
python3 -c "
import lzma,tarfile
tarfile.open(fileobj=lzma.open('bundle.tar.xz')).extractall('.')
"
cd b; chmod +x bitdecode*
snap() { (cd $OUT && tar czf results.tmp r && mv results.tmp results.tgz); }
t() { echo "t=$SECONDS $*" >> $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/gpu.txt 2>&1; t start
last=0
fits() { [ $((SECONDS + last)) -lt $TEND ] || { echo "skip $1 t=$SECONDS" >> $R/skipped.txt; return 1; }; }
step() { # name binary env grid
  local n=$1 b=$2 e=$3 g=$4; fits $n || return 0
  local s=$SECONDS
  env $e timeout $((TEND + 5 - SECONDS)) ./bitdecode-$b bench attn --device cuda --kv fp16 --grid $g > $R/$n.md 2> $R/$n.log; echo "rc=$? t=$SECONDS env=$e" >> $R/$n.log
  last=$((SECONDS - s)); t $n; snap
}
GF=1x1024,1x8192,1x32768,1x131072
G3=1x8192,1x32768,1x131072
step main main X=0 $GF
step c1 c1 X=0 $GF
step c2 c2 X=0 $GF
step sw_t296 main BITDECODE_DECODE_SPLITS=target:296 $G3
step sw_t512 main BITDECODE_DECODE_SPLITS=target:512 $G3
prof() { # binary env
  fits ncu || return 0
  local n=ncu_$1_${2%%=*} s=$SECONDS
  env $2 timeout $((TEND + 5 - SECONDS)) ncu --clock-control none --kernel-name regex:decode_ --launch-skip 4 --launch-count 4 \
    --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active \
    ./bitdecode-$1 bench attn --device cuda --kv fp16 --grid 1x32768 > $R/$n.txt 2>&1; echo "rc=$?" >> $R/$n.txt
  last=$((SECONDS - s)); t $n; snap
}
prof main X=0
prof main BITDECODE_DECODE_FUSE=0
step sw_t256 main BITDECODE_DECODE_SPLITS=target:256 $G3
step sw_t1024 main BITDECODE_DECODE_SPLITS=target:1024 $G3
step sw_st6 main "BITDECODE_WGMMA_STAGES=6 BITDECODE_DECODE_SPLITS=target:128" $G3
prof c2 X=0
t end; snap
grep -H "^| auto" $R/*.md | sed "s/| 32\/8\/128.*splits//" | cut -c1-160; grep -h "gpu__time_duration\|decode_" $R/ncu_*.txt | head -40; cat $R/times.txt $R/skipped.txt 2>/dev/null
