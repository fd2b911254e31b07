//! The memory allocator of both programs (and of everything that links this crate to measure
//! them): mimalloc instead of glibc's malloc.
//!
//! A cluster-wide pod watch decodes every pod of the initial list — a page of 500 whole pods at a
//! time, ~50 kB each in memory — keeps a ~1 kB ledger entry of each and drops the rest. Under
//! glibc, each tokio worker thread that happens to poll the watch grows its own arena to a page's
//! size and keeps it: the resident size after the list was dominated by freed memory (measured
//! with `make rss`: 147 MiB at 3,000 pods, 96 MiB with `MALLOC_ARENA_MAX=1`). mimalloc's
//! thread-local free lists are returned to the system as pages empty, so the resident size
//! follows what the caches actually hold (numbers in the table of docs/src/benchmarks.md).

/// The process-wide allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
