# Sourced by the scripts whose runs the two tiers share out
# (test/CMakeLists.txt sets PIPECUT_TEST_PART for their ctest entries):
#   quick  the quick tier's part: every split at M=4, the few below at M=1 too;
#   rest   what the full tier adds: the other splits at M=1;
#   all    both (the default, for a script run by hand).
# run_train.sh shares out its optimizer matrix instead, by the same variable.
part=${PIPECUT_TEST_PART:-all}
m1_few=" mlp.2 llama_tiny.4 multi_io.2 dynamic_batch.4 "
want_m1() {  # want_m1 SPLIT: whether this part runs the split at M=1
  case $part in
    quick) [[ $m1_few == *" $1 "* ]] ;;
    rest) [[ $m1_few != *" $1 "* ]] ;;
    *) true ;;
  esac
}
