#pragma once
// How the runner's process reuses freed host memory.
//
// A pipeline stage allocates and frees the same activation-sized blocks every
// micro-batch (a [tokens, vocab] logits tensor, its gradient, ...). glibc's
// defaults hand freed memory at the top of the heap back to the kernel (and
// serve blocks over a moving threshold with mmap), so the next micro-batch
// faults the same pages in again, zeroed: on the 2-stage training bench about
// 700 page faults per micro-batch on the loss stage, ~8% of its compute time.
// Keeping freed memory in the process, as PyTorch's caching allocators do on
// GPUs, costs a resident size at the run's peak rather than below it.
namespace pipecut::runtime {

// Once per process: under mimalloc (the tools link it), reserves an arena
// that blocks over 16 MiB come from and return to; under glibc, fixes the
// mmap threshold at its largest (32 MiB), never trims the heap, and grows it
// 64 MiB at a time. Leaves everything as it is when the user tuned malloc
// (MALLOC_*_, MIMALLOC_* or GLIBC_TUNABLES in the environment) or set
// PIPECUT_MALLOC_DEFAULTS=1.
void keepFreedHostMemory();

}  // namespace pipecut::runtime
