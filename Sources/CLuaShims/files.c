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

// ---------------------------------------------------------------- lifeline.files.read
//
// Lua's API copies every string it is given: lua_pushlstring allocates the string, then copies
// the bytes in. A file read into a buffer and then pushed would be held twice, and a 30 MB read
// would grow the host by 60 MB under a 32 MiB cap. So the file is read into a block laid out as
// the string will be (the bytes at the offset where Lua keeps a string's bytes), and the
// allocator hands that very block to lua_pushlstring's allocation: its copy is then of each byte
// onto itself (a memcpy whose source is its destination, which AddressSanitizer accepts as it
// does for printf's own), and the file is held once.

/// Where a long string's bytes lie in its block: learnt once, from a string pushed while the
/// allocator records its block. -1: not learnt yet; -2: it could not be (files are then read into
/// a buffer and copied, held twice for a moment).
static _Atomic long lifeline_string_offset = -1;

/// Strings this long or shorter are short strings, interned (LUAI_MAXSHORTLEN is 40): Lua may
/// find one already made, so they are copied, as anything this small may be.
#define LIFELINE_SHORT_STRING 40

static long lifeline_learn_string_offset(lua_State *L) {
    long known = atomic_load(&lifeline_string_offset);
    if (known != -1) return known;
    LifelineControl *c = lifeline_control_of(L);
    char probe[LIFELINE_SHORT_STRING + 24];
    memset(probe, 'p', sizeof probe);
    c->probed = NULL;
    c->probing = 1;
    lua_pushlstring(L, probe, sizeof probe);  // stack: ..., probe
    c->probing = 0;
    const char *bytes = lua_tostring(L, -1);
    long offset = -2;
    if (c->probed != NULL && bytes > (const char *)c->probed) {
        long at = (long)(bytes - (const char *)c->probed);
        // The block holds the header, the bytes and a terminating NUL, and nothing else.
        if (at < 256 && c->probed_size == (size_t)at + sizeof probe + 1) offset = at;
    }
    lua_pop(L, 1);  // stack: ...
    atomic_store(&lifeline_string_offset, offset);
    return offset;
}

/// read(2) until `count` bytes or the end of the file; the bytes read, or -1 with errno.
static ssize_t lifeline_read_full(int fd, char *into, size_t count) {
    size_t done = 0;
    while (done < count) {
        ssize_t n = read(fd, into + done, count - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -1;
        if (n == 0) break;
        done += (size_t)n;
    }
    return (ssize_t)done;
}

int lifeline_push_file(lua_State *L, int fd, size_t size, size_t *seen) {
    *seen = 0;
    long learnt = size > LIFELINE_SHORT_STRING ? lifeline_learn_string_offset(L) : -2;
    size_t offset = learnt > 0 ? (size_t)learnt : 0;
    if (size > (size_t)-1 - offset - 2) return LIFELINE_FILE_READ_NOMEM;
    char *block = malloc(offset + size + 1);
    if (block == NULL) return LIFELINE_FILE_READ_NOMEM;
    ssize_t n = lifeline_read_full(fd, block + offset, size);
    // One byte more means the file grew since its size was taken: the caller sizes it again.
    char more;
    ssize_t extra = n < 0 ? -1 : lifeline_read_full(fd, &more, 1);
    if (n < 0 || extra != 0) {
        int e = errno;
        free(block);
        errno = e;
        if (extra > 0) {
            *seen = size + 1;
            return LIFELINE_FILE_READ_GREW;
        }
        return LIFELINE_FILE_READ_FAILED;
    }
    size_t length = (size_t)n;
    *seen = length;
    if (length < size) {
        // The file shrank meanwhile: the block is made to fit, as the allocator will be asked.
        char *smaller = realloc(block, offset + length + 1);
        if (smaller != NULL) block = smaller;
    }
    LifelineControl *c = lifeline_control_of(L);
    int armed = learnt > 0 && length > LIFELINE_SHORT_STRING;
    if (armed) {
        c->handoff = block;
        c->handoff_size = offset + length + 1;
    }
    lua_pushlstring(L, block + offset, length);  // stack: ..., data
    int taken = armed && c->handoff == NULL;
    c->handoff = NULL;
    // Taken, the block is the string's now; otherwise Lua copied the bytes.
    if (!taken) free(block);
    return LIFELINE_FILE_READ_OK;
}
