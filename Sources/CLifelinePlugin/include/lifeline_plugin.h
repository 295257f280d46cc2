/*
 * lifeline_plugin.h: the C ABI of Lifeline's native plugins.
 *
 * A native plugin is a shared library that Lifeline loads with dlopen. It exports two symbols:
 *
 *     LIFELINE_PLUGIN_EXPORT_ABI            (the ABI version it was built for)
 *     int lifeline_plugin_init(const lifeline_api *api, lifeline_plugin *self)
 *
 * and, optionally, `void lifeline_plugin_close(lifeline_plugin *self)`, called when the launch's
 * instance is closed (free what init allocated there).
 *
 * The host reads `lifeline_plugin_abi_version` before it calls anything: a plugin built for a
 * newer ABI than the host's is refused. An older plugin runs: the table only ever grows at its
 * end, and `api->size` says how much of it this host fills (see LIFELINE_API_HAS).
 *
 * The rules (docs/native.md says more):
 *   - Strings are a pointer and a length, both ways: NUL bytes are data. Strings the host hands
 *     out are owned by the host, and valid until the next call on the same thread.
 *   - Every function returns a status: LIFELINE_OK, or an LIFELINE_ERR_* code whose message
 *     api->last_error() returns.
 *   - A function may be called only while the host is running this plugin's code (init or a
 *     callback), on the thread the host called it on, with that launch's handle. A call from
 *     another thread, or after the code returned, returns LIFELINE_ERR_THREAD; one with an ended
 *     launch's handle returns LIFELINE_ERR_NOT_RUNNING. Neither touches anything of the host's.
 *   - Native code is trusted, in-process code: there is no sandbox and no memory cap. A handler
 *     that overruns its watchdog limit is detected, and the app is terminated with a report, but
 *     the host cannot stop it while it runs.
 */
#ifndef LIFELINE_PLUGIN_H
#define LIFELINE_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI this header describes. Raised whenever a function is appended to lifeline_api. */
#define LIFELINE_PLUGIN_API_VERSION 1

#if defined(__GNUC__) || defined(__clang__)
#define LIFELINE_EXPORT __attribute__((visibility("default")))
#else
#define LIFELINE_EXPORT
#endif

/* Put this once in a plugin's sources: it tells the host which ABI the plugin was built for.
   The declaration at the end of this header gives it C linkage and default visibility, so it is
   exported from C++ too, and with -fvisibility=hidden. */
#define LIFELINE_PLUGIN_EXPORT_ABI \
    const uint32_t lifeline_plugin_abi_version = LIFELINE_PLUGIN_API_VERSION

/* The plugin's handle for one launch of the app. Opaque: never dereference it. */
typedef struct lifeline_plugin lifeline_plugin;

/* What every function returns. */
enum {
    LIFELINE_OK = 0,
    /* Not called from inside the host's call into this plugin, on that thread: from a thread of
       the plugin's own, or after its code returned. Nothing was done. */
    LIFELINE_ERR_THREAD = 1,
    /* The app is not running this plugin now: its launch ended (an ended launch's handle), or a
       reload unloads it and no new work may start. */
    LIFELINE_ERR_NOT_RUNNING = 2,
    /* An argument is wrong: a NULL handle, NULL with a length, a length past any buffer (a
       (size_t)-1), not UTF-8 where text is needed, an unknown name. A pointer with a length
       longer than its memory cannot be seen, and is the plugin's bug. */
    LIFELINE_ERR_ARGUMENT = 3,
    /* No such key, file, task or request. (Cancelling a timer or a subscription that is gone is
       not an error: it returns LIFELINE_OK, as in Lua.) */
    LIFELINE_ERR_NOT_FOUND = 4,
    /* The host refused: a rule of the lifecycle, a permission, a quota. */
    LIFELINE_ERR_REFUSED = 5,
    /* The store or the files folder failed. */
    LIFELINE_ERR_IO = 6
};

/* Log levels for api->log. */
enum {
    LIFELINE_LOG_DEBUG = 0,
    LIFELINE_LOG_INFO = 1,
    LIFELINE_LOG_WARNING = 2,
    LIFELINE_LOG_ERROR = 3
};

/* The results of a background fetch or a silent push, for api->complete_fetch. */
enum {
    LIFELINE_FETCH_NEW_DATA = 0,
    LIFELINE_FETCH_NO_DATA = 1,
    LIFELINE_FETCH_FAILED = 2
};

/* Scheduled task kinds (BGAppRefreshTaskRequest, BGProcessingTaskRequest), and request flags. */
enum {
    LIFELINE_TASK_REFRESH = 0,
    LIFELINE_TASK_PROCESSING = 1
};
enum {
    LIFELINE_REQUIRES_NETWORK = 1u << 0,
    LIFELINE_REQUIRES_POWER = 1u << 1
};

/* A lifecycle event, as a subscriber gets it. Valid only during the callback. */
typedef struct lifeline_event {
    const char *name;        /* "didEnterBackground", ... */
    size_t name_len;
    double time;             /* seconds on the host's clock */
    const char *state;       /* the app's state: "active", "background", ... */
    size_t state_len;
    uint64_t completion;     /* performFetch, didReceiveRemoteNotification: pass to complete_fetch; else 0 */
    const char *payload;     /* a push's JSON payload; NULL when there is none */
    size_t payload_len;
} lifeline_event;

/* A scheduled task, as its handler gets it. Valid only during the callback; keep the id. */
typedef struct lifeline_task {
    uint64_t id;             /* for set_task_completed and set_task_expiration */
    const char *identifier;
    size_t identifier_len;
    int kind;                /* LIFELINE_TASK_REFRESH or LIFELINE_TASK_PROCESSING */
} lifeline_task;

/* Callbacks return LIFELINE_OK, or anything else for an error: the host records a pluginError
   with the message given to api->fail (or the status's number). */
typedef int (*lifeline_event_fn)(lifeline_plugin *self, const lifeline_event *event, void *user);
typedef int (*lifeline_callback_fn)(lifeline_plugin *self, void *user);
typedef int (*lifeline_task_fn)(lifeline_plugin *self, const lifeline_task *task, void *user);

/* The host's functions. Appended to, never reordered: check api->size (LIFELINE_API_HAS) before
   using a function newer than the oldest host you support. */
typedef struct lifeline_api {
    uint32_t version;        /* the host's LIFELINE_PLUGIN_API_VERSION */
    uint32_t size;           /* sizeof(lifeline_api) in the host */

    /* --- version 1 --- */

    /* The message of the last call on this thread that did not return LIFELINE_OK. */
    const char *(*last_error)(lifeline_plugin *self, size_t *len);
    /* The message recorded when the callback running now returns an error. */
    int (*fail)(lifeline_plugin *self, const char *message, size_t len);

    /* Events: "didFinishLaunching", "didBecomeActive", "willResignActive", "didEnterBackground",
       "willEnterForeground", "willTerminate", "didReceiveMemoryWarning", "performFetch",
       "didReceiveRemoteNotification", "willUnload", and the transfer events. */
    int (*subscribe)(lifeline_plugin *self, const char *event, size_t event_len, lifeline_event_fn handler,
                     void *user, uint64_t *subscription);
    int (*unsubscribe)(lifeline_plugin *self, uint64_t subscription);

    /* Background tasks (beginBackgroundTask / endBackgroundTask). `expired` may be NULL. Ending a
       task that is unknown or ended returns LIFELINE_ERR_NOT_FOUND. */
    int (*begin_task)(lifeline_plugin *self, const char *name, size_t name_len, lifeline_callback_fn expired,
                      void *user, uint64_t *task);
    int (*end_task)(lifeline_plugin *self, uint64_t task);
    /* Seconds of background time left; a very large number in the foreground. */
    int (*time_remaining)(lifeline_plugin *self, double *seconds);
    /* The app's state: "inactive", "active" or "background". */
    int (*app_state)(lifeline_plugin *self, const char **state, size_t *len);
    /* Seconds since the host started, on its clock (virtual in simulate). */
    int (*now)(lifeline_plugin *self, double *seconds);

    /* One-shot timers. cancel_timer of a timer that fired or was cancelled does nothing. */
    int (*after)(lifeline_plugin *self, double seconds, lifeline_callback_fn callback, void *user, uint64_t *timer);
    int (*cancel_timer)(lifeline_plugin *self, uint64_t timer);

    /* A line of the plugin's log (and a `log` event of the report). */
    int (*log)(lifeline_plugin *self, int level, const char *message, size_t len);

    /* The durable store (SQLite, in the state dir). Keys and values are UTF-8 text of any bytes,
       NUL included; a value is kept as a JSON string, as a Lua plugin's string is. store_get of
       a missing key, and store_delete of one, return LIFELINE_ERR_NOT_FOUND. */
    int (*store_get)(lifeline_plugin *self, const char *key, size_t key_len, const char **value, size_t *value_len);
    int (*store_set)(lifeline_plugin *self, const char *key, size_t key_len, const char *value, size_t value_len);
    int (*store_delete)(lifeline_plugin *self, const char *key, size_t key_len);

    /* Files in the plugin's folder, <state-dir>/files/<plugin>/: plain names, bytes of any kind.
       file_list hands out every name, each followed by a NUL, in one buffer. */
    int (*file_read)(lifeline_plugin *self, const char *name, size_t name_len, const char **data, size_t *len);
    int (*file_write)(lifeline_plugin *self, const char *name, size_t name_len, const char *data, size_t len);
    int (*file_remove)(lifeline_plugin *self, const char *name, size_t name_len);
    int (*file_list)(lifeline_plugin *self, const char **names, size_t *len);

    /* Scheduled tasks (BGTaskScheduler). register_task: only in init, for an identifier that
       plugin.toml's [background] identifiers permits. The handler must call set_task_completed
       before the task's time runs out; set_task_expiration gives it a handler called shortly
       before. */
    int (*register_task)(lifeline_plugin *self, const char *identifier, size_t identifier_len,
                         lifeline_task_fn handler, void *user);
    int (*submit_task)(lifeline_plugin *self, const char *identifier, size_t identifier_len, int kind,
                       double earliest_begin, uint32_t flags);
    int (*cancel_task)(lifeline_plugin *self, const char *identifier, size_t identifier_len);
    int (*set_task_expiration)(lifeline_plugin *self, uint64_t task, lifeline_callback_fn expired, void *user);
    int (*set_task_completed)(lifeline_plugin *self, uint64_t task, int success);

    /* The completion of a performFetch or didReceiveRemoteNotification event (event->completion).
       LIFELINE_ERR_NOT_FOUND when it was called already or its time ran out. */
    int (*complete_fetch)(lifeline_plugin *self, uint64_t completion, int result);
} lifeline_api;

/* Whether the host's table has `member`: for a function appended after the ABI you require. */
#define LIFELINE_API_HAS(api, member) \
    ((api)->size >= offsetof(lifeline_api, member) + sizeof((api)->member))

/* What a plugin exports. Declared here, inside extern "C", so that a plugin's definitions have
   C linkage and default visibility even in C++ (where a const at namespace scope is otherwise
   internal) and under -fvisibility=hidden. lifeline_plugin_close is optional. */
LIFELINE_EXPORT extern const uint32_t lifeline_plugin_abi_version;
LIFELINE_EXPORT int lifeline_plugin_init(const lifeline_api *api, lifeline_plugin *self);
LIFELINE_EXPORT void lifeline_plugin_close(lifeline_plugin *self);

#ifdef __cplusplus
}
#endif

#endif
