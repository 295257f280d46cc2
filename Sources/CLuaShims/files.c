// The filesystem rule for what a plugin loads: init.lua, the modules it requires and its
// plugin.toml must lie inside the plugin's own folder once every link is resolved.
//
// The check is made on the open file, not on its name: the kernel says what path the opened
// descriptor has (/proc/self/fd/N), so a link swapped in between the check and the read cannot
// lead elsewhere. The chunk is then read from that same descriptor.

#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// Whether `path` lies below the folder `root` (both real, absolute paths).
static int lifeline_path_inside(const char *root, const char *path) {
    size_t n = strlen(root);
    if (n == 1 && root[0] == '/') return path[0] == '/';
    return strncmp(path, root, n) == 0 && path[n] == '/';
}

int lifeline_open_inside(const char *root, const char *path) {
    // O_NONBLOCK: a FIFO in the plugin's folder must not hang the host in open(); it is refused
    // below as not a plain file. Reads of a plain file ignore the flag.
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        errno = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
        return -1;
    }
    char real[PATH_MAX];
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(proc, real, sizeof real - 1);
    if (n > 0 && (size_t)n < sizeof real - 1) {
        real[n] = '\0';
    } else {
        // No /proc: resolve the name, and make sure it names the file that is open.
        struct stat named;
        if (realpath(path, real) == NULL || stat(real, &named) != 0 || named.st_dev != st.st_dev ||
            named.st_ino != st.st_ino) {
            close(fd);
            errno = EXDEV;
            return -1;
        }
    }
    if (!lifeline_path_inside(root, real)) {
        close(fd);
        errno = EXDEV;
        return -1;
    }
    return fd;
}

// lua_load's reader over a descriptor. The first block has had its BOM and '#' line taken off.
typedef struct LifelineChunkFile {
    int fd;
    int failed;         // errno of a failed read, or 0
    const char *first;  // what is left of the first block
    size_t first_size;
    char buffer[4096];
} LifelineChunkFile;

static ssize_t lifeline_read_block(LifelineChunkFile *f) {
    ssize_t n;
    do n = read(f->fd, f->buffer, sizeof f->buffer);
    while (n < 0 && errno == EINTR);
    if (n < 0) f->failed = errno;
    return n;
}

static const char *lifeline_chunk_reader(lua_State *L, void *ud, size_t *size) {
    (void)L;
    LifelineChunkFile *f = (LifelineChunkFile *)ud;
    if (f->first_size > 0) {
        *size = f->first_size;
        f->first_size = 0;
        return f->first;
    }
    ssize_t n = lifeline_read_block(f);
    if (n <= 0) {
        *size = 0;
        return NULL;
    }
    *size = (size_t)n;
    return f->buffer;
}

// Reads the first block, skipping a UTF-8 BOM and a first line that starts with '#' (as
// luaL_loadfile does; the line's newline stays, so line numbers do not move).
static void lifeline_skip_prefix(LifelineChunkFile *f) {
    ssize_t n = lifeline_read_block(f);
    if (n <= 0) return;
    const char *p = f->buffer, *end = f->buffer + n;
    if (end - p >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0) p += 3;
    if (p < end && *p == '#') {
        for (;;) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            if (nl != NULL) {
                p = nl;
                break;
            }
            n = lifeline_read_block(f);
            if (n <= 0) return;
            p = f->buffer;
            end = f->buffer + n;
        }
    }
    f->first = p;
    f->first_size = (size_t)(end - p);
}

int lifeline_load_inside(lua_State *L, const char *root, const char *path, int *why) {
    *why = LIFELINE_FILE_ERROR;
    if (root == NULL) {
        lua_pushfstring(L, "cannot open %s: the plugin's folder cannot be resolved", path);
        return LUA_ERRFILE;
    }
    lua_pushfstring(L, "@%s", path);  // stack: ..., chunkname (pushed before the open: it may raise)
    LifelineChunkFile f;
    f.fd = lifeline_open_inside(root, path);
    if (f.fd < 0) {
        int e = errno;
        lua_pop(L, 1);  // stack: ...
        if (e == EXDEV) {
            *why = LIFELINE_FILE_OUTSIDE;
            lua_pushfstring(L, "%s leads outside the plugin's folder (through a link); a plugin loads only files "
                               "inside its own folder", path);
        } else {
            if (e == ENOENT || e == ENOTDIR) *why = LIFELINE_FILE_MISSING;
            lua_pushfstring(L, "cannot open %s: %s", path, e == EINVAL ? "not a plain file" : strerror(e));
        }
        return LUA_ERRFILE;
    }
    f.failed = 0;
    f.first = NULL;
    f.first_size = 0;
    lifeline_skip_prefix(&f);
    // lua_load never raises: a memory error comes back as its status, so the descriptor is closed.
    int status = LUA_ERRFILE;
    if (!f.failed) status = lua_load(L, lifeline_chunk_reader, &f, lua_tostring(L, -1), "t");
    close(f.fd);                           // stack: ..., chunkname[, chunk | message]
    if (f.failed) {
        lua_settop(L, lua_gettop(L) - (status == LUA_ERRFILE ? 1 : 2));  // stack: ...
        lua_pushfstring(L, "cannot read %s: %s", path, strerror(f.failed));
        return LUA_ERRFILE;
    }
    lua_remove(L, -2);                     // stack: ..., chunk | message
    if (status == LUA_OK) *why = LIFELINE_FILE_OK;
    return status;
}
