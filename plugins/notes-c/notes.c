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
#include <string.h>

LIFELINE_PLUGIN_EXPORT_ABI;

static const lifeline_api *api;

/* Strings as pointer and length: S("text") gives both. */
#define S(text) text, sizeof(text) - 1

/* Each launch gets a fresh handle; what one launch began is kept here for its callbacks. */
static uint64_t save_task, upload_task, upload_timer;

static void log_line(lifeline_plugin *self, int level, const char *text) {
    api->log(self, level, text, strlen(text));
}

static int save_done(lifeline_plugin *self, void *user) {
    (void)user;
    log_line(self, LIFELINE_LOG_INFO, "note saved");
    api->end_task(self, save_task);
    return LIFELINE_OK;
}

static int save_expired(lifeline_plugin *self, void *user) {
    (void)user;
    api->end_task(self, save_task);
    return LIFELINE_OK;
}

static int upload_done(lifeline_plugin *self, void *user) {
    (void)user;
    api->store_set(self, S("upload"), S("done"));
    api->end_task(self, upload_task);
    return LIFELINE_OK;
}

/* The system's time ran out before the upload finished: stop, remember, end the task. */
static int upload_expired(lifeline_plugin *self, void *user) {
    (void)user;
    api->cancel_timer(self, upload_timer);
    api->store_set(self, S("upload"), S("postponed"));
    log_line(self, LIFELINE_LOG_WARNING, "upload out of time, postponed");
    api->end_task(self, upload_task);
    return LIFELINE_OK;
}

static int on_background(lifeline_plugin *self, const lifeline_event *event, void *user) {
    (void)event, (void)user;
    /* The open note, NUL bytes and all, goes to a file; the store keeps a pointer to it. */
    static const char note[] = "shopping\0milk\0eggs";
    if (api->begin_task(self, S("save-note"), save_expired, NULL, &save_task) == LIFELINE_OK) {
        if (api->file_write(self, S("note.txt"), note, sizeof note - 1) != LIFELINE_OK) {
            size_t len;
            const char *why = api->last_error(self, &len);
            api->log(self, LIFELINE_LOG_ERROR, why, len);
        }
        api->store_set(self, S("note"), S("note.txt"));
        api->after(self, 2, save_done, NULL, NULL);
    }
    /* The upload takes a minute: longer than the background time the system gives. */
    if (api->begin_task(self, S("upload-notes"), upload_expired, NULL, &upload_task) == LIFELINE_OK)
        api->after(self, 60, upload_done, NULL, &upload_timer);
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
