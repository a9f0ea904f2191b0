#!/bin/bash
# A/B of BenchmarkMaskAmbiguous: base (main bb599c2) and new, alternated.
# Cases base cannot finish (exponential parses) run once with a timeout.
cd /tmp/ab-cons
safe='Ambiguous/(object|schema|objects300|strings300|nested60|recursive)$'
for r in 1 2 3; do
  for b in base new; do
    /tmp/cons-$b.test -test.run '^$' -test.bench "$safe" -test.benchtime 5x -test.benchmem > $b-safe-$r.txt 2>&1
  done
done
/tmp/cons-new.test -test.run '^$' -test.bench 'Ambiguous/(objects2400|levels300x3|optional300x3|long500|kinds60x25)$' -test.benchtime 3x -test.benchmem > new-big.txt 2>&1
for c in objects2400 long500 levels300x3 kinds60x25; do
  timeout 120 /tmp/cons-base.test -test.run '^$' -test.bench "Ambiguous/$c\$" -test.benchtime 1x -test.benchmem > base-$c.txt 2>&1; echo "rc $?" >> base-$c.txt
done
