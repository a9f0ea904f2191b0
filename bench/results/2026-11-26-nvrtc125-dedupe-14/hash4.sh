# hash4.sh DIR: gemvq4.cu's module as loadV4 compiles it (every gemv_q4 and gemv_q5 instantiation, gemvq.cu as a header).
set -e
D=$1; N=$(dirname "$0")/../2026-11-26-nvrtc125-dec-14/nvt.py; export LD_LIBRARY_PATH=/tmp/aptsid/x125/usr/lib/x86_64-linux-gnu
ex=(); for b in 3 4 8; do for s in 1 2 4 8; do ex+=("gemvq4::gemv_q4<$b, $s>" "gemvq4::gemv_q5<$b, $s, true>" "gemvq4::gemv_q5<$b, $s, false>"); done; done
echo "## gemvq4.cu (loadV4)"
python3 $N $D gemvq4.cu /tmp/dedupe-ptx4 "${ex[@]}" -H=gemvq.cu
