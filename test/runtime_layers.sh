#!/usr/bin/env bash
# lib/runtime's layering: the shared core (the files directly in lib/runtime:
# stage programs, placement, transport, reports) includes nothing from the
# mode folders (runtime/train/, runtime/generate/). The exceptions are the
# other modes' entry points, which may use a mode's parts: profile.cpp
# (--decode-step's inputs) and pipecut.h (the embedding API, every mode).
set -uo pipefail
src=$1
cd "$src/lib/runtime" || exit 1
bad=$(grep -n '#include "runtime/\(train\|generate\)/' -- *.h *.cpp | grep -v '^profile\.cpp:\|^pipecut\.h:')
if [[ -n $bad ]]; then
  echo "FAIL: core files of lib/runtime include a mode folder:"
  echo "$bad"
  exit 1
fi
# And a mode folder includes nothing from the other mode's.
for pair in train:generate generate:train; do
  from=${pair%%:*} to=${pair##*:}
  bad=$(grep -rn "#include \"runtime/$to/" "$from" || true)
  [[ -z $bad ]] || { echo "FAIL: runtime/$from includes runtime/$to:"; echo "$bad"; exit 1; }
done
echo "runtime layers: the core includes no mode folder ($(ls -- *.h *.cpp | wc -l) core files, $(ls train | wc -l) in train/, $(ls generate | wc -l) in generate/)"
