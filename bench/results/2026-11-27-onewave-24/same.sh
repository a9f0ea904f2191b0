#!/bin/bash
# same.sh A B: SASS equal (instructions only)?
f() { grep -o '/\*[0-9a-f]*\*/ *[^;]*;' $1 | sed 's|/\*[0-9a-f]*\*/ *||'; }
if cmp -s <(f $1) <(f $2); then echo same; else echo "DIFF $(diff <(f $1) <(f $2) | grep -c '^[<>]') lines"; fi
