/* libnss_xign: the accounts of an xign manager as users and groups of this host (docs/design.md, "Users on every
 * machine"). It is loaded into every process that looks up a user, so it is small C with no runtime of its own.
 *
 * It answers from the cache xignd writes (passwd, group and memberships in XIGN_NSS_DIR, /etc's formats, parsed by
 * glibc). A name or number the cache lacks is asked of xignd on its socket there, within a second; xignd fetches
 * the directory and the cache is read again. A daemon that is not running refuses the connection at once; one that
 * does not answer in time is not asked again for half a minute in this process.
 *
 * Local files win: an entry whose name or number /etc/passwd or /etc/group has is never returned. The module reads
 * those files itself and never calls getpwnam and friends, which would come back here. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <nss.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "xign_nss_wire.h"

#ifndef XIGN_NSS_DIR
#define XIGN_NSS_DIR "/var/lib/xign-nss"
#endif
#define CACHE_PASSWD XIGN_NSS_DIR "/passwd"
#define CACHE_GROUP XIGN_NSS_DIR "/group"
#define CACHE_MEMBERSHIPS XIGN_NSS_DIR "/memberships"
#define CACHE_VALID_UNTIL XIGN_NSS_DIR "/valid-until"
#define DAEMON_SOCKET XIGN_NSS_DIR "/socket"
#define LOCAL_PASSWD "/etc/passwd"
#define LOCAL_GROUP "/etc/group"

#define ANSWER_MILLISECONDS 1000
#define QUIET_SECONDS 30

/* ---- Files ---- */

/* Opens a file of the cache only when root owns it and nobody else may write it (docs/design.md, invariant 7). */
static int open_trusted(const char *path, struct stat *status) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return -1;
    if (fstat(fd, status) != 0 || !S_ISREG(status->st_mode) || status->st_uid != 0 || (status->st_mode & 022) != 0) {
        close(fd);
        errno = EPERM;
        return -1;
    }
    return fd;
}

/* Whether the cache still serves: xignd writes, at each refresh, until when (seconds since 1970) it may, which is
 * `[directory] keep` in xign.conf after it last heard from the manager (docs/security.md, H5). A cache without the
 * file, as an xignd before it wrote them, serves; one that cannot be read or believed does not. */
static int cache_in_date(void) {
    struct stat status;
    int fd = open_trusted(CACHE_VALID_UNTIL, &status);
    if (fd < 0) return errno == ENOENT;
    char text[32] = {0};
    ssize_t count = read(fd, text, sizeof(text) - 1);
    close(fd);
    if (count <= 0) return 0;
    char *end = NULL;
    errno = 0;
    long long until = strtoll(text, &end, 10);
    if (errno != 0 || end == text || (*end != '\n' && *end != '\0')) return 0;
    return (long long)time(NULL) < until;
}

/* A cache file, when the cache is in date. */
static int open_cache_fd(const char *path, struct stat *status) {
    if (!cache_in_date()) return -1;
    return open_trusted(path, status);
}

static FILE *open_cache(const char *path) {
    struct stat status;
    int fd = open_cache_fd(path, &status);
    if (fd < 0) return NULL;
    FILE *file = fdopen(fd, "re");
    if (file == NULL) close(fd);
    return file;
}

#define CACHE_LIMIT (64L << 20)

/* The cache file's text, read whole (NUL-terminated); NULL when it cannot be believed or read. */
static char *read_cache(const char *path, size_t *size) {
    struct stat status;
    int fd = open_cache_fd(path, &status);
    if (fd < 0) return NULL;
    char *text = NULL;
    if (status.st_size >= 0 && status.st_size <= CACHE_LIMIT) text = malloc((size_t)status.st_size + 1);
    size_t total = 0;
    while (text != NULL && total < (size_t)status.st_size) {
        ssize_t count = read(fd, text + total, (size_t)status.st_size - total);
        if (count < 0 && errno == EINTR) continue;
        if (count <= 0) break;
        total += (size_t)count;
    }
    close(fd);
    if (text != NULL) text[total] = '\0';
    *size = total;
    return text;
}

/* The line of `text` that names `name`, or (without a name) has `id` in its third field; NULL when none does. Only
 * that line is then parsed, so a lookup costs a scan for a newline and a colon per line, not a parse per line. */
static const char *matching_line(const char *text, size_t size, const char *name, uint32_t id, size_t *length) {
    const char *end = text + size;
    const char *line = text;
    if (name != NULL) {
        /* A name's line starts with "NAME:": memmem finds the candidates, a line's start confirms one. */
        char key[XIGN_NSS_MAX_NAME + 2];
        size_t keyLength = strnlen(name, XIGN_NSS_MAX_NAME + 1);
        if (keyLength > XIGN_NSS_MAX_NAME) return NULL;
        memcpy(key, name, keyLength);
        key[keyLength++] = ':';
        for (const char *hit = text; hit < end; hit++) {
            hit = memmem(hit, (size_t)(end - hit), key, keyLength);
            if (hit == NULL) return NULL;
            if (hit == text || hit[-1] == '\n') {
                line = hit;
                break;
            }
        }
    }
    for (; line < end;) {
        const char *newline = memchr(line, '\n', (size_t)(end - line));
        size_t span = (size_t)((newline != NULL ? newline : end) - line);
        if (xign_nss_line_matches(line, span, name, id, name == NULL)) {
            *length = span;
            return line;
        }
        line += span + 1;
    }
    return NULL;
}

/* Whether a local file has an entry named `name` or numbered `id`. A file that cannot be read counts as holding
 * it: the module then serves nothing rather than what might collide. */
static int local_has(const char *path, const char *name, uint32_t id, int match_id) {
    FILE *file = fopen(path, "re");
    if (file == NULL) return errno != ENOENT;
    char *line = NULL;
    size_t capacity = 0;
    ssize_t length;
    int found = 0;
    while (!found && (length = getline(&line, &capacity, file)) >= 0) {
        found = xign_nss_line_matches(line, (size_t)length, name, id, match_id);
    }
    free(line);
    fclose(file);
    return found;
}

static int collides(const char *name, uint32_t id) {
    return local_has(LOCAL_PASSWD, name, id, 1) || local_has(LOCAL_GROUP, name, id, 1);
}

/* ---- xignd ---- */

static _Atomic long quiet_until;

static long now_milliseconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec * 1000L + now.tv_nsec / 1000000L;
}

/* Asks xignd to bring a missing name or number into the cache; 1 when it is there now. */
static int ask_daemon(const uint8_t *query, size_t length) {
    long start = now_milliseconds();
    if (start < atomic_load(&quiet_until)) return 0;
    int saved = errno;
    int found = 0;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) goto done;
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    memcpy(address.sun_path, DAEMON_SOCKET, sizeof(DAEMON_SOCKET));
    if (connect(fd, (struct sockaddr *)&address, sizeof(address)) != 0) goto done;
    if (send(fd, query, length, MSG_NOSIGNAL) != (ssize_t)length) goto done;
    /* Exactly one answer's bytes: a daemon that keeps the connection open costs no wait. */
    uint8_t answer[XIGN_NSS_HEADER];
    size_t received = 0;
    while (received < sizeof(answer)) {
        long left = start + ANSWER_MILLISECONDS - now_milliseconds();
        if (left <= 0) {
            atomic_store(&quiet_until, now_milliseconds() + QUIET_SECONDS * 1000L);
            goto done;
        }
        struct pollfd entry = {.fd = fd, .events = POLLIN};
        int ready = poll(&entry, 1, (int)left);
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) continue;
        ssize_t count = recv(fd, answer + received, sizeof(answer) - received, MSG_DONTWAIT);
        if (count < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (count <= 0) break;
        received += (size_t)count;
    }
    found = xign_nss_parse_answer(answer, received) == XIGN_NSS_FOUND;
done:
    if (fd >= 0) close(fd);
    errno = saved;
    return found;
}

static int ask_name(const char *name) {
    if (!xign_nss_valid_name(name)) return 0;
    uint8_t query[XIGN_NSS_QUERY_MAX];
    return ask_daemon(query, xign_nss_name_query(name, query));
}

static int ask_id(uint32_t id) {
    if (id < XIGN_NSS_MIN_ID || id > XIGN_NSS_MAX_ID) return 0;
    uint8_t query[XIGN_NSS_QUERY_MAX];
    return ask_daemon(query, xign_nss_id_query(id, query));
}

/* ---- passwd ---- */

/* The cache's entry with `name` (or, without a name, number `uid`) that no local entry collides with. */
static enum nss_status find_user(
    const char *name, uid_t uid, struct passwd *result, char *buffer, size_t length, int *errnop) {
    size_t size, span;
    char *text = read_cache(CACHE_PASSWD, &size);
    const char *line = text != NULL ? matching_line(text, size, name, uid, &span) : NULL;
    FILE *file = line != NULL ? fmemopen((void *)line, span, "r") : NULL;
    enum nss_status status = NSS_STATUS_NOTFOUND;
    struct passwd *entry;
    int error = ENOENT;
    if (file != NULL && (error = fgetpwent_r(file, result, buffer, length, &entry)) == 0 &&
        (name != NULL ? strcmp(entry->pw_name, name) == 0 : entry->pw_uid == uid) &&
        !collides(entry->pw_name, entry->pw_uid)) {
        status = NSS_STATUS_SUCCESS;
    }
    if (file != NULL) fclose(file);
    free(text);
    if (error == ERANGE) {
        *errnop = ERANGE;
        return NSS_STATUS_TRYAGAIN;
    }
    if (status != NSS_STATUS_SUCCESS) *errnop = ENOENT;
    return status;
}

enum nss_status _nss_xign_getpwnam_r(const char *name, struct passwd *result, char *buffer, size_t length,
                                     int *errnop) {
    enum nss_status status = find_user(name, 0, result, buffer, length, errnop);
    if (status == NSS_STATUS_NOTFOUND && !local_has(LOCAL_PASSWD, name, 0, 0) && ask_name(name)) {
        status = find_user(name, 0, result, buffer, length, errnop);
    }
    return status;
}

enum nss_status _nss_xign_getpwuid_r(uid_t uid, struct passwd *result, char *buffer, size_t length, int *errnop) {
    enum nss_status status = find_user(NULL, uid, result, buffer, length, errnop);
    if (status == NSS_STATUS_NOTFOUND && ask_id(uid)) status = find_user(NULL, uid, result, buffer, length, errnop);
    return status;
}

/* ---- group: a private group by its number only ---- */

/* A private group is served by its number, never by its name (docs/security.md, H5): found by name, an account named
 * like a group a package is about to make would stand in for it (docker.io's postinst runs `getent group docker ||
 * addgroup docker`), and the account's holder would get what that group guards. `ls -l` and `id` ask by number. */
static enum nss_status find_group(gid_t gid, struct group *result, char *buffer, size_t length, int *errnop) {
    size_t size, span;
    char *text = read_cache(CACHE_GROUP, &size);
    const char *line = text != NULL ? matching_line(text, size, NULL, gid, &span) : NULL;
    FILE *file = line != NULL ? fmemopen((void *)line, span, "r") : NULL;
    enum nss_status status = NSS_STATUS_NOTFOUND;
    struct group *entry;
    int error = ENOENT;
    if (file != NULL && (error = fgetgrent_r(file, result, buffer, length, &entry)) == 0 && entry->gr_gid == gid &&
        !collides(entry->gr_name, entry->gr_gid)) {
        status = NSS_STATUS_SUCCESS;
    }
    if (file != NULL) fclose(file);
    free(text);
    if (error == ERANGE) {
        *errnop = ERANGE;
        return NSS_STATUS_TRYAGAIN;
    }
    if (status != NSS_STATUS_SUCCESS) *errnop = ENOENT;
    return status;
}

enum nss_status _nss_xign_getgrnam_r(const char *name, struct group *result, char *buffer, size_t length,
                                     int *errnop) {
    (void)name, (void)result, (void)buffer, (void)length;
    *errnop = ENOENT;
    return NSS_STATUS_NOTFOUND;
}

enum nss_status _nss_xign_getgrgid_r(gid_t gid, struct group *result, char *buffer, size_t length, int *errnop) {
    enum nss_status status = find_group(gid, result, buffer, length, errnop);
    if (status == NSS_STATUS_NOTFOUND && ask_id(gid)) status = find_group(gid, result, buffer, length, errnop);
    return status;
}

/* ---- Enumeration (getent passwd, lists of users): from the cache only ---- */

static pthread_mutex_t enumeration = PTHREAD_MUTEX_INITIALIZER;
static FILE *users;

static enum nss_status start(FILE **file, const char *path) {
    pthread_mutex_lock(&enumeration);
    if (*file != NULL) fclose(*file);
    *file = open_cache(path);
    pthread_mutex_unlock(&enumeration);
    return NSS_STATUS_SUCCESS;
}

static enum nss_status end(FILE **file) {
    pthread_mutex_lock(&enumeration);
    if (*file != NULL) fclose(*file);
    *file = NULL;
    pthread_mutex_unlock(&enumeration);
    return NSS_STATUS_SUCCESS;
}

enum nss_status _nss_xign_setpwent(int stayopen) {
    (void)stayopen;
    return start(&users, CACHE_PASSWD);
}

enum nss_status _nss_xign_endpwent(void) { return end(&users); }

enum nss_status _nss_xign_getpwent_r(struct passwd *result, char *buffer, size_t length, int *errnop) {
    enum nss_status status = NSS_STATUS_NOTFOUND;
    pthread_mutex_lock(&enumeration);
    if (users == NULL) users = open_cache(CACHE_PASSWD);
    while (users != NULL) {
        fpos_t position;
        fgetpos(users, &position);
        struct passwd *entry;
        int error = fgetpwent_r(users, result, buffer, length, &entry);
        if (error == ERANGE) {
            fsetpos(users, &position);
            *errnop = ERANGE;
            status = NSS_STATUS_TRYAGAIN;
            break;
        }
        if (error != 0) break;
        if (!collides(entry->pw_name, entry->pw_uid)) {
            status = NSS_STATUS_SUCCESS;
            break;
        }
    }
    if (status == NSS_STATUS_NOTFOUND) *errnop = ENOENT;
    pthread_mutex_unlock(&enumeration);
    return status;
}

/* Private groups are not listed either: a list is read for names, which they are not served by. */
enum nss_status _nss_xign_setgrent(int stayopen) {
    (void)stayopen;
    return NSS_STATUS_SUCCESS;
}

enum nss_status _nss_xign_endgrent(void) { return NSS_STATUS_SUCCESS; }

enum nss_status _nss_xign_getgrent_r(struct group *result, char *buffer, size_t length, int *errnop) {
    (void)result, (void)buffer, (void)length;
    *errnop = ENOENT;
    return NSS_STATUS_NOTFOUND;
}

/* ---- initgroups: the local groups the user's host groups join ---- */

/* Adds `gid` to the caller's list; 0 only when memory ran out. */
static int add_group(gid_t gid, gid_t primary, long *start, long *size, gid_t **groups_out, long limit) {
    if (gid == primary) return 1;
    for (long i = 0; i < *start; i++) {
        if ((*groups_out)[i] == gid) return 1;
    }
    if (*start == *size) {
        if (limit > 0 && *size >= limit) return 1; /* the caller's limit: the rest are left out */
        long grown = *size > 0 ? *size * 2 : 16;
        if (limit > 0 && grown > limit) grown = limit;
        gid_t *more = realloc(*groups_out, (size_t)grown * sizeof(gid_t));
        if (more == NULL) return 0;
        *groups_out = more;
        *size = grown;
    }
    (*groups_out)[(*start)++] = gid;
    return 1;
}

enum nss_status _nss_xign_initgroups_dyn(const char *user, gid_t primary, long *start, long *size,
                                         gid_t **groups_out, long limit, int *errnop) {
    if (local_has(LOCAL_PASSWD, user, 0, 0)) return NSS_STATUS_NOTFOUND;
    FILE *file = open_cache(CACHE_MEMBERSHIPS);
    if (file == NULL) return NSS_STATUS_NOTFOUND;
    size_t length = 1024;
    char *buffer = malloc(length);
    enum nss_status status = NSS_STATUS_NOTFOUND;
    while (buffer != NULL) {
        fpos_t position;
        fgetpos(file, &position);
        struct group entry, *found;
        int error = fgetgrent_r(file, &entry, buffer, length, &found);
        if (error == ERANGE && length < (1u << 24)) {
            char *larger = realloc(buffer, length * 2);
            if (larger == NULL) break;
            buffer = larger;
            length *= 2;
            fsetpos(file, &position);
            continue;
        }
        if (error != 0) break;
        for (char **member = entry.gr_mem; *member != NULL; member++) {
            if (strcmp(*member, user) == 0) {
                if (!add_group(entry.gr_gid, primary, start, size, groups_out, limit)) {
                    *errnop = ENOMEM;
                    status = NSS_STATUS_TRYAGAIN;
                    goto finished;
                }
                status = NSS_STATUS_SUCCESS;
                break;
            }
        }
    }
finished:
    free(buffer);
    fclose(file);
    return status;
}
