#!/bin/bash
# Session 19 s19-cons: the final CPU measurements, base (main bb599c2) and
# new (branch s19-cons) alternated. Test binaries built with
#   go test -c -o /tmp/cons-{base,new}.test ./constrain
#   go test -c -o /tmp/jinja-{base,new}.test ./tokenizer/jinja
# (base: bench_test.go, export_test.go, turns_test.go, runaway_test.go of the
# branch copied in, and Render split into render returning the steps).
cd /tmp/final-cons
for r in 1 2; do
  for b in base new; do
    /tmp/cons-$b.test -test.run MaskCost128K -test.v > $b-maskcost-$r.txt 2>&1
    /tmp/cons-$b.test -test.run '^$' -test.bench 'MaskCold|Allowed' -test.benchmem >> $b-micro-$r.txt 2>&1
  done
done
for b in base new; do
  JINJA_TEMPLATES=/tmp/tpl /tmp/jinja-$b.test -test.run LongConversations -test.v > $b-turns.txt 2>&1
done
for b in new base; do
  JINJA_RUNAWAY=1 timeout 400 /tmp/jinja-$b.test -test.run RunawayTimes -test.v -test.timeout 390s > $b-runaway.txt 2>&1
done
