#!/bin/bash
# Session 29 call 6a: the first half of gocoder-23m's model.safetensors.xz, kept in /tmp for call 6b on the warm machine.
mkdir -p /tmp/gcparts && cp .gpu-s29a/part1 /tmp/gcparts/ && ls -la /tmp/gcparts
