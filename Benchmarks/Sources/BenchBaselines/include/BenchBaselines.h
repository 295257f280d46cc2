// The C baselines the benchmarks measure Lifeline against, written in C so that nothing of Swift
// sits in their loops.
#ifndef BENCH_BASELINES_H
#define BENCH_BASELINES_H

#include <stdint.h>

/// Makes `count` lua_States with the standard libraries, each holding `handler_source` (a chunk
/// that returns a function) as its handler. Returns an opaque set; free it with bench_states_free.
void *bench_states_new(int count, const char *handler_source);
void bench_states_free(void *states);

/// Calls each state's handler in turn, `rounds` times, with a new event table like the one the host
/// builds (name, time, state), through lua_pcall. Returns the number of failed calls.
long bench_states_dispatch(void *states, long rounds);

/// A plain lua_State with the standard libraries and a global table `bench` whose `empty` is a C
/// function that does nothing. Runs `source` once; returns its status (LUA_OK is 0), and writes
/// the error message, if any, to `error` (up to `error_size` bytes).
int bench_run_plain(const char *source, char *error, int error_size);

/// Bytes the process holds resident now (from /proc/self/statm).
int64_t bench_resident_bytes(void);

/// `count` plain lua_States with the standard libraries, each having run `source`; kept open
/// until bench_plain_states_free. For the memory baseline.
void *bench_plain_states_new(int count, const char *source);
void bench_plain_states_free(void *states);

/// `count` states made as a plugin's state is, with nothing of the host: the memory-capped
/// allocator, the sandbox, and `source` compiled (not run). For plugins.load's baseline.
void *bench_sandboxed_states_new(int count, const char *source);
void bench_sandboxed_states_free(void *states);

/// Merges the heap's freed blocks now (glibc's malloc_trim), so that a counted side pays for the
/// blocks it freed, not whatever call comes after it.
void bench_malloc_trim(void);

#endif
