// The control block: one plugin's lua_State, the allocator that holds it under its memory cap,
// and the preemption that stops it from the watchdog's thread.

#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

// ---------------------------------------------------------------- memory

/// Calls this deep when memory runs out mean runaway recursion: Lua's own "stack overflow" would
/// come at LUAI_MAXSTACK, but the cap is reached long before.
#define LIFELINE_DEEP_CALLS 100000

static void *lifeline_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    LifelineControl *c = (LifelineControl *)ud;
    size_t old = ptr ? osize : 0;
    if (nsize == 0) {
        free(ptr);
        c->used -= old;
        return NULL;
    }
    // A new string (Lua passes the type as osize when ptr is NULL) may take the block files.c
    // filled for it; its size was checked against the cap before the block was filled.
    if (ptr == NULL && osize == LUA_TSTRING && c->handoff != NULL && nsize == c->handoff_size) {
        void *p = c->handoff;
        c->handoff = NULL;
        c->used += nsize;
        return p;
    }
    if (nsize > old) c->allocations++;
    if (nsize > old && c->in_bridge == 0) {
        if (c->stopping) return NULL;  // the watchdog's stop, raised as a memory error (see the hook)
        if (c->used - old + nsize > c->limit) {
            lua_Debug ar;
            lua_State *cur = atomic_load(&c->current);  // NULL while lua_newstate runs
            // Only reads the call-info list; nothing here allocates.
            if (cur != NULL && lua_getstack(cur, LIFELINE_DEEP_CALLS, &ar)) c->deep_oom = 1;
            return NULL;  // Lua raises "not enough memory"
        }
    }
    void *p = realloc(ptr, nsize);
    if (p == NULL) return NULL;
    c->used = c->used - old + nsize;
    if (ptr == NULL && osize == LUA_TSTRING && c->probing) {
        c->probing = 0;
        c->probed = p;
        c->probed_size = nsize;
    }
    return p;
}

LifelineControl *lifeline_control_new(size_t memory_limit, void *owner) {
    LifelineControl *c = calloc(1, sizeof(LifelineControl));
    if (c == NULL) return NULL;
    c->limit = memory_limit;
    c->owner = owner;
    atomic_init(&c->preempt, 0);
    atomic_init(&c->thread, 0);
    (void)lifeline_stop_signal();  // installs the stop signal's handler, once per process
    c->main = lua_newstate(lifeline_alloc, c);
    if (c->main == NULL) {
        free(c);
        return NULL;
    }
    atomic_init(&c->current, c->main);
    // Every thread of this state copies the main thread's extra space, so any coroutine finds us.
    *(LifelineControl **)lua_getextraspace(c->main) = c;
    return c;
}

void lifeline_control_free(LifelineControl *c) {
    if (c == NULL) return;
    lua_close(c->main);
    free(c->traceback);
    free(c);
}

lua_State *lifeline_control_state(LifelineControl *c) { return c->main; }
void *lifeline_owner(lua_State *L) { return lifeline_control_of(L)->owner; }
void lifeline_control_set_owner(LifelineControl *c, void *owner) { c->owner = owner; }
size_t lifeline_memory_used(LifelineControl *c) { return c->used; }
size_t lifeline_memory_limit(LifelineControl *c) { return c->limit; }
size_t lifeline_allocation_count(LifelineControl *c) { return c->allocations; }

/// Whether `bytes` more fit under the cap (no overflow, whatever `bytes` is).
static int lifeline_fits(LifelineControl *c, size_t bytes) { return c->used <= c->limit && bytes <= c->limit - c->used; }

int lifeline_charge(LifelineControl *c, size_t bytes) {
    if (!lifeline_fits(c, bytes)) {
        // What the state holds may be mostly garbage: collect it, as Lua does before it gives up.
        if (lua_gc(c->main, LUA_GCCOLLECT) < 0) return 0;  // called from a finalizer: no collection
        if (!lifeline_fits(c, bytes)) return 0;
    }
    c->used += bytes;
    return 1;
}

void lifeline_charge_always(LifelineControl *c, size_t bytes) { c->used += bytes; }

void lifeline_uncharge(LifelineControl *c, size_t bytes) { c->used -= bytes < c->used ? bytes : c->used; }

// lua_error would raise a runtime error with the text "not enough memory", which is not the same
// to pcall's caller.
int lifeline_raise_nomem(lua_State *L) {
    LifelineControl *c = lifeline_control_of(L);
    lua_newuserdatauv(L, c->limit + 1, 0);  // the allocator refuses it: Lua raises LUA_ERRMEM
    return 0;                               // not reached
}

int lifeline_take_deep_oom(LifelineControl *c) {
    int deep = c->deep_oom;
    c->deep_oom = 0;
    return deep;
}

// ---------------------------------------------------------------- preemption
//
// Only the OS thread that runs a state may touch it (SPEC 5 W4): lua_sethook from another thread
// walks the CallInfo list that the running thread may be growing or freeing. So the watchdog
// never calls into Lua. It sets `preempt` and sends a real-time signal to the thread inside the
// call; the handler, on that thread, arms the hook of the state that thread is running now, as
// lua.c does for SIGINT (lua_sethook may be called from a signal handler of the state's own
// thread). Until a deadline passes, a call costs a few thread-local and atomic writes: no hook,
// no lock, no system call (but at the first call on each thread, which learns its id).

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define LIFELINE_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define LIFELINE_TSAN 1
#endif

typedef int (*lifeline_sigaction_fn)(int, const struct sigaction *, struct sigaction *);

#ifdef LIFELINE_TSAN
#include <dlfcn.h>
// ThreadSanitizer runs a handler installed through its own sigaction only when the thread next
// enters a function it intercepts, and a Lua loop enters none: the stop would never land. So
// under TSan the handler is installed with libc's sigaction, and the kernel runs it at once;
// it is then built without instrumentation, so it never re-enters TSan's runtime, which it may
// have interrupted. It touches only the state's hook fields (in the uninstrumented liblua) and
// reads two atomics.
#define LIFELINE_NOT_SANITIZED __attribute__((disable_sanitizer_instrumentation))
static lifeline_sigaction_fn lifeline_sigaction(void) {
    void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    void *real = libc ? dlsym(libc, "sigaction") : NULL;
    return real ? (lifeline_sigaction_fn)real : sigaction;
}
#else
#define LIFELINE_NOT_SANITIZED
static lifeline_sigaction_fn lifeline_sigaction(void) { return sigaction; }
#endif

/// The stop signal: the highest real-time signal free when the first state was made; 0 if none
/// was free (then a stop lands only at the next call into the state).
static int lifeline_stop_signo;
static pthread_once_t lifeline_stop_once = PTHREAD_ONCE_INIT;

// Per OS thread. Initial-exec TLS, so the signal handler reads it without allocating.
// The state this thread is running now (NULL between calls): the handler's target.
static __thread LifelineControl *volatile lifeline_running __attribute__((tls_model("initial-exec")));
// This thread's kernel id, once it has entered a state (0 before).
static __thread pid_t lifeline_self __attribute__((tls_model("initial-exec")));

static void lifeline_preempt_hook(lua_State *L, lua_Debug *ar) {
    (void)ar;
    LifelineControl *c = lifeline_control_of(L);
    if (!atomic_load(&c->preempt)) return;
    if (c->traceback == NULL) {
        luaL_traceback(L, L, NULL, 0);  // stack: ..., traceback
        const char *tb = lua_tostring(L, -1);
        c->traceback = strdup(tb ? tb : "");
        lua_pop(L, 1);  // stack: ...
    }
    // Raise the stop as a memory error, not with lua_error: Lua calls no message handler for
    // memory errors, and a handler called from inside this hook would run with hooks off, where
    // a loop in it could never be stopped. With `stopping` set every allocation fails, so the
    // error comes again at the next instruction, whoever catches it.
    c->stopping = 1;
    lua_newuserdatauv(L, 1, 0);  // fails: raises LUA_ERRMEM
}

void lifeline_arm_hook(lua_State *L) {
    lua_sethook(L, lifeline_preempt_hook, LUA_MASKCOUNT | LUA_MASKCALL, 1);
}

// Arms the coroutine running now and the main thread (where the stop goes once the coroutine
// is left). Only on the thread that runs `c`: in a call, or in its signal handler.
static void lifeline_arm_running(LifelineControl *c) {
    lifeline_arm_hook(atomic_load(&c->current));
    lifeline_arm_hook(c->main);
}

// Runs on the thread the watchdog signalled, wherever it was interrupted: in the VM, in Swift or
// C inside a bridged call, or already out of the call. It acts only on the state this thread is
// running now and only if that state has a stop pending, so a late signal (its call returned,
// the stop was cleared) does nothing; a signal that lands in a later call being stopped does
// what that call's own signal would do. lua_sethook neither allocates nor locks; the hook stays
// set until lifeline_preempt_clear, so the VM meets it at its next instruction however long the
// thread spends in C or Swift first.
//
// Self-contained (no call but lua_sethook) and, under ThreadSanitizer, not instrumented: see
// lifeline_sigaction.
static LIFELINE_NOT_SANITIZED void lifeline_stop_handler(int signo) {
    (void)signo;
    int saved = errno;
    LifelineControl *c = lifeline_running;
    if (c != NULL && atomic_load(&c->preempt)) {
        lua_sethook(atomic_load(&c->current), lifeline_preempt_hook, LUA_MASKCOUNT | LUA_MASKCALL, 1);
        lua_sethook(c->main, lifeline_preempt_hook, LUA_MASKCOUNT | LUA_MASKCALL, 1);
    }
    errno = saved;
}

static void lifeline_install_stop_signal_once(void) {
    lifeline_sigaction_fn sigaction = lifeline_sigaction();
    // From the top: libraries that take a real-time signal tend to take SIGRTMIN + n.
    for (int s = SIGRTMAX; s >= SIGRTMIN; s--) {
        struct sigaction old;
        if (sigaction(s, NULL, &old) != 0) continue;
        if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) continue;  // someone's
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = lifeline_stop_handler;
        sigemptyset(&sa.sa_mask);
        // Interrupted system calls of the host (file I/O, SQLite) go on as if nothing happened.
        sa.sa_flags = SA_RESTART;
        if (sigaction(s, &sa, NULL) == 0) {
            lifeline_stop_signo = s;
            return;
        }
    }
}

int lifeline_stop_signal(void) {
    pthread_once(&lifeline_stop_once, lifeline_install_stop_signal_once);
    return lifeline_stop_signo;
}

// Once per OS thread that runs Lua: learn its kernel id, and make sure the stop signal is not
// blocked there (a thread inherits its creator's mask).
static void lifeline_thread_setup(void) {
    lifeline_self = (pid_t)syscall(SYS_gettid);
    if (lifeline_stop_signo != 0) {
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, lifeline_stop_signo);
        pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    }
}

LifelineControl *lifeline_enter(LifelineControl *c) {
    if (lifeline_self == 0) lifeline_thread_setup();
    LifelineControl *outer = lifeline_running;
    if (c->depth++ == 0) atomic_store(&c->thread, lifeline_self);
    lifeline_running = c;
    // The handler must see `lifeline_running` set before we read `preempt`: then a stop asked
    // just now is armed either here or by its signal.
    atomic_signal_fence(memory_order_seq_cst);
    if (atomic_load(&c->preempt)) lifeline_arm_running(c);
    return outer;
}

void lifeline_leave(LifelineControl *c, LifelineControl *outer) {
    lifeline_running = outer;
    atomic_signal_fence(memory_order_seq_cst);
    // A stale id only sends a signal that finds nothing to do.
    if (--c->depth == 0) atomic_store_explicit(&c->thread, 0, memory_order_relaxed);
}

void lifeline_preempt(LifelineControl *c) {
    atomic_store(&c->preempt, 1);
    if (lifeline_running == c) {
        // Asked from inside the state's own call (a rule the running code broke): arm it now.
        lifeline_arm_running(c);
        return;
    }
    // No thread inside a call: the next lifeline_enter arms the hook.
    pid_t tid = (pid_t)atomic_load(&c->thread);
    if (tid == 0 || lifeline_stop_signo == 0) return;
    // By kernel id, not pthread_t: if the thread has just left the call and ended, tgkill fails
    // with ESRCH, where pthread_kill on a finished thread is undefined.
    syscall(SYS_tgkill, getpid(), tid, lifeline_stop_signo);
}

int lifeline_preempt_requested(LifelineControl *c) { return atomic_load(&c->preempt); }
const char *lifeline_preempt_traceback(LifelineControl *c) { return c->traceback; }

void lifeline_preempt_clear(LifelineControl *c) {
    atomic_store(&c->preempt, 0);
    c->stopping = 0;
    lua_sethook(c->main, NULL, 0, 0);
    lua_State *cur = atomic_load(&c->current);
    if (cur != c->main) lua_sethook(cur, NULL, 0, 0);
    atomic_store(&c->current, c->main);
    free(c->traceback);
    c->traceback = NULL;
}

