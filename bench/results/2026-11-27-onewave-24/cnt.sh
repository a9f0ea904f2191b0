#!/bin/bash
# cnt.sh DIR TAG: NVRTC 12.5 (nvc.py) counts of four decode_mma.cu instantiations; VS="1 0" the BD_SEQ_SPLITS values, XO extra options (e.g. -DBD_SEQ_LEAN=1); paths under /tmp/ow
D=${1:-gpu/kernels}; T=${2:-x}
LA='mma::decode_mma<128, 2, 2, true, 1, 1, 8, false, 0, 1, true, false, true>'
I2='mma::decode_mma<128, 2, 2, true, 1, 1, 8, false, 0, 1, true, false>'
I4='mma::decode_mma<128, 4, 4, true, 1, 1, 4, false, 0, 1, true, false>'
K42='mma::decode_mma<128, 4, 2, true, 1, 1, 4, false, 0, 1, true, false>'
for v in ${VS:-1 0}; do for n in LA I2 I4 K42; do
  XOPT="-DBD_SEQ_SPLITS=$v $XO" python3 /tmp/ow/nvc.py $D /tmp/ow/${T}_${n}_$v "${!n}" > /tmp/ow/${T}_${n}_$v.log
  echo "seq=$v $n: $(grep -o '[0-9]* bytes spill stores, [0-9]* bytes spill loads' /tmp/ow/${T}_${n}_$v.log | sed 's/ bytes spill stores, / \/ /;s/ bytes spill loads//') $(grep -o 'Used [0-9]* registers' /tmp/ow/${T}_${n}_$v.log) | loop: $(python3 /tmp/ow/inloop.py /tmp/ow/${T}_${n}_$v.sass 2>&1 | tail -1)"
done; done
