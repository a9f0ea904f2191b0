#!/bin/bash
# cnt.sh DIR TAG PU(0|1) [names]: NVRTC 12.5 counts of decode_mma.cu's per-sequence instantiations
D=$1; T=$2; PU=$3; shift 3
LA='mma::decode_mma<128, 2, 2, true, 1, 1, 8, false, 0, 1, true, false, true'
I2='mma::decode_mma<128, 2, 2, true, 1, 1, 8, false, 0, 1, true, false, false'
I4='mma::decode_mma<128, 4, 4, true, 1, 1, 4, false, 0, 1, true, false, false'
K42='mma::decode_mma<128, 4, 2, true, 1, 1, 4, false, 0, 1, true, false, false'
for n in ${@:-LA I4 K42 I2}; do
  e="${!n}"; if [ $PU = 1 ]; then e="$e, true>"; else e="$e>"; fi
  xo="$XO"; [ $n = LA ] && xo="$xo -DBD_SEQ_LEAN=1"
  XOPT="$xo" python3 /tmp/ow/nvc.py $D /tmp/bu/${T}_$n "$e" > /tmp/bu/${T}_$n.log 2>&1
  echo "$T $n: $(grep -o '[0-9]* bytes stack frame, [0-9]* bytes spill stores, [0-9]* bytes spill loads' /tmp/bu/${T}_$n.log | tail -1) $(grep -o 'Used [0-9]* registers' /tmp/bu/${T}_$n.log|tail -1) | loop: $(python3 /tmp/ow/inloop.py /tmp/bu/${T}_$n.sass 2>&1 | tail -1) | LDL $(grep -c LDL /tmp/bu/${T}_$n.sass) STL $(grep -c STL /tmp/bu/${T}_$n.sass)"
done
