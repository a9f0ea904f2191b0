#!/bin/bash
# Session 23 call 1 (branch s15-cluster, v2.23): the tests, then main (31acbd1) against v2.23 with the
# cluster merge off / on, alternated twice, then 16 splits at 32K and the timeline at 1 x 8K.
set -o pipefail
cd "$(dirname "$0")/.."
W=/tmp/w; R=$W/r; mkdir -p $R
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
python3 -c "import tarfile; tarfile.open('.gpu-cluster/bins.tar.xz','r:xz').extractall('$W')"
B=$W/bins
pack() { (cd $W && tar czf $OUT/results.tgz r); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
T="-test.v -test.count=1 -test.timeout 150s"
( cd gpu/kernels && timeout 150 $B/kernels.test $T -test.run 'TestGPUDecodeClusterSameBits|TestGPUDecodeTimelineSameBits|TestHeaderConstants|TestClusterSize|TestParseTuning' > $R/t_cluster.log 2>&1; echo "t_cluster rc=$? $(el)s" >> $R/times.txt ) &
( cd gpu/kernels && BITDECODE_DECODE_CLUSTER=1 timeout 150 $B/kernels.test $T -test.run 'TestGPUDecodeMatchesReference/mma' > $R/t_ref.log 2>&1; echo "t_ref rc=$? $(el)s" >> $R/times.txt ) &
( cd gpu/kernels && timeout 150 $B/kernels.test $T -test.run 'TestGPUDecodeOneSplitMatchesCombine|TestDecodeDependentLaunch|TestOpsAddRMSNorm|TestGPUDecodeLong' > $R/t_misc.log 2>&1; echo "t_misc rc=$? $(el)s" >> $R/times.txt ) &
# Warm the CUBIN cache for the benches below (timings disturbed by the tests: not used).
( timeout 150 $B/bitdecode-main bench attn --device cuda --kv int4,int2,k4v2 --grid 1x8192 > $R/warm_main.md 2>&1; echo "warm_main rc=$? $(el)s" >> $R/times.txt ) &
( BITDECODE_DECODE_CLUSTER=1 timeout 150 $B/bitdecode bench attn --device cuda --kv int4,int2,k4v2 --grid 1x8192 > $R/warm_new.md 2>&1; echo "warm_new rc=$? $(el)s" >> $R/times.txt ) &
( BITDECODE_DECODE_TIMELINE=1 BITDECODE_DECODE_CLUSTER=1 timeout 150 $B/bitdecode bench attn --device cuda --kv int4,int2,k4v2 --grid 1x8192 > $R/warm_tl.md 2>&1; echo "warm_tl rc=$? $(el)s" >> $R/times.txt ) &
wait
pack
# step NAME LIMIT cmd...: run if fewer than LIMIT seconds have gone
step() { local n=$1 lim=$2; shift 2; if [ $(el) -lt $lim ]; then timeout $(( 288 - $(el) )) "$@" > $R/$n.md 2>&1; echo "$n rc=$? $(el)s" >> $R/times.txt; else echo "$n skipped at $(el)s" >> $R/times.txt; fi; pack; }
A="bench attn --device cuda --kv int4,int2,k4v2 --grid 1x8192,1x32768,1x131072"
step main1 240 $B/bitdecode-main $A
BITDECODE_DECODE_CLUSTER=0 step off1 245 $B/bitdecode $A
BITDECODE_DECODE_CLUSTER=1 step on1 250 $B/bitdecode $A
step main2 255 $B/bitdecode-main $A
BITDECODE_DECODE_CLUSTER=0 step off2 260 $B/bitdecode $A
BITDECODE_DECODE_CLUSTER=1 step on2 265 $B/bitdecode $A
BITDECODE_DECODE_CLUSTER=1 BITDECODE_DECODE_SPLITS=target:128 step s16on 272 $B/bitdecode bench attn --device cuda --kv int4,int2 --grid 1x32768
BITDECODE_DECODE_TIMELINE=1 BITDECODE_DECODE_CLUSTER=1 step tl_on 278 $B/bitdecode bench attn --device cuda --kv int4,int2 --grid 1x8192
BITDECODE_DECODE_TIMELINE=1 BITDECODE_DECODE_CLUSTER=0 step tl_off 282 $B/bitdecode bench attn --device cuda --kv int4,int2 --grid 1x8192
cat $R/times.txt $R/gpu.txt
grep -h -- '--- \(PASS\|FAIL\)\|^FAIL\|^ok\|panic' $R/t_*.log | grep -v '^    ---' | head -40
for f in main1 off1 on1 main2 off2 on2 s16on; do echo "== $f"; grep -h 'read ceiling\|B=1 ' $R/$f.md | head -12; done
