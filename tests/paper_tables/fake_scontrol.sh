#!/usr/bin/env bash
# Test stand-in for scontrol: "show hostnames LIST" prints two made-up nodes.
[ "$1 $2" = "show hostnames" ] || exit 2
printf 'gpu-node-17\ngpu-node-18\n'
