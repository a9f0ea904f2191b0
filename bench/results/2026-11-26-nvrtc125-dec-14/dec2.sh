set -e
export LD_LIBRARY_PATH=/tmp/aptsid/x125/usr/lib/x86_64-linux-gnu
D=${1:-/tmp/dec-nv/after}; cd "$(dirname "$0")"; cp $D/gemvq.cu $D/gemvq_dec.cu  # D: a copy of gpu/kernels
ex=("dec::select_topk"); for e in 1 2 3; do for w in 1 2 4 8; do ex+=("dec::compensate<$e, $w>"); done; done
echo "== dec.cu with self-test (LoadDECSelfTest)"; /usr/bin/time -f "%e s" python3 nvt.py $D dec.cu /tmp/x "${ex[@]}" "dec::fused_selftest"
echo "== dec.cu -DDEC_NO_SELFTEST=1 (LoadDEC)"; /usr/bin/time -f "%e s" python3 nvt.py $D dec.cu /tmp/x "${ex[@]}" -DDEC_NO_SELFTEST=1
for b in 3 4 8; do ex=("dec::select_topk"); for s in 4 8; do for p in 4 32; do ex+=("gemvq::gemv_q_dec<$b, $s, $p>"); done; done
echo "== v2 DEC int$b with self-test"; /usr/bin/time -f "%e s" python3 nvt.py $D gemvq_dec.cu /tmp/x "${ex[@]}" -H=dec.cu -DGEMVQ_WITH_DEC=1
echo "== v2 DEC int$b -DDEC_NO_SELFTEST=1"; /usr/bin/time -f "%e s" python3 nvt.py $D gemvq_dec.cu /tmp/x "${ex[@]}" -H=dec.cu -DGEMVQ_WITH_DEC=1 -DDEC_NO_SELFTEST=1
done
