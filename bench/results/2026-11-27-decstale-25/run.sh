#!/bin/bash
# Session 25 (decstale): DEC lists from the previous token's x, on the CPU.
# Usage: run.sh BINDIR LOGDIR, run from the repository root, with in BINDIR:
#   bitdecode        main 7b6eed8 + declist.patch (BITDECODE_CPU_DEC_LIST, _ONLY, _STATS)
#   bitdecode-random the same + random.patch (DSRANDOM=1: a random list of the same size)
#   bitdecode-recall the same + recall.patch (DSRECALL=FILE: recall of prev/static lists against own)
#   bitdecode-sub    the same + sub.patch (DSSUB=all|NAME: the lists of the Linears after a fused
#                    add+norm from the residual stream one sub-block earlier; DSSUBRECALL=FILE)
# Build each: CGO_ENABLED=0 go build -o BINDIR/NAME ./cmd/bitdecode
set -eu
B=$1 L=$2
mkdir -p "$L"
M=../shared/models/gocoder-23m
E="eval ppl --model $M --file $M/heldout.txt --ctx 2048 --kv fp16 --weights int3 --device cpu"
S=$L/stats
mkdir -p "$S"
one() { # LOG ENV... BIN ARGS... : runs, keeps the log, prints its last table row's PPL
	local log=$1; shift
	env "$@" > "$L/$log.log" 2>&1
	printf '%-44s %s\n' "$log" "$(tail -1 "$L/$log.log" | awk -F'|' '{print $6}')"
}
# (c) calibration: mean |x| over windows 2-5 (8190 tokens not in the scored windows 0-1), own lists
one calib-half3 BITDECODE_CPU_DEC_LIST=calib BITDECODE_CPU_DEC_STATS=$S/half3.json $B/bitdecode $E --first-window 2 --windows 4 --dec-k half3
one calib-k64 BITDECODE_CPU_DEC_LIST=calib BITDECODE_CPU_DEC_STATS=$S/k64.json $B/bitdecode $E --first-window 2 --windows 4 --dec-k 64
xz -f "$S"/*.json
xz -dk "$S"/half3.json.xz "$S"/k64.json.xz
W="--windows 2"
one int3-rtn $B/bitdecode $E $W --dec-k 0
for k in half3 64 128 256 down_proj:32,v_proj:512,o_proj:64,gate_proj:64,up_proj:64; do
	n=${k//[:,_]/}; n=${n//proj/}
	one own-$n BITDECODE_CPU_DEC_LIST=own $B/bitdecode $E $W --dec-k $k
	one prev-$n BITDECODE_CPU_DEC_LIST=prev $B/bitdecode $E $W --dec-k $k
done
one static-half3 BITDECODE_CPU_DEC_LIST=static BITDECODE_CPU_DEC_STATS=$S/half3.json $B/bitdecode $E $W --dec-k half3
one static-k64 BITDECODE_CPU_DEC_LIST=static BITDECODE_CPU_DEC_STATS=$S/k64.json $B/bitdecode $E $W --dec-k 64
for only in v_proj o_proj down_proj gate_proj,up_proj; do
	for mode in prev static; do
		one half3-$mode-only-${only//,/+} BITDECODE_CPU_DEC_LIST=$mode BITDECODE_CPU_DEC_LIST_ONLY=$only BITDECODE_CPU_DEC_STATS=$S/half3.json $B/bitdecode $E $W --dec-k half3
	done
done
one random-half3 DSRANDOM=1 $B/bitdecode-random $E $W --dec-k half3
one random-k64 DSRANDOM=1 $B/bitdecode-random $E $W --dec-k 64
one recall-half3 DSRECALL=$L/recall-half3.json BITDECODE_CPU_DEC_STATS=$S/half3.json $B/bitdecode-recall $E $W --dec-k half3
one fp16 $B/bitdecode eval ppl --model $M --file $M/heldout.txt --ctx 2048 --kv fp16 --weights fp16 --device cpu $W
# the residual stream one sub-block earlier (same token): v/q/k's list from h before the last MLP
# add times the attention norm's weight, gate/up's from h before the last attention add times the
# MLP norm's weight; o and down select from their own x
one sub-v-half3 DSSUB=v_proj $B/bitdecode-sub $E $W --dec-k half3
one sub-mlp-half3 DSSUB=mlp $B/bitdecode-sub $E $W --dec-k half3
one sub-v-k64 DSSUB=v_proj $B/bitdecode-sub $E $W --dec-k 64
one sub-mlp-k64 DSSUB=mlp $B/bitdecode-sub $E $W --dec-k 64
for k in half3 64 down_proj:32,v_proj:256,o_proj:32,gate_proj:32,up_proj:32 down_proj:16,v_proj:256,o_proj:64,gate_proj:32,up_proj:32 down_proj:16,v_proj:256,o_proj:32,gate_proj:64,up_proj:64 down_proj:16,v_proj:512,o_proj:32,gate_proj:32,up_proj:32; do
	n=${k//[:,_]/}; n=${n//proj/}
	[ "$k" = half3 ] || [ "$k" = 64 ] || one own-$n BITDECODE_CPU_DEC_LIST=own $B/bitdecode $E $W --dec-k $k
	one sub-all-$n DSSUB=all DSSUBRECALL=$L/subrecall-$n.json $B/bitdecode-sub $E $W --dec-k $k
done
# without o or down (their lists have no earlier sub-block): own against the proxies
for k in v_proj:512,gate_proj:64,up_proj:64 v_proj:256,gate_proj:64,up_proj:64,down_proj:16 v_proj:512,gate_proj:128,up_proj:128 q_proj:64,k_proj:64,v_proj:512,gate_proj:128,up_proj:128 v_proj:256,gate_proj:64,up_proj:64,o_proj:32; do
	n=${k//[:,_]/}; n=${n//proj/}
	one sub-own-$n DSSUB=none $B/bitdecode-sub $E $W --dec-k $k
	one sub-all-$n DSSUB=all $B/bitdecode-sub $E $W --dec-k $k
done
rm -f "$S"/*.json
