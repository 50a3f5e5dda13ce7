#!/usr/bin/env bash
# No litter when killed: a `pipecut split` (or `normalize`) killed with SIGKILL
# at any point leaves `-o` holding a complete output (the previous one or the
# new one), and at most its own `<-o>.tmp.<pid>`, which the next writer of the
# same `-o` removes, saying so; temporaries of live writers are left alone.
set -uo pipefail
pipecut=$1 py=$2 out=$3
rm -rf "$out"
mkdir -p "$out"
big=$out/big.pt2 OUT=$out/OUT X=$out/X.pt2
fail=0
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
cleanup() {
  for p in ${helpers:-}; do kill "$p" 2>/dev/null; done
  rm -rf "$out"  # hundreds of MB
}
trap cleanup EXIT

# 12 x Linear(2048, 2048): 201 MB of fp32 weights; a split writes twice that.
"$py" - "$big" <<'EOF' || { echo "FAIL: cannot export the model"; exit 1; }
import sys, torch
torch.manual_seed(0)
layers = []
for _ in range(12):
    layers += [torch.nn.Linear(2048, 2048), torch.nn.ReLU()]
m = torch.nn.Sequential(*layers).eval()
torch.export.save(torch.export.export(m, (torch.randn(2, 2048),)), sys.argv[1])
EOF
echo "[${SECONDS}s] exported $(basename "$big"): $(stat -c %s "$big") bytes"
"$pipecut" inspect "$big" | grep -q '^ *22 Linear' || { echo "FAIL: inspect does not list module 22 (Linear)"; exit 1; }
# The previous output has 2 stages, the new one 4: `-o` says which it holds.
echo '{"split_points": {"11": "END"}}' >"$out/spec2.json"
echo '{"split_points": {"5": "END", "11": "END", "17": "END"}}' >"$out/spec4.json"
stages() { ls "$OUT" | grep -c '^stage_...\.pt2$'; }
now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }

"$pipecut" split "$big" --spec "$out/spec2.json" -o "$OUT" >/dev/null || { echo "FAIL: the first split failed"; exit 1; }
[[ $(stages) -eq 2 ]] || { echo "FAIL: the first split did not write 2 stages"; exit 1; }

# Runs a split in the background and SIGKILLs it at `point`:
#   tmp | first | last | manifest: once the temporary, its first stage file,
#   its last stage file, its manifest exist; delay:MS: MS ms after starting.
pending=()  # temporaries left by killed splits, not yet removed
kill_at() {
  local point=$1 before pid t0 tmp seen=0 log
  before=$(stages)
  "$pipecut" split "$big" --spec "$out/spec4.json" -o "$OUT" >"$out/split.log" 2>&1 &
  pid=$!
  tmp=$OUT.tmp.$pid
  t0=$(now_ms)
  while kill -0 "$pid" 2>/dev/null && (($(now_ms) - t0 < 30000)); do
    case $point in
      tmp) [[ -d $tmp ]] && seen=1 ;;
      first) [[ -e $tmp/stage_000.pt ]] && seen=1 ;;
      last) [[ -e $tmp/stage_003.pt2 ]] && seen=1 ;;
      manifest) [[ -e $tmp/manifest.json ]] && seen=1 ;;
      delay:*) (($(now_ms) - t0 >= ${point#delay:})) && seen=1 ;;
    esac
    ((seen)) && break
    sleep 0.005
  done
  local elapsed=$(($(now_ms) - t0))
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  local rc=$?
  log=$(cat "$out/split.log")
  if ((!seen)) && [[ $rc -ne 0 ]]; then
    bad "[$point] never reached in ${elapsed} ms (split exit $rc): $log"; return
  fi
  # The exchange comes after the manifest: only then may `-o` change.
  if ! "$pipecut" verify "$OUT" >/dev/null 2>"$out/verify.log"; then
    bad "[$point] after kill -9 at ${elapsed} ms, verify fails: $(cat "$out/verify.log")"
  fi
  local after
  after=$(stages)
  case $point in
    tmp | first | last) [[ $after -eq $before ]] || bad "[$point] -o went from $before to $after stages before the manifest was written" ;;
    *) [[ $after -eq $before || $after -eq 4 ]] || bad "[$point] -o has $after stages (expected $before or 4)" ;;
  esac
  if [[ $rc -eq 0 && -e $tmp ]]; then bad "[$point] the split finished but left $tmp"; fi
  # A split that got as far as creating its temporary has swept all earlier
  # ones; one killed sooner may have swept some. Whichever it removed, it
  # reported (a split killed after its exchange but before printing 'wrote'
  # has neither its temporary nor the line, yet swept).
  local swept_all=0 keep=() p
  if [[ -d $tmp ]] || grep -q '^wrote' <<<"$log" || [[ $after -ne $before ]]; then swept_all=1; fi
  for p in "${pending[@]}"; do
    if [[ -e $p ]]; then
      ((swept_all)) && bad "[$point] $p still exists after a later split created its temporary"
      keep+=("$p")
    else
      grep -qF "pipecut: removed stale temporary $p (its writer, process ${p##*.}, is gone)" <<<"$log" ||
        bad "[$point] $p is gone but the split that removed it did not report it: $log"
    fi
  done
  pending=("${keep[@]}")
  [[ -e $tmp ]] && pending+=("$tmp")
  echo "[${SECONDS}s] kill -9 at $point after ${elapsed} ms: exit $rc, -o has $after stages (had $before), $( [[ -e $tmp ]] && echo "left $(basename "$tmp")" || echo "left nothing")"
}
# The last one leaves a temporary for the final split to remove: `tmp`, which
# exists from the start of the writing. (`manifest` came last until stage
# files were written in parallel; now the split often finishes before a kill
# there lands, leaving nothing.)
for point in delay:500 delay:2000 first last manifest tmp; do kill_at "$point"; done

# Entries a sweep must keep: a temporary named after a live process (no lock),
# one locked by a live process (its named pid is gone), names that only look
# alike. And one it must remove: a `.old.` of a dead writer.
sleep 60 >/dev/null 2>&1 &
live=$!
( exit 0 ) & dead=$!
wait "$dead"
helpers=$live
if kill -0 "$dead" 2>/dev/null; then bad "pid $dead should be gone"; fi
mkdir -p "$OUT.tmp.$live/x" "$OUT.tmp.$dead/x" "$OUT.old.$dead/x" "$OUT.tmp.12x" "$OUT.tmpx.$dead"
# The lock is held by the sleep itself (fd 9), so killing it frees the lock;
# a blocking flock waits out our probes below.
(exec 9<"$OUT.tmp.$dead"; flock 9 && exec sleep 60) >/dev/null 2>&1 &
locker=$!
helpers="$live $locker"
t0=$(now_ms)
while flock -n "$OUT.tmp.$dead" true && (($(now_ms) - t0 < 5000)); do sleep 0.01; done
flock -n "$OUT.tmp.$dead" true && bad "could not hold a lock on $OUT.tmp.$dead"

# A full split after all this: succeeds, removes the dead writers' leftovers
# (saying so), keeps the live ones, and leaves nothing else beside -o.
t0=$(now_ms)
"$pipecut" split "$big" --spec "$out/spec4.json" -o "$OUT" >"$out/split.log" 2>&1 || bad "the final split failed: $(cat "$out/split.log")"
echo "[${SECONDS}s] final split: $(($(now_ms) - t0)) ms"
log=$(cat "$out/split.log")
for p in "${pending[@]}" "$OUT.old.$dead"; do
  grep -qF "pipecut: removed stale temporary $p (its writer, process ${p##*.}, is gone)" <<<"$log" ||
    bad "the final split did not report removing $p: $log"
done
[[ ${#pending[@]} -gt 0 ]] || bad "no killed split left a temporary: the kill points miss the writing"
for keep in "$OUT.tmp.$live" "$OUT.tmp.$dead" "$OUT.tmp.12x" "$OUT.tmpx.$dead"; do
  [[ -d $keep ]] || bad "the sweep removed $keep"
done
grep -qF "$OUT.tmp.$live" <<<"$log" && bad "the split mentions the live temporary: $log"
left=$(cd "$out" && ls -d OUT.tmp.* OUT.old.* 2>/dev/null | grep -vxF -e "OUT.tmp.$live" -e "OUT.tmp.$dead" -e OUT.tmp.12x)
[[ -z $left ]] || bad "left beside -o: $left"
"$pipecut" verify "$OUT" >/dev/null || bad "verify fails after the final split"
[[ $(stages) -eq 4 ]] || bad "the final split did not write 4 stages"
kill "$live" "$locker" 2>/dev/null
wait "$live" "$locker" 2>/dev/null
helpers=
rm -rf "$OUT.tmp.$live" "$OUT.tmp.$dead" "$OUT.tmp.12x" "$OUT.tmpx.$dead" "$OUT"

# Single-file output: kill a normalize while it writes its temporary file.
"$pipecut" normalize "$big" -o "$X" || bad "normalize failed"
sum=$(sha256sum <"$X") ino=$(stat -c %i "$X")
"$pipecut" normalize "$big" -o "$X" &
pid=$!
t0=$(now_ms)
while kill -0 "$pid" 2>/dev/null && (($(now_ms) - t0 < 30000)); do
  [[ $(stat -c %s "$X.tmp.$pid" 2>/dev/null || echo 0) -gt 1000000 ]] && break
  sleep 0.005
done
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
[[ $(sha256sum <"$X") == "$sum" ]] || bad "the killed normalize changed $X"
if [[ $(stat -c %i "$X") == "$ino" ]]; then
  [[ -f $X.tmp.$pid ]] || bad "the killed normalize left no $X.tmp.$pid (killed too late?)"
  killed=$pid
  "$pipecut" normalize "$big" -o "$X" 2>"$out/normalize.log" || bad "normalize after the kill failed: $(cat "$out/normalize.log")"
  grep -qxF "pipecut: removed stale temporary $X.tmp.$killed (its writer, process $killed, is gone)" "$out/normalize.log" ||
    bad "normalize did not report removing $X.tmp.$killed: $(cat "$out/normalize.log")"
  [[ -z $(cd "$out" && ls -d X.pt2.tmp.* 2>/dev/null) ]] || bad "left beside $X: $(cd "$out" && ls -d X.pt2.*)"
  [[ $(sha256sum <"$X") == "$sum" ]] || bad "$X differs after the second normalize"
  echo "[${SECONDS}s] normalize killed mid-write left $(basename "$X.tmp.$killed"); the next normalize removed it"
else
  bad "the normalize finished before it could be killed mid-write"
fi

[[ $fail -eq 0 ]] && echo "kill_split: ok" || echo "kill_split: $fail failure(s)"
[[ $fail -eq 0 ]]
