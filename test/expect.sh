# Sourced by the runner's shell tests: count checks of exit codes and messages.
# The sourcing script sets fail=0 pass=0 and ends with [[ $fail -eq 0 ]].
expect() {  # expect RC DESCRIPTION -- command...: runs it, keeps its output in LAST_LOG
  local want=$1 what=$2; shift 3
  local log; log=$("$@" 2>&1); local rc=$?
  if [[ $rc -ne $want ]]; then echo "FAIL ($what): exit $rc, wanted $want"; echo "$log" | tail -5; fail=$((fail+1)); else pass=$((pass+1)); fi
  LAST_LOG=$log
}
contains() {  # contains DESCRIPTION NEEDLE: the last command's output holds NEEDLE
  if [[ $LAST_LOG == *"$2"* ]]; then pass=$((pass+1)); else echo "FAIL ($1): no '$2' in: $LAST_LOG"; fail=$((fail+1)); fi
}
ok() { pass=$((pass+1)); }                      # a check passed
bad() { echo "FAIL ($1)"; fail=$((fail+1)); }  # bad DESCRIPTION: a check failed
# What --cpu-matmul auto takes on this machine, read from the kernel's
# /proc/cpuinfo (runtime/cpu_matmul.h asks CPUID): blas on Intel CPUs,
# onednn on other x86 CPUs, blas off x86.
cpu_vendor=$(awk -F': ' '/^vendor_id/ {print $2; exit}' /proc/cpuinfo)
auto_matmul=blas
[[ -n $cpu_vendor && $cpu_vendor != GenuineIntel ]] && auto_matmul=onednn
# Whether the runner's LibTorch has NativeRT (torch 2.15's wheel does not:
# runtime/nativert_runner.h): its --stage-format pt2 checks run only then,
# and without it one check says it is refused, naming the LibTorch.
nativert() { [[ $("$run" --version) != *"without NativeRT"* ]]; }
no_nativert() {  # no_nativert SCRIPT: checks that the refusal says why; counts one pass
  echo "$1: NativeRT checks skipped: $("$run" --version)"
}
