#!/bin/bash
# decalloc-23 call 2 (session 23): where the allocations' step cost goes. The 8B step at 1K,
# int4 KV, device residuals, new binary only (base is not needed: no code changed since call 1):
# each part of the allocations alone, DEC off between every two rows (int4); then the joined
# launches at split 8 (BITDECODE_GEMVQ_JOIN_SPLIT=8: q|k|v's v6.1 ran 12.0 us at split 8 against
# 13.8 at its split 4 in call 1's bench dec) with v 256 alone, A and C, and the same at split 4;
# then the breakdown again in reverse order; then int3 A and C at split 8 (time left).
D=$(cd "$(dirname "$0")" && pwd)
R=/tmp/r; rm -rf $R; mkdir -p $R; cp $0 $R/
T0=$(date +%s); END=$((T0 + 235))
tl() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/timeline.txt; }
lim() { local left=$((END - $(date +%s))); [ $left -gt $1 ] && echo $1 || echo $((left > 1 ? left : 1)); }
snap() { tar czf $OUT/results.tmp -C /tmp r && mv $OUT/results.tmp $OUT/results.tgz; }
B=/tmp/bin; mkdir -p $B; tar xJf $D/bins.tar.xz -C $B; chmod +x $B/*; tl unpacked
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
export BITDECODE_CACHE_DIR=/tmp/bdc; mkdir -p /tmp/bdc
export BITDECODE_DEC_RESIDUAL=device
t() { local n=$1 l=$2; shift 2; timeout $(lim $l) "$@" > $R/$n.log 2>&1; local rc=$?; tl "$n rc=$rc"; return $rc; }
MOD="--ctx 1k --kv int4 --no-linears --steps 16"
A=down_proj:32+v_proj:256+o_proj:64
C=down_proj:16+v_proj:256+o_proj:32+gate_proj:32+up_proj:32
PARTS="0,v_proj:256,0,o_proj:64,0,down_proj:32,0,o_proj:32,0,down_proj:16,0,gate_proj:32+up_proj:32,0,gate_proj:64,0,$C,0"
REV="0,$C,0,gate_proj:64,0,gate_proj:32+up_proj:32,0,down_proj:16,0,o_proj:32,0,down_proj:32,0,o_proj:64,0,v_proj:256,0"
t warm 120 $B/bitdecode-new bench model $MOD --weights int4,int3 --dec-k $C --steps 1; snap
t parts4_1 70 $B/bitdecode-new bench model $MOD --weights int4 --dec-k $PARTS --json $R/parts4_1.json; snap
t split8_4 35 env BITDECODE_GEMVQ_JOIN_SPLIT=8 $B/bitdecode-new bench model $MOD --weights int4 --dec-k 0,v_proj:256,0,$A,0,$C --json $R/split8_4.json; snap
t split4_4 35 $B/bitdecode-new bench model $MOD --weights int4 --dec-k 0,v_proj:256,0,$A,0,$C --json $R/split4_4.json; snap
t parts4_2 70 $B/bitdecode-new bench model $MOD --weights int4 --dec-k $REV --json $R/parts4_2.json; snap
t split8_3 30 env BITDECODE_GEMVQ_JOIN_SPLIT=8 $B/bitdecode-new bench model $MOD --weights int3 --dec-k 0,$A,0,$C --json $R/split8_3.json
tl end; snap
