set -e
cd /tmp/g2
for pair in "decode_mma.cu mma_all" "decode_wgmma.cu wg_all" "decode.cu v1_all"; do
  set -- $pair
  for opt in "" "-DBD_SEQ_SPLITS=0"; do
    tag=$2$(echo $opt | tr -d '=-')
    python3 nvc2.py base $1 b_$tag.cubin $2.txt $opt >/dev/null
    python3 nvc2.py new $1 n_$tag.cubin $2.txt $opt >/dev/null
    if cmp -s b_$tag.cubin n_$tag.cubin; then echo "SAME $1 $opt $(stat -c %s b_$tag.cubin)"; else echo "DIFF $1 $opt"; fi
  done
  python3 nvc2.py new $1 c_$2.cubin $2.txt -DBD_SEQ_SPLITS=0 -DBD_SOFTCAP=72.13475f
done
