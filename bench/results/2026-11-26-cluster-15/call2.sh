#!/bin/bash
# Session 23 call 2 (branch s15-cluster, v2.23 with finishCluster's loads batched): the cluster
# same-bits test (short), then at 1 x 8K main (31acbd1) once, v2.23 off / on / on with one CTA an
# SM (spread), alternated, and the timeline of the cluster path.
set -o pipefail
cd "$(dirname "$0")/.."
W=/tmp/w; R=$W/r; mkdir -p $R
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
python3 -c "import tarfile; tarfile.open('.gpu-cluster/bins.tar.xz','r:xz').extractall('$W')"
B=$W/bins
pack() { (cd $W && tar czf $OUT/results.tgz r); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
K="--kv int4,int2,k4v2 --grid 1x8192"
( cd gpu/kernels && timeout 80 $B/kernels.test -test.v -test.count=1 -test.short -test.timeout 80s -test.run 'TestGPUDecodeClusterSameBits' > $R/t_cluster.log 2>&1; echo "t_cluster rc=$? $(el)s" >> $R/times.txt ) &
( timeout 80 $B/bitdecode-main bench attn --device cuda $K > $R/warm_main.md 2>&1; echo "warm_main rc=$? $(el)s" >> $R/times.txt ) &
( BITDECODE_DECODE_CLUSTER=1 timeout 80 $B/bitdecode bench attn --device cuda $K > $R/warm_new.md 2>&1; echo "warm_new rc=$? $(el)s" >> $R/times.txt ) &
( BITDECODE_DECODE_TIMELINE=1 BITDECODE_DECODE_CLUSTER=1 timeout 80 $B/bitdecode bench attn --device cuda --kv int4 --grid 1x8192 > $R/warm_tl.md 2>&1; echo "warm_tl rc=$? $(el)s" >> $R/times.txt ) &
wait
pack
step() { local n=$1 lim=$2; shift 2; if [ $(el) -lt $lim ]; then timeout $(( 140 - $(el) )) "$@" > $R/$n.md 2>&1; echo "$n rc=$? $(el)s" >> $R/times.txt; else echo "$n skipped at $(el)s" >> $R/times.txt; fi; pack; }
A="bench attn --device cuda $K"
step main1 110 $B/bitdecode-main $A
BITDECODE_DECODE_CLUSTER=0 step off1 112 $B/bitdecode $A
BITDECODE_DECODE_CLUSTER=1 step on1 116 $B/bitdecode $A
BITDECODE_DECODE_CLUSTER=1 BITDECODE_DECODE_CLUSTER_SPREAD=1 step spread1 120 $B/bitdecode $A
BITDECODE_DECODE_CLUSTER=1 step on2 124 $B/bitdecode $A
BITDECODE_DECODE_CLUSTER=0 step off2 128 $B/bitdecode $A
BITDECODE_DECODE_TIMELINE=1 BITDECODE_DECODE_CLUSTER=1 step tl_on 133 $B/bitdecode bench attn --device cuda --kv int4 --grid 1x8192
cat $R/times.txt $R/gpu.txt
grep -h -- '--- \(PASS\|FAIL\)\|^FAIL\|^ok\|panic' $R/t_*.log | head -20
for f in main1 off1 on1 spread1 on2 off2 tl_on; do echo "== $f"; grep -h 'read ceiling\|B=1 ' $R/$f.md | head -4; done
grep -h 'merge\|count\|partial\|loop\|most CTAs\|end: first' $R/tl_on.md
