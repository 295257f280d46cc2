#include "CLuaShims.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <string.h>
#include <math.h>
#include <stdio.h>

struct LifelineControl {
    lua_State *main;
    void *owner;
    size_t used;   // bytes the state holds; touched only by the allocator (the plugin's thread)
    size_t limit;  // the cap; past it allocations fail and Lua raises a memory error
    int in_bridge;  // > 0 while Swift code runs inside a Lua call: the cap is lifted so no error longjmps through it
    int stopping;   // set by the hook once the stop hit: every allocation fails from then on
    int deep_oom;   // the cap was hit this many calls deep or more: runaway recursion, reported as a stack overflow
    atomic_int preempt;                 // a stop is asked for the call now running: set by the watchdog thread
    _Atomic(lua_State *) current;       // the thread (coroutine) running now; executor thread and its signal handler
    atomic_int thread;                  // kernel id of the OS thread inside a call into this state; 0 between calls
    int depth;                          // calls into this state on that thread's stack (executor thread only)
    char *traceback;                    // where the stop first hit; malloc'd, freed on clear
    int strings_ref;                    // registry ref of the event strings made so far; 0: none yet
};

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
LifelineControl *lifeline_control_of(lua_State *L) { return *(LifelineControl **)lua_getextraspace(L); }
void *lifeline_owner(lua_State *L) { return lifeline_control_of(L)->owner; }
void lifeline_control_set_owner(LifelineControl *c, void *owner) { c->owner = owner; }
size_t lifeline_memory_used(LifelineControl *c) { return c->used; }
size_t lifeline_memory_limit(LifelineControl *c) { return c->limit; }

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

/// Raises LUA_ERRMEM, Lua's own "not enough memory": an allocation the cap refuses. (lua_error
/// would raise a runtime error with that text, which is not the same to pcall's caller.)
static int lifeline_raise_nomem(lua_State *L) {
    LifelineControl *c = lifeline_control_of(L);
    lua_newuserdatauv(L, c->limit + 1, 0);  // the allocator refuses it: Lua raises LUA_ERRMEM
    return 0;                               // not reached
}

static char lifeline_nomem_key;
void lifeline_push_nomem(lua_State *L) { lua_pushlightuserdata(L, &lifeline_nomem_key); }

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

static void lifeline_arm_hook(lua_State *L) {
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

// Every call from the host into a state goes between these two, on the calling thread: they tell
// the watchdog where to send the stop, and the signal handler which state to arm. Returns the
// state this thread was running before (calls may nest), for lifeline_leave.
static LifelineControl *lifeline_enter(LifelineControl *c) {
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

static void lifeline_leave(LifelineControl *c, LifelineControl *outer) {
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

// ---------------------------------------------------------------- trampoline and errors

// Where a waiting call continues when the host resumes its coroutine. The stack holds the call's
// arguments (ctx of them), then what the host passed: true and the results, or false and an error.
static int lifeline_wait_k(lua_State *L, int status, lua_KContext ctx) {
    (void)status;
    int base = (int)ctx;
    if (!lua_toboolean(L, base + 1)) {
        if (lua_touserdata(L, base + 2) == &lifeline_nomem_key) return lifeline_raise_nomem(L);
        lua_settop(L, base + 2);
        return lua_error(L);
    }
    return lua_gettop(L) - (base + 1);
}

static int lifeline_trampoline(lua_State *L) {
    lifeline_bridged fn = (lifeline_bridged)lua_touserdata(L, lua_upvalueindex(1));
    LifelineControl *c = lifeline_control_of(L);
    // While Swift runs, an allocation past the cap must not raise: the error would longjmp
    // through Swift frames. The few bytes a bridged call allocates are counted, and the cap
    // applies again at the next allocation Lua makes itself.
    c->in_bridge++;
    int n = fn(L);
    c->in_bridge--;
    // No cap check here: the call's effects (a task begun, a timer set) have happened, and an
    // error now would lose the id that undoes them. The next allocation Lua makes is checked.
    if (n == LIFELINE_RAISE) return lua_error(L);  // the message is on top
    if (n == LIFELINE_NOMEM) return lifeline_raise_nomem(L);
    if (n == LIFELINE_YIELD) return lua_yieldk(L, 0, (lua_KContext)lua_gettop(L), lifeline_wait_k);
    return n;
}

void lifeline_pushbridged(lua_State *L, lifeline_bridged fn) {
    lua_pushlightuserdata(L, (void *)fn);       // stack: ..., fn
    lua_pushcclosure(L, lifeline_trampoline, 1);  // stack: ..., closure
}

void lifeline_push_where_message(lua_State *L, const char *msg, size_t len) {
    luaL_where(L, 1);              // stack: ..., where
    lua_pushlstring(L, msg, len);  // stack: ..., where, msg
    lua_concat(L, 2);              // stack: ..., full
}

void lifeline_push_argerror(lua_State *L, int arg, const char *fname, const char *msg, size_t len) {
    luaL_where(L, 1);                                              // stack: ..., where
    lua_pushfstring(L, "bad argument #%d to '%s' (", arg, fname);  // stack: ..., where, head
    lua_pushlstring(L, msg, len);                                  // stack: ..., where, head, msg
    lua_pushliteral(L, ")");
    lua_concat(L, 4);                                              // stack: ..., full
}

void lifeline_push_typeerror(lua_State *L, int arg, const char *fname, const char *expected) {
    const char *got = luaL_typename(L, arg);
    const char *msg = lua_pushfstring(L, "%s expected, got %s", expected, got);  // stack: ..., msg
    lifeline_push_argerror(L, arg, fname, msg, strlen(msg));                      // stack: ..., msg, full
    lua_remove(L, -2);                                                            // stack: ..., full
}

static int lifeline_msgh(lua_State *L) {
    const char *msg = lua_tostring(L, 1);
    if (msg == NULL) {
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
        msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    luaL_traceback(L, L, msg, 1);
    return 1;
}

int lifeline_pcall(lua_State *L, int nargs, int nresults) {
    LifelineControl *c = lifeline_control_of(L);
    int base = lua_gettop(L) - nargs;      // index of the function
    lua_pushcfunction(L, lifeline_msgh);   // stack: ..., f, args..., msgh
    lua_insert(L, base);                   // stack: ..., msgh, f, args...
    LifelineControl *outer = lifeline_enter(c);
    int status = lua_pcall(L, nargs, nresults, base);
    lifeline_leave(c, outer);
    lua_remove(L, base);                   // stack: ..., results or message
    return status;
}

// ---------------------------------------------------------------- coroutines that the watchdog can reach

void lifeline_bridge_enter(lua_State *L) { lifeline_control_of(L)->in_bridge++; }
void lifeline_bridge_leave(lua_State *L) { lifeline_control_of(L)->in_bridge--; }

int lifeline_resume(lua_State *L, lua_State *co, int nargs) {
    LifelineControl *c = lifeline_control_of(L);
    c->deep_oom = 0;
    int nres = 0;
    LifelineControl *outer = lifeline_enter(c);
    lua_State *prev = atomic_exchange(&c->current, co);
    // A stop signal handled just before the exchange armed only `prev`.
    if (atomic_load(&c->preempt)) lifeline_arm_hook(co);
    int status = lua_resume(co, L, nargs, &nres);
    atomic_store(&c->current, prev);
    lifeline_leave(c, outer);
    if (status == LUA_OK || status == LUA_YIELD) {
        lua_pop(co, nres);
    } else {
        // A copy: the error stays on top of co, where closing co hands it to its to-be-closed
        // variables.
        c->in_bridge++;
        lua_pushvalue(co, -1);
        lua_xmove(co, L, 1);
        c->in_bridge--;
    }
    return status;
}

int lifeline_close_thread(lua_State *L, lua_State *co) {
    LifelineControl *c = lifeline_control_of(L);
    int died = lua_status(co) != LUA_OK && lua_status(co) != LUA_YIELD;
    if (died) {  // remember the error it died of, to tell a new one from it
        c->in_bridge++;
        lua_pushvalue(co, -1);
        lua_xmove(co, L, 1);  // stack: ..., original
        c->in_bridge--;
    }
    LifelineControl *outer = lifeline_enter(c);
    lua_State *prev = atomic_exchange(&c->current, co);
    if (atomic_load(&c->preempt)) lifeline_arm_hook(co);
#if LUA_VERSION_RELEASE_NUM >= 50406
    int status = lua_closethread(co, L);
#else
    int status = lua_resetthread(co);
#endif
    atomic_store(&c->current, prev);
    lifeline_leave(c, outer);
    if (status != LUA_OK) {
        c->in_bridge++;
        lua_xmove(co, L, 1);  // stack: ..., [original,] error
        c->in_bridge--;
    }
    if (died) {
        if (status == LUA_OK || lua_rawequal(L, -1, -2)) {
            lua_settop(L, lua_gettop(L) - (status == LUA_OK ? 1 : 2));  // only the old error: closed cleanly
            return LUA_OK;
        }
        lua_remove(L, -2);  // stack: ..., error
    }
    return status;
}

// Runs protected, with the memory cap on: the error value's __tostring is plugin code.
static int lifeline_traceback_thunk(lua_State *L) {
    lua_State *co = (lua_State *)lua_touserdata(L, 2);  // stack: err, co
    const char *msg = lua_tostring(L, 1);
    if (msg == NULL) {
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) {
            msg = lua_tostring(L, -1);
        } else {
            msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
        }
    }
    luaL_traceback(L, co, msg, 0);
    return 1;
}

void lifeline_traceback_of(lua_State *L, lua_State *co) {
    // None of these three pushes allocates: a light C function, a light userdata, a rotation.
    lua_pushcfunction(L, lifeline_traceback_thunk);  // stack: ..., err, thunk
    lua_insert(L, -2);                               // stack: ..., thunk, err
    lua_pushlightuserdata(L, co);                    // stack: ..., thunk, err, co
    LifelineControl *c = lifeline_control_of(L);
    LifelineControl *outer = lifeline_enter(c);      // __tostring is plugin code: stoppable
    int status = lua_pcall(L, 2, 1, 0);              // stack: ..., message | failure
    lifeline_leave(c, outer);
    if (status != LUA_OK) {
        c->in_bridge++;
        lua_pop(L, 1);
        lua_pushliteral(L, "(the error object's __tostring failed)");
        c->in_bridge--;
    }
}

// Resumes `co` while recording it as the running thread, so a preemption reaches code inside it.
static int lifeline_auxresume(lua_State *L, lua_State *co, int narg) {
    int status, nres;
    if (!lua_checkstack(co, narg)) {
        lua_pushliteral(L, "too many arguments to resume");
        return -1;
    }
    lua_xmove(L, co, narg);
    LifelineControl *c = lifeline_control_of(L);
    lua_State *prev = atomic_exchange(&c->current, co);
    // A stop signal handled just before the exchange armed only `prev`.
    if (atomic_load(&c->preempt)) lifeline_arm_hook(co);
    status = lua_resume(co, L, narg, &nres);
    atomic_store(&c->current, prev);
    if (atomic_load(&c->preempt)) lifeline_arm_hook(L);  // the stop follows us back out
    if (status == LUA_OK || status == LUA_YIELD) {
        if (!lua_checkstack(L, nres + 1)) {
            lua_pop(co, nres);
            lua_pushliteral(L, "too many results to resume");
            return -1;
        }
        lua_xmove(co, L, nres);
        return nres;
    }
    lua_xmove(co, L, 1);
    return -1;
}

#define LIFELINE_HOST_THREADS "lifeline.hostthreads"

void lifeline_mark_host_thread(lua_State *L, lua_State *co) {
    lua_getfield(L, LUA_REGISTRYINDEX, LIFELINE_HOST_THREADS);  // stack: ..., threads
    lua_pushthread(co);                                          // pushed on co, moved below
    lua_xmove(co, L, 1);                                         // stack: ..., threads, co
    lua_pushboolean(L, 1);
    lua_rawset(L, -3);                                           // stack: ..., threads
    lua_pop(L, 1);
}

/// The coroutine argument of a coroutine function; a coroutine the host runs (a background work,
/// an operation) is refused: resuming it would end the host's wait early with made-up results,
/// and closing it would end the work behind the host's back.
static lua_State *lifeline_getco(lua_State *L) {
    lua_State *co = lua_tothread(L, 1);
    luaL_argexpected(L, co, 1, "coroutine");
    lua_getfield(L, LUA_REGISTRYINDEX, LIFELINE_HOST_THREADS);
    lua_pushvalue(L, 1);
    int hostRun = lua_rawget(L, -2) != LUA_TNIL;
    lua_pop(L, 2);
    if (hostRun) {
        luaL_error(L, "this coroutine is run by the host (lifeline.background or a queue's operation): "
                      "only the host may resume or close it; wait for it with task:wait() or stop it with task:cancel()");
    }
    return co;
}

static int lifeline_coclose(lua_State *L) {
    lifeline_getco(L);  // refuses a host-run coroutine
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
}

static int lifeline_coresume(lua_State *L) {
    lua_State *co = lifeline_getco(L);
    int r = lifeline_auxresume(L, co, lua_gettop(L) - 1);
    if (r < 0) {
        lua_pushboolean(L, 0);
        lua_insert(L, -2);
        return 2;
    }
    lua_pushboolean(L, 1);
    lua_insert(L, -(r + 1));
    return r + 1;
}

static int lifeline_auxwrap(lua_State *L) {
    lua_State *co = lua_tothread(L, lua_upvalueindex(1));
    int r = lifeline_auxresume(L, co, lua_gettop(L));
    if (r < 0) {
        int stat = lua_status(co);
        if (stat != LUA_OK && stat != LUA_YIELD) {
#if LUA_VERSION_RELEASE_NUM >= 50406
            stat = lua_closethread(co, L);
#else
            stat = lua_resetthread(co);
#endif
            lua_xmove(co, L, 1);
        }
        if (stat != LUA_ERRMEM && lua_type(L, -1) == LUA_TSTRING) {
            luaL_where(L, 1);
            lua_insert(L, -2);
            lua_concat(L, 2);
        }
        return lua_error(L);
    }
    return r;
}

static int lifeline_cowrap(lua_State *L) {
    luaL_checktype(L, 1, LUA_TFUNCTION);
    lua_State *NL = lua_newthread(L);  // stack: f, co
    lua_pushvalue(L, 1);               // stack: f, co, f
    lua_xmove(L, NL, 1);               // stack: f, co
    lua_pushcclosure(L, lifeline_auxwrap, 1);
    return 1;
}

// ---------------------------------------------------------------- sandbox

#define LIFELINE_LOADED "lifeline.loaded"
#define LIFELINE_PLUGIN_DIR "lifeline.plugindir"
/// The plugin folder's real path (every link resolved): what a plugin loads must lie below it.
#define LIFELINE_PLUGIN_ROOT "lifeline.pluginroot"

// Loads a text chunk from `path`, which must lie inside the plugin's folder (files.c): pushes the
// chunk and returns LUA_OK, or pushes a message that names the file and returns the error
// status, with `why` (LIFELINE_FILE_*) saying why. (Lua's message for a binary chunk names no file.)
static int lifeline_loadfile_text(lua_State *L, const char *path, int *why) {
    lua_getfield(L, LUA_REGISTRYINDEX, LIFELINE_PLUGIN_ROOT);             // stack: ..., root
    int status = lifeline_load_inside(L, lua_tostring(L, -1), path, why);  // stack: ..., root, chunk | message
    lua_remove(L, -2);                                                    // stack: ..., chunk | message
    if (status != LUA_OK) {
        const char *msg = lua_tostring(L, -1);
        if (msg != NULL && strstr(msg, path) == NULL) {
            lua_pushfstring(L, "%s:1: %s", path, msg);  // stack: ..., message, full
            lua_remove(L, -2);                          // stack: ..., full
        }
    }
    return status;
}

// ---------------------------------------------------------------- deterministic iteration

// Lua seeds its string hashes at random in every state, so next() visits string keys in a
// different order on every run. `pairs` sorts the keys instead, so that `lifeline simulate` gives
// the same report for the same inputs: numbers in numeric order, then strings in byte order, then
// booleans (false first); other keys (tables, functions) last, in next() order.

typedef struct LifelineKey {
    int rank;            // 0 number, 1 string, 2 boolean, 3 other
    int isint;
    lua_Integer i;
    lua_Number n;
    const char *s;       // kept alive by the keys table
    size_t len;
    int slot;            // position in next() order, for a stable sort
} LifelineKey;

static int lifeline_key_compare(const void *a, const void *b) {
    const LifelineKey *x = a, *y = b;
    if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
    switch (x->rank) {
    case 0:
        if (x->isint && y->isint) {
            if (x->i != y->i) return x->i < y->i ? -1 : 1;
        } else {
            lua_Number p = x->isint ? (lua_Number)x->i : x->n, q = y->isint ? (lua_Number)y->i : y->n;
            if (p != q) return p < q ? -1 : 1;
        }
        break;
    case 1: {
        size_t m = x->len < y->len ? x->len : y->len;
        int c = memcmp(x->s, y->s, m);
        if (c != 0) return c;
        if (x->len != y->len) return x->len < y->len ? -1 : 1;
        break;
    }
    case 2:
        if (x->i != y->i) return x->i < y->i ? -1 : 1;
        break;
    }
    return x->slot < y->slot ? -1 : (x->slot > y->slot);
}

// The iterator: upvalue 1 is the sorted keys, upvalue 2 the next position.
static int lifeline_sorted_next(lua_State *L) {
    lua_Integer pos = lua_tointeger(L, lua_upvalueindex(2));
    for (;;) {
        pos++;
        if (lua_rawgeti(L, lua_upvalueindex(1), pos) == LUA_TNIL) return 1;  // stack: t, _, nil: done
        lua_pushvalue(L, -1);   // stack: t, _, k, k
        lua_rawget(L, 1);       // stack: t, _, k, v
        if (!lua_isnil(L, -1)) break;
        lua_pop(L, 2);          // removed while iterating: skip it, as next() would
    }
    lua_pushinteger(L, pos);
    lua_replace(L, lua_upvalueindex(2));
    return 2;
}

static int lifeline_pairs(lua_State *L) {
    luaL_checkany(L, 1);
    if (luaL_getmetafield(L, 1, "__pairs") != LUA_TNIL) {  // stack: t, __pairs
        lua_pushvalue(L, 1);
        lua_call(L, 1, 3);
        return 3;
    }
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    lua_Integer n = 0;
    lua_newtable(L);                  // stack: t, keys (in next() order)
    lua_pushnil(L);
    while (lua_next(L, 1) != 0) {     // stack: t, keys, k, v
        lua_pop(L, 1);
        lua_pushvalue(L, -1);
        lua_rawseti(L, 2, ++n);       // stack: t, keys, k
    }
    LifelineKey *ks = (LifelineKey *)lua_newuserdatauv(L, sizeof(LifelineKey) * (size_t)(n > 0 ? n : 1), 0);
    for (lua_Integer j = 1; j <= n; j++) {  // stack: t, keys, ud
        LifelineKey *k = &ks[j - 1];
        memset(k, 0, sizeof *k);
        k->slot = (int)j;
        switch (lua_rawgeti(L, 2, j)) {
        case LUA_TNUMBER:
            k->rank = 0;
            k->isint = lua_isinteger(L, -1);
            if (k->isint) k->i = lua_tointeger(L, -1); else k->n = lua_tonumber(L, -1);
            break;
        case LUA_TSTRING:
            k->rank = 1;
            k->s = lua_tolstring(L, -1, &k->len);
            break;
        case LUA_TBOOLEAN:
            k->rank = 2;
            k->i = lua_toboolean(L, -1);
            break;
        default:
            k->rank = 3;
        }
        lua_pop(L, 1);
    }
    qsort(ks, (size_t)n, sizeof(LifelineKey), lifeline_key_compare);
    lua_createtable(L, (int)n, 0);          // stack: t, keys, ud, sorted
    for (lua_Integer j = 1; j <= n; j++) {
        lua_rawgeti(L, 2, ks[j - 1].slot);
        lua_rawseti(L, -2, j);
    }
    lua_pushinteger(L, 0);                  // stack: t, keys, ud, sorted, 0
    lua_pushcclosure(L, lifeline_sorted_next, 2);  // stack: t, keys, ud, iter
    lua_pushvalue(L, 1);
    lua_pushnil(L);                         // stack: ..., iter, t, nil
    return 3;
}

// setmetatable that refuses __gc: Lua runs finalizers with hooks off, so a runaway finalizer
// could never be stopped by the watchdog, and lua_close would run plugin code after the app ended.
static int lifeline_setmetatable(lua_State *L) {
    if (lua_type(L, 2) == LUA_TTABLE) {
        lua_pushliteral(L, "__gc");
        if (lua_rawget(L, 2) != LUA_TNIL) {
            return luaL_error(L, "__gc metamethods are not available to plugins "
                                 "(the watchdog cannot stop a finalizer)");
        }
        lua_pop(L, 1);
    }
    lua_pushvalue(L, lua_upvalueindex(1));  // stack: t, mt, setmetatable
    lua_insert(L, 1);                       // stack: setmetatable, t, mt
    lua_settop(L, 3);
    lua_call(L, 2, 1);
    return 1;
}

// load() for text chunks only: the mode argument is forced to "t".
static int lifeline_load_text(lua_State *L) {
    // An absent env must stay absent: passing nil would give the chunk _ENV = nil.
    int nargs = lua_gettop(L) < 3 ? 3 : lua_gettop(L);
    if (nargs > 4) nargs = 4;
    lua_settop(L, nargs);                      // stack: chunk, name, mode[, env]
    lua_pushliteral(L, "t");
    lua_replace(L, 3);                         // stack: chunk, name, "t"[, env]
    lua_pushvalue(L, lua_upvalueindex(1));     // stack: chunk, name, "t"[, env], load
    lua_insert(L, 1);                          // stack: load, chunk, name, "t"[, env]
    lua_call(L, nargs, LUA_MULTRET);
    return lua_gettop(L);
}

static int lifeline_require(lua_State *L) {
    const char *name = luaL_checkstring(L, 1);
    lua_settop(L, 1);
    lua_getfield(L, LUA_REGISTRYINDEX, LIFELINE_LOADED);  // stack: name, loaded
    lua_getfield(L, 2, name);                            // stack: name, loaded, value
    if (!lua_isnil(L, -1)) return 1;
    lua_pop(L, 1);                                       // stack: name, loaded
    size_t len = strlen(name);
    int ok = len > 0 && name[0] != '.' && name[len - 1] != '.' && strstr(name, "..") == NULL;
    for (size_t i = 0; ok && i < len; i++) {
        char ch = name[i];
        ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
             ch == '-' || ch == '.';
    }
    if (!ok) {
        return luaL_error(L, "module '%s' not found: require takes 'lifeline' or a module in the plugin's folder",
                          name);
    }
    lua_getfield(L, LUA_REGISTRYINDEX, LIFELINE_PLUGIN_DIR);  // stack: name, loaded, dir
    luaL_gsub(L, name, ".", "/");                             // stack: name, loaded, dir, relpath
    const char *dir = lua_tostring(L, 3);
    const char *rel = lua_tostring(L, 4);
    const char *candidates[2];
    candidates[0] = lua_pushfstring(L, "%s/%s.lua", dir, rel);       // stack: ..., path1
    candidates[1] = lua_pushfstring(L, "%s/%s/init.lua", dir, rel);  // stack: ..., path1, path2
    for (int i = 0; i < 2; i++) {
        int why;
        if (lifeline_loadfile_text(L, candidates[i], &why) != LUA_OK) {  // stack: ..., message
            if (why == LIFELINE_FILE_MISSING) {
                lua_pop(L, 1);
                continue;
            }
            if (why == LIFELINE_FILE_OUTSIDE) {
                return luaL_error(L, "module '%s' refused: %s leads outside the plugin's folder (through a link); "
                                     "require loads only files inside the plugin's folder", name, candidates[i]);
            }
            return lua_error(L);
        }                                                                                // stack: ..., chunk
        lua_pushvalue(L, 1);                                                     // stack: ..., chunk, name
        lua_call(L, 1, 1);                                                       // stack: ..., result
        if (lua_isnil(L, -1)) {
            lua_pop(L, 1);
            lua_pushboolean(L, 1);
        }
        lua_pushvalue(L, -1);       // stack: ..., result, result
        lua_setfield(L, 2, name);   // stack: ..., result
        return 1;
    }
    return luaL_error(L, "module '%s' not found in the plugin's folder (tried %s and %s)", name, candidates[0],
                      candidates[1]);
}

void lifeline_preload(lua_State *L, const char *name) {
    lua_getfield(L, LUA_REGISTRYINDEX, LIFELINE_LOADED);  // stack: ..., value, loaded
    lua_insert(L, -2);                                  // stack: ..., loaded, value
    lua_setfield(L, -2, name);                          // stack: ..., loaded
    lua_pop(L, 1);                                      // stack: ...
}

// The libraries a plugin gets, in the style of linit.c: an explicit list, never luaL_openlibs.
static const luaL_Reg lifeline_allowed_libs[] = {
    {LUA_GNAME, luaopen_base},
    {LUA_STRLIBNAME, luaopen_string},
    {LUA_TABLIBNAME, luaopen_table},
    {LUA_MATHLIBNAME, luaopen_math},
    {LUA_UTF8LIBNAME, luaopen_utf8},
    {LUA_COLIBNAME, luaopen_coroutine},
    {NULL, NULL}
};

static const char *const lifeline_allowed_os[] = {"time", "clock", "date", "difftime", NULL};
static const char *const lifeline_removed_base[] = {"dofile", "loadfile", NULL};

static int lifeline_open_sandbox_protected(lua_State *L) {
    const char *plugin_dir = (const char *)lua_touserdata(L, 1);
    for (const luaL_Reg *lib = lifeline_allowed_libs; lib->func; lib++) {
        luaL_requiref(L, lib->name, lib->func, 1);  // stack: ..., lib
        lua_pop(L, 1);
    }
    lua_pushglobaltable(L);  // stack: ..., _G
    for (const char *const *n = lifeline_removed_base; *n; n++) {
        lua_pushnil(L);
        lua_setfield(L, -2, *n);
    }
    lua_getfield(L, -1, "load");                  // stack: ..., _G, load
    lua_pushcclosure(L, lifeline_load_text, 1);   // stack: ..., _G, textload
    lua_setfield(L, -2, "load");                  // stack: ..., _G
    lua_pushcfunction(L, lifeline_pairs);
    lua_setfield(L, -2, "pairs");
    // A fixed seed, so math.random gives the same numbers on every run.
    lua_getfield(L, -1, LUA_MATHLIBNAME);          // stack: ..., _G, math
    lua_getfield(L, -1, "randomseed");             // stack: ..., _G, math, randomseed
    lua_pushinteger(L, 0);
    lua_call(L, 1, 0);                             // stack: ..., _G, math
    lua_pop(L, 1);                                 // stack: ..., _G
    lua_getfield(L, -1, "setmetatable");              // stack: ..., _G, setmetatable
    lua_pushcclosure(L, lifeline_setmetatable, 1);    // stack: ..., _G, guarded
    lua_setfield(L, -2, "setmetatable");              // stack: ..., _G

    // os, reduced to what cannot touch the machine.
    luaL_requiref(L, LUA_OSLIBNAME, luaopen_os, 0);  // stack: ..., _G, fullos
    lua_newtable(L);                                 // stack: ..., _G, fullos, os
    for (const char *const *n = lifeline_allowed_os; *n; n++) {
        lua_getfield(L, -2, *n);
        lua_setfield(L, -2, *n);
    }
    lua_setfield(L, -3, LUA_OSLIBNAME);  // stack: ..., _G, fullos
    lua_pop(L, 1);                       // stack: ..., _G

    // coroutine.resume and coroutine.wrap that tell the watchdog which thread runs.
    lua_getfield(L, -1, LUA_COLIBNAME);           // stack: ..., _G, coroutine
    lua_pushcfunction(L, lifeline_coresume);
    lua_setfield(L, -2, "resume");
    lua_pushcfunction(L, lifeline_cowrap);
    lua_setfield(L, -2, "wrap");
    lua_getfield(L, -1, "close");
    lua_pushcclosure(L, lifeline_coclose, 1);
    lua_setfield(L, -2, "close");
    // Threads the host runs, as weak keys: a finished one goes with the garbage.
    lua_newtable(L);
    lua_createtable(L, 0, 1);
    lua_pushliteral(L, "k");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    lua_setfield(L, LUA_REGISTRYINDEX, LIFELINE_HOST_THREADS);
    lua_pop(L, 1);                                // stack: ..., _G

    // require: `lifeline` and the plugin's own folder, nothing else.
    lua_newtable(L);
    lua_setfield(L, LUA_REGISTRYINDEX, LIFELINE_LOADED);
    lua_pushstring(L, plugin_dir);
    lua_setfield(L, LUA_REGISTRYINDEX, LIFELINE_PLUGIN_DIR);
    // Resolved once, here: a link to the plugin's folder is followed (the user made it), and
    // what the plugin loads later must lie below where it led at the start.
    char root[PATH_MAX];
    if (realpath(plugin_dir, root) != NULL) {
        lua_pushstring(L, root);
        lua_setfield(L, LUA_REGISTRYINDEX, LIFELINE_PLUGIN_ROOT);
    }
    lua_pushcfunction(L, lifeline_require);
    lua_setfield(L, -2, "require");               // stack: ..., _G

    lua_pop(L, 1);  // stack: ...
    // The full libraries stay out of reach: drop what luaL_requiref cached.
    lua_pushnil(L);
    lua_setfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    return 0;
}

int lifeline_open_sandbox(lua_State *L, const char *plugin_dir) {
    lua_pushcfunction(L, lifeline_open_sandbox_protected);
    lua_pushlightuserdata(L, (void *)plugin_dir);
    return lua_pcall(L, 1, 0, 0);
}

// ---------------------------------------------------------------- calls from the host

// Everything the host does to a state from outside Lua happens inside lua_pcall, so no error can
// escape unprotected (which would abort) or longjmp through Swift.

// The strings every event table holds (its keys, the event names, the states), made once per
// state and kept in a registry table by slot: pushing one is an array read, not a hash of its text.
enum { SLOT_NAME = 1, SLOT_TIME, SLOT_STATE, SLOT_FIRST_VALUE };

// Pushes the string in `slot` of the cache at `cache` (an absolute index), making it from `text`
// the first time; slot 0 pushes `text` without caching.
static void lifeline_push_cached(lua_State *L, int cache, int slot, const char *text) {
    if (slot <= 0) {
        lua_pushstring(L, text);
        return;
    }
    if (lua_rawgeti(L, cache, slot) == LUA_TSTRING) return;
    lua_pop(L, 1);
    lua_pushstring(L, text);
    lua_pushvalue(L, -1);
    lua_rawseti(L, cache, slot);
}

static int lifeline_call_thunk(lua_State *L) {
    lua_Integer ref = lua_tointeger(L, 1);
    const LifelineEvent *ev = (const LifelineEvent *)lua_touserdata(L, 2);
    lua_settop(L, 0);
    lua_rawgeti(L, LUA_REGISTRYINDEX, ref);  // stack: f
    if (ev == NULL) {
        lua_call(L, 0, 0);
        return 0;
    }
    LifelineControl *c = lifeline_control_of(L);
    if (c->strings_ref == 0) {
        lua_newtable(L);
        c->strings_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, c->strings_ref);  // stack: f, cache
    lua_createtable(L, 0, ev->transfer_id ? 7 : 3);     // stack: f, cache, event
    lifeline_push_cached(L, 2, SLOT_NAME, "name");
    lifeline_push_cached(L, 2, ev->name_slot > 0 ? SLOT_FIRST_VALUE + ev->name_slot : 0, ev->name);
    lua_rawset(L, 3);
    lifeline_push_cached(L, 2, SLOT_TIME, "time");
    lua_pushnumber(L, ev->time);
    lua_rawset(L, 3);
    lifeline_push_cached(L, 2, SLOT_STATE, "state");
    lifeline_push_cached(L, 2, ev->state_slot > 0 ? SLOT_FIRST_VALUE + 64 + ev->state_slot : 0, ev->state);
    lua_rawset(L, 3);
    lua_remove(L, 2);                                    // stack: f, event
    if (ev->transfer_id) {
        lua_pushstring(L, ev->transfer_id);
        lua_setfield(L, -2, "id");
        if (ev->reason) {
            lua_pushstring(L, ev->reason);
            lua_setfield(L, -2, "reason");
        }
        if (ev->received >= 0) {
            lua_pushinteger(L, (lua_Integer)ev->received);
            lua_setfield(L, -2, "received");
        }
        if (ev->total >= 0) {
            lua_pushinteger(L, (lua_Integer)ev->total);
            lua_setfield(L, -2, "total");
        }
    }
    lua_call(L, 1, 0);                  // stack: (empty)
    return 0;
}

int lifeline_call_ref(lua_State *L, int ref, const LifelineEvent *event) {
    lifeline_control_of(L)->deep_oom = 0;
    lua_pushcfunction(L, lifeline_call_thunk);  // stack: thunk (a light C function: no allocation)
    lua_pushinteger(L, ref);                    // stack: thunk, ref
    lua_pushlightuserdata(L, (void *)event);    // stack: thunk, ref, event
    return lifeline_pcall(L, 2, 0);             // stack: (empty) or message
}

static int lifeline_call_value_thunk(lua_State *L) {
    lua_Integer ref = lua_tointeger(L, 1);
    lua_Integer argref = lua_tointeger(L, 2);
    lua_settop(L, 0);
    lua_rawgeti(L, LUA_REGISTRYINDEX, ref);     // stack: f
    lua_rawgeti(L, LUA_REGISTRYINDEX, argref);  // stack: f, arg
    lua_call(L, 1, 0);
    return 0;
}

int lifeline_call_ref_value(lua_State *L, int ref, int argref) {
    lifeline_control_of(L)->deep_oom = 0;
    lua_pushcfunction(L, lifeline_call_value_thunk);
    lua_pushinteger(L, ref);
    lua_pushinteger(L, argref);
    return lifeline_pcall(L, 2, 0);
}

static int lifeline_run_file_thunk(lua_State *L) {
    const char *path = (const char *)lua_touserdata(L, 1);
    lua_settop(L, 0);
    int why;
    if (lifeline_loadfile_text(L, path, &why) != LUA_OK) {  // stack: message
        // A compile error is returned, not raised: it needs no traceback.
        lua_pushboolean(L, 0);  // stack: message, false
        lua_insert(L, -2);      // stack: false, message
        return 2;
    }
    lua_call(L, 0, 0);
    lua_pushboolean(L, 1);
    return 1;
}

int lifeline_run_file(lua_State *L, const char *path) {
    lifeline_control_of(L)->deep_oom = 0;
    lua_pushcfunction(L, lifeline_run_file_thunk);
    lua_pushlightuserdata(L, (void *)path);
    int status = lifeline_pcall(L, 1, 2);  // stack: true, nil | false, message | error
    if (status != LUA_OK) return status;
    if (lua_toboolean(L, -2)) {
        lua_pop(L, 2);
        return LUA_OK;
    }
    lua_remove(L, -2);  // stack: message
    return LUA_ERRSYNTAX;
}

void lifeline_unref(lua_State *L, int ref) {
    LifelineControl *c = lifeline_control_of(L);
    c->in_bridge++;
    luaL_unref(L, LUA_REGISTRYINDEX, ref);
    c->in_bridge--;
}

int lifeline_ref_function(lua_State *L, int idx) {
    lua_pushvalue(L, idx);
    return luaL_ref(L, LUA_REGISTRYINDEX);
}

// ---------------------------------------------------------------- task handles and error values

#define LIFELINE_TASK "lifeline.task"
#define LIFELINE_ERROR "lifeline.error"

// task.id, and the methods (upvalue 1).
static int lifeline_task_index(lua_State *L) {
    LifelineTaskHandle *h = (LifelineTaskHandle *)luaL_checkudata(L, 1, LIFELINE_TASK);
    const char *key = lua_tostring(L, 2);
    if (key != NULL && strcmp(key, "id") == 0) {
        lua_pushinteger(L, h->id);
        return 1;
    }
    lua_pushvalue(L, 2);
    lua_rawget(L, lua_upvalueindex(1));
    return 1;
}

LifelineTaskHandle *lifeline_push_task(lua_State *L, lua_Integer id) {
    LifelineTaskHandle *h = (LifelineTaskHandle *)lua_newuserdatauv(L, sizeof(LifelineTaskHandle), 1);
    h->id = id;
    h->outcome = 0;
    luaL_setmetatable(L, LIFELINE_TASK);
    return h;
}

LifelineTaskHandle *lifeline_to_task(lua_State *L, int idx) {
    return (LifelineTaskHandle *)luaL_testudata(L, idx, LIFELINE_TASK);
}

// ---------------------------------------------------------------- queues and operations

#define LIFELINE_QUEUE "lifeline.queue"
#define LIFELINE_OPERATION "lifeline.operation"

// obj.id, obj.name (user value 1), and the methods (upvalue 1). Upvalue 2: the metatable's name.
static int lifeline_object_index(lua_State *L) {
    LifelineObject *o = (LifelineObject *)luaL_checkudata(L, 1, lua_tostring(L, lua_upvalueindex(2)));
    const char *key = lua_tostring(L, 2);
    if (key != NULL && strcmp(key, "id") == 0) {
        lua_pushinteger(L, o->id);
        return 1;
    }
    if (key != NULL && strcmp(key, "name") == 0) {
        lua_getiuservalue(L, 1, 1);
        return 1;
    }
    lua_pushvalue(L, 2);
    lua_rawget(L, lua_upvalueindex(1));
    return 1;
}

static LifelineObject *lifeline_push_object(lua_State *L, const char *tname, lua_Integer id, const char *name) {
    LifelineObject *o = (LifelineObject *)lua_newuserdatauv(L, sizeof(LifelineObject), 1);
    o->id = id;
    o->flags = 0;
    luaL_setmetatable(L, tname);
    if (name != NULL) {
        lua_pushstring(L, name);
        lua_setiuservalue(L, -2, 1);
    }
    return o;
}

LifelineObject *lifeline_push_queue(lua_State *L, const char *name) {
    return lifeline_push_object(L, LIFELINE_QUEUE, 0, name);
}

LifelineObject *lifeline_to_queue(lua_State *L, int idx) {
    return (LifelineObject *)luaL_testudata(L, idx, LIFELINE_QUEUE);
}

LifelineObject *lifeline_push_operation(lua_State *L, lua_Integer id, const char *name) {
    return lifeline_push_object(L, LIFELINE_OPERATION, id, name);
}

LifelineObject *lifeline_to_operation(lua_State *L, int idx) {
    return (LifelineObject *)luaL_testudata(L, idx, LIFELINE_OPERATION);
}

int lifeline_takes_arguments(lua_State *L, int idx) {
    lua_Debug ar;
    lua_pushvalue(L, idx);
    if (!lua_getinfo(L, ">u", &ar)) return 1;
    return ar.nparams > 0 || ar.isvararg;
}

static void lifeline_new_class(lua_State *L, const char *tname, const LifelineReg *methods) {
    luaL_newmetatable(L, tname);   // stack: ..., mt
    lua_newtable(L);               // stack: ..., mt, methods
    for (const LifelineReg *r = methods; r->name; r++) {
        lifeline_pushbridged(L, r->fn);
        lua_setfield(L, -2, r->name);
    }
    lua_pushstring(L, tname);
    lua_pushcclosure(L, lifeline_object_index, 2);
    lua_setfield(L, -2, "__index");
    lua_pushstring(L, tname);
    lua_setfield(L, -2, "__name");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_pop(L, 1);                 // stack: ...
}

// lifeline.queue(name, opts): __call of the lifeline.queue table. Upvalue 1: the bridged function.
static int lifeline_queue_call(lua_State *L) {
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_replace(L, 1);  // the table gives way to the function
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
}

// Builds lifeline.queue: callable, with the global queue as `background`.
static void lifeline_open_queues(lua_State *L, const LifelineModuleSpec *spec) {
    lifeline_new_class(L, LIFELINE_QUEUE, spec->queue_methods);
    lifeline_new_class(L, LIFELINE_OPERATION, spec->operation_methods);
    lua_newtable(L);                          // stack: lifeline, queue
    lifeline_push_queue(L, "background");
    lua_setfield(L, -2, "background");
    lua_createtable(L, 0, 2);                 // stack: lifeline, queue, mt
    lifeline_pushbridged(L, spec->queue_new);
    lua_pushcclosure(L, lifeline_queue_call, 1);
    lua_setfield(L, -2, "__call");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_setmetatable(L, -2);                  // stack: lifeline, queue
    lua_setfield(L, -2, "queue");             // stack: lifeline
}

// lifeline.store.transaction(fn). Upvalues: begin and commit (bridged), rollback (light userdata).
// fn runs under lua_pcall, which cannot yield, and the waiting calls refuse to wait while the
// transaction is open. Whatever fn does, raise, get stopped by the watchdog or run out of memory,
// the rollback is a plain C call here: it runs even when Lua cannot run another instruction.
static int lifeline_store_transaction(lua_State *L) {
    lifeline_store_rollback rollback = (lifeline_store_rollback)lua_touserdata(L, lua_upvalueindex(3));
    luaL_checktype(L, 1, LUA_TFUNCTION);
    lua_settop(L, 1);                        // stack: fn
    lua_pushvalue(L, lua_upvalueindex(1));   // stack: fn, begin
    lua_call(L, 0, 0);                       // stack: fn
    if (lua_pcall(L, 0, 0, 0) != LUA_OK) {   // stack: err
        rollback(L);
        return lua_error(L);
    }
    lua_pushvalue(L, lua_upvalueindex(2));   // stack: commit
    if (lua_pcall(L, 0, 0, 0) != LUA_OK) {   // stack: err
        rollback(L);
        return lua_error(L);
    }
    return 0;
}

// Adds `transaction` to lifeline.store, which must already be in the module.
static void lifeline_open_store_transaction(lua_State *L, const LifelineModuleSpec *spec) {
    if (lua_getfield(L, -1, "store") != LUA_TTABLE) {  // stack: lifeline, store
        lua_pop(L, 1);
        return;
    }
    lifeline_pushbridged(L, spec->store_begin);
    lifeline_pushbridged(L, spec->store_commit);
    lua_pushlightuserdata(L, (void *)spec->store_rollback);
    lua_pushcclosure(L, lifeline_store_transaction, 3);  // stack: lifeline, store, transaction
    lua_setfield(L, -2, "transaction");
    lua_pop(L, 1);                                       // stack: lifeline
}

static int lifeline_error_tostring(lua_State *L) {
    lua_getfield(L, 1, "message");
    return 1;
}

void lifeline_push_error(lua_State *L, const char *kind, const char *message, size_t len) {
    lua_createtable(L, 0, 3);
    lua_pushstring(L, kind);
    lua_setfield(L, -2, "kind");
    lua_pushlstring(L, message, len);
    lua_setfield(L, -2, "message");
    if (strcmp(kind, "expired") == 0 || strcmp(kind, "cancelled") == 0) {
        lua_pushboolean(L, 1);
        lua_setfield(L, -2, kind);
    }
    luaL_setmetatable(L, LIFELINE_ERROR);
}

int lifeline_is_interruption(lua_State *L, int idx) {
    idx = lua_absindex(L, idx);
    if (lua_type(L, idx) != LUA_TTABLE || !lua_getmetatable(L, idx)) return 0;  // stack: ..., mt
    luaL_getmetatable(L, LIFELINE_ERROR);                                    // stack: ..., mt, ours
    int ok = 0;
    if (lua_rawequal(L, -1, -2)) {
        lua_pushliteral(L, "kind");
        lua_rawget(L, idx);                                                  // stack: ..., mt, ours, kind
        const char *kind = lua_tostring(L, -1);
        ok = kind != NULL && (strcmp(kind, "expired") == 0 || strcmp(kind, "cancelled") == 0);
        lua_pop(L, 1);
    }
    lua_pop(L, 2);
    return ok;
}

// ---------------------------------------------------------------- the lifeline module

#define LIFELINE_HANDLE "lifeline.handle"

static int lifeline_log_thunk(lua_State *L) {
    lifeline_log_sink sink = (lifeline_log_sink)lua_touserdata(L, lua_upvalueindex(1));
    int level = (int)lua_tointeger(L, lua_upvalueindex(2));
    int n = lua_gettop(L);
    // Every argument becomes a string first, in its own slot: luaL_tolstring pushes, and nothing
    // may be pushed between a luaL_Buffer's operations (its box may sit on top of the stack).
    for (int i = 1; i <= n; i++) {
        luaL_tolstring(L, i, NULL);  // may call __tostring: we are in C, so an error is fine
        lua_replace(L, i);
    }
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 1; i <= n; i++) {
        if (i > 1) luaL_addchar(&b, '\t');
        size_t len;
        const char *s = lua_tolstring(L, i, &len);
        luaL_addlstring(&b, s, len);
    }
    luaL_pushresult(&b);  // stack: args..., line
    size_t len;
    const char *line = lua_tolstring(L, -1, &len);
    if (sink(L, level, line, len) == LIFELINE_NOMEM) return lifeline_raise_nomem(L);
    return 0;
}

static void lifeline_push_log(lua_State *L, lifeline_log_sink sink, int level) {
    lua_pushlightuserdata(L, (void *)sink);
    lua_pushinteger(L, level);
    lua_pushcclosure(L, lifeline_log_thunk, 2);
}

// os.time() with no argument, os.date() with no time, and os.clock() read the host's clock, so
// that a simulation in virtual time sees virtual time (and reports stay byte-identical).
// Upvalue 1: the original function; upvalue 2: the bridged clock.
static int lifeline_os_time(lua_State *L) {
    if (lua_isnoneornil(L, 1)) {
        lua_settop(L, 0);
        lua_pushvalue(L, lua_upvalueindex(2));  // stack: clock
        lua_call(L, 0, 1);                      // stack: seconds
        lua_Number t = lua_tonumber(L, -1);
        lua_pushinteger(L, (lua_Integer)t);
        return 1;
    }
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, 1);
    return 1;
}

static int lifeline_os_date(lua_State *L) {
    if (lua_gettop(L) < 1) lua_pushliteral(L, "%c");
    lua_settop(L, 2);                            // stack: format, time|nil
    if (lua_isnil(L, 2)) {
        lua_pushvalue(L, lua_upvalueindex(2));   // stack: format, nil, clock
        lua_call(L, 0, 1);                       // stack: format, nil, seconds
        lua_pushinteger(L, (lua_Integer)lua_tonumber(L, -1));
        lua_replace(L, 2);
        lua_pop(L, 1);                           // stack: format, time
    }
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);                            // stack: date, format, time
    lua_call(L, 2, 1);
    return 1;
}

static void lifeline_wrap_os(lua_State *L, const char *name, lua_CFunction wrapper, lifeline_bridged clock) {
    lua_getglobal(L, LUA_OSLIBNAME);    // stack: ..., os
    lua_getfield(L, -1, name);          // stack: ..., os, original
    lifeline_pushbridged(L, clock);     // stack: ..., os, original, clock
    lua_pushcclosure(L, wrapper, 2);    // stack: ..., os, wrapped
    lua_setfield(L, -2, name);
    lua_pop(L, 1);                      // stack: ...
}

static int lifeline_open_module_thunk(lua_State *L) {
    const LifelineModuleSpec *spec = (const LifelineModuleSpec *)lua_touserdata(L, 1);
    lua_settop(L, 0);
    lua_newtable(L);  // stack: lifeline
    for (const LifelineReg *r = spec->functions; r->name; r++) {
        lifeline_pushbridged(L, r->fn);
        lua_setfield(L, -2, r->name);
    }
    static const char *const levels[] = {"debug", "info", "warning", "error", NULL};
    lua_newtable(L);  // stack: lifeline, log
    for (int i = 0; levels[i]; i++) {
        lifeline_push_log(L, spec->log_sink, i);
        lua_setfield(L, -2, levels[i]);
    }
    lua_setfield(L, -2, "log");  // stack: lifeline
    // print goes to the host log, tagged with the plugin's name.
    lifeline_push_log(L, spec->log_sink, 1);
    lua_setglobal(L, "print");
    // Handles returned by on() and after(): a userdata with a cancel method.
    luaL_newmetatable(L, LIFELINE_HANDLE);  // stack: lifeline, mt
    lua_newtable(L);                        // stack: lifeline, mt, methods
    lifeline_pushbridged(L, spec->handle_cancel);
    lua_setfield(L, -2, "cancel");
    lua_setfield(L, -2, "__index");         // stack: lifeline, mt
    lua_pushliteral(L, "lifeline.handle");
    lua_setfield(L, -2, "__name");
    // Plugins cannot reach the metatable, so they cannot give handles a __gc (see setmetatable).
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_pop(L, 1);                          // stack: lifeline
    // Task handles: `id` and the methods, through __index.
    luaL_newmetatable(L, LIFELINE_TASK);    // stack: lifeline, mt
    lua_newtable(L);                        // stack: lifeline, mt, methods
    for (const LifelineReg *r = spec->task_methods; r->name; r++) {
        lifeline_pushbridged(L, r->fn);
        lua_setfield(L, -2, r->name);
    }
    lua_pushcclosure(L, lifeline_task_index, 1);
    lua_setfield(L, -2, "__index");
    lua_pushliteral(L, LIFELINE_TASK);
    lua_setfield(L, -2, "__name");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_pop(L, 1);                          // stack: lifeline
    // Error values of waits and requests.
    luaL_newmetatable(L, LIFELINE_ERROR);   // stack: lifeline, mt
    lua_pushcfunction(L, lifeline_error_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pushliteral(L, LIFELINE_ERROR);
    lua_setfield(L, -2, "__name");
    lua_pop(L, 1);                          // stack: lifeline
    for (const LifelineSubtable *t = spec->tables; t->name; t++) {
        lua_newtable(L);                    // stack: lifeline, table
        for (const LifelineReg *r = t->functions; r->name; r++) {
            lifeline_pushbridged(L, r->fn);
            lua_setfield(L, -2, r->name);
        }
        lua_setfield(L, -2, t->name);       // stack: lifeline
    }
    lifeline_open_store_transaction(L, spec);
    lifeline_push_json(L);                  // stack: lifeline, json
    lua_setfield(L, -2, "json");            // stack: lifeline
    lifeline_open_queues(L, spec);
    lifeline_pushbridged(L, spec->config);  // stack: lifeline, config()
    lua_call(L, 0, 1);                      // stack: lifeline, config
    lua_setfield(L, -2, "config");          // stack: lifeline
    lifeline_wrap_os(L, "time", lifeline_os_time, spec->epoch_now);
    lifeline_wrap_os(L, "date", lifeline_os_date, spec->epoch_now);
    lua_getglobal(L, LUA_OSLIBNAME);        // stack: lifeline, os
    lifeline_pushbridged(L, spec->clock_now);
    lua_setfield(L, -2, "clock");
    lua_pop(L, 1);                          // stack: lifeline
    lua_pushvalue(L, -1);
    lua_setglobal(L, "lifeline");
    lifeline_preload(L, "lifeline");        // stack: (empty)
    return 0;
}

int lifeline_open_module(lua_State *L, const LifelineModuleSpec *spec) {
    lua_pushcfunction(L, lifeline_open_module_thunk);
    lua_pushlightuserdata(L, (void *)spec);
    return lifeline_pcall(L, 1, 0);
}

LifelineHandle *lifeline_push_handle(lua_State *L, int kind, lua_Integer id) {
    LifelineHandle *h = (LifelineHandle *)lua_newuserdatauv(L, sizeof(LifelineHandle), 0);  // stack: ..., h
    h->kind = kind;
    h->id = id;
    luaL_setmetatable(L, LIFELINE_HANDLE);
    return h;
}

LifelineHandle *lifeline_to_handle(lua_State *L, int idx) {
    return (LifelineHandle *)luaL_testudata(L, idx, LIFELINE_HANDLE);
}

// ---------------------------------------------------------------- macros

void lifeline_pop(lua_State *L, int n) { lua_pop(L, n); }
const char *lifeline_tostring(lua_State *L, int idx) { return lua_tostring(L, idx); }
int lifeline_isfunction(lua_State *L, int idx) { return lua_isfunction(L, idx); }
int lifeline_isnoneornil(lua_State *L, int idx) { return lua_isnoneornil(L, idx); }
int lifeline_registryindex(void) { return LUA_REGISTRYINDEX; }
lua_Number lifeline_huge(void) { return HUGE_VAL; }
