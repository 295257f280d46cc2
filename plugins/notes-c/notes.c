/*
 * notes: a native plugin in C. When the user leaves the app it saves the open note at once in
 * a short background task, and starts uploading the notes in a long one that the system's time
 * cuts short: its expiration handler ends it and leaves the upload for next time. Both tasks end
 * on every path. The store counts the launches and keeps the upload's state across them.
 *
 * Build:  cc -shared -fPIC -I"$(lifeline --include-dir)" notes.c -o notes.so
 */
#include <lifeline_plugin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

LIFELINE_PLUGIN_EXPORT_ABI;

static const lifeline_api *api;

/* Strings as pointer and length: S("text") gives both. */
#define S(text) text, sizeof(text) - 1

static void log_line(lifeline_plugin *self, int level, const char *text) {
    api->log(self, level, text, strlen(text));
}

/* One piece of work: its task and its timer. The user leaves, returns and leaves again at
   once, so two of each kind may run together: each callback gets its own job, never a static. */
typedef struct job {
    uint64_t task, timer;
} job;

static job *start(lifeline_plugin *self, const char *name, size_t len, double seconds,
                  lifeline_callback_fn done, lifeline_callback_fn expired) {
    job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    if (api->begin_task(self, name, len, expired, j, &j->task) != LIFELINE_OK) {
        free(j);  /* the app is not running it: nothing to end */
        return NULL;
    }
    api->after(self, seconds, done, j, &j->timer);
    return j;
}

/* Every path ends the job's task: its timer firing, or the system's time running out first. */
static int finish(lifeline_plugin *self, job *j) {
    api->cancel_timer(self, j->timer);
    int status = api->end_task(self, j->task);
    free(j);
    return status;
}

static int save_done(lifeline_plugin *self, void *user) {
    log_line(self, LIFELINE_LOG_INFO, "note saved");
    return finish(self, user);
}

static int upload_done(lifeline_plugin *self, void *user) {
    api->store_set(self, S("upload"), S("done"));
    return finish(self, user);
}

/* The system's time ran out before the timer fired: stop, remember, end the task. */
static int upload_expired(lifeline_plugin *self, void *user) {
    api->store_set(self, S("upload"), S("postponed"));
    log_line(self, LIFELINE_LOG_WARNING, "upload out of time, postponed");
    return finish(self, user);
}

static int save_expired(lifeline_plugin *self, void *user) {
    log_line(self, LIFELINE_LOG_ERROR, "note not saved: out of time");
    return finish(self, user);
}

static int on_background(lifeline_plugin *self, const lifeline_event *event, void *user) {
    (void)event, (void)user;
    /* The open note, NUL bytes and all, goes to a file; the store keeps its name. */
    static const char note[] = "shopping\0milk\0eggs";
    if (api->file_write(self, S("note.txt"), note, sizeof note - 1) != LIFELINE_OK) {
        size_t len;
        const char *why = api->last_error(self, &len);
        api->log(self, LIFELINE_LOG_ERROR, why, len);
    }
    api->store_set(self, S("note"), S("note.txt"));
    start(self, S("save-note"), 2, save_done, save_expired);
    /* The upload takes a minute: longer than the background time the system gives. */
    start(self, S("upload-notes"), 60, upload_done, upload_expired);
    return LIFELINE_OK;
}

static int on_launch(lifeline_plugin *self, const lifeline_event *event, void *user) {
    (void)event, (void)user;
    const char *value;
    size_t len;
    int launches = 0;
    if (api->store_get(self, S("launches"), &value, &len) == LIFELINE_OK) sscanf(value, "%d", &launches);
    char text[32];
    int n = snprintf(text, sizeof text, "%d", launches + 1);
    api->store_set(self, S("launches"), text, (size_t)n);
    char line[64];
    snprintf(line, sizeof line, "launch %d", launches + 1);
    log_line(self, LIFELINE_LOG_INFO, line);
    return LIFELINE_OK;
}

int lifeline_plugin_init(const lifeline_api *host, lifeline_plugin *self) {
    api = host;
    int status = api->subscribe(self, S("didFinishLaunching"), on_launch, NULL, NULL);
    if (status == LIFELINE_OK) status = api->subscribe(self, S("didEnterBackground"), on_background, NULL, NULL);
    return status;
}
