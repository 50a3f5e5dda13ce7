#!/usr/bin/env bash
# ctest fuzz_replay: every fuzz target (test/fuzz/targets.h) over its committed
# regression inputs (testdata/fuzz/<target>/) and over seeds taken from the
# fixtures now (scripts/fuzz_seeds.py; manifest seeds come from the built
# pipecut's splits). Any finding fails, naming the file.
set -euo pipefail
replay=$1 python=$2 root=$3 pipecut=$4 seeds=$5
rm -rf "$seeds"
"$python" "$root/scripts/fuzz_seeds.py" "$seeds" --pipecut "$pipecut" --root "$root"
"$replay" --all "$root/testdata/fuzz" "$seeds"
