#include "harness/formats/fileio.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/errmsg.h"

FILE *fopen_regular(const char *path, const char **problem)
{
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        *problem = strerror(errno);
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        *problem = strerror(e);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        errno = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
        *problem = S_ISDIR(st.st_mode) ? "is a directory"
                                       : "is not a regular file (a FIFO, device or socket)";
        return NULL;
    }
    int flags = fcntl(fd, F_GETFL);
    FILE *f = NULL;
    if (flags >= 0 && fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0)
        f = fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        errno = e;
        *problem = strerror(e);
    }
    return f;
}

FILE *open_input(const char *path, const char *what, char *err, size_t err_len)
{
    const char *problem;
    FILE *f = fopen_regular(path, &problem);
    if (f)
        return f;
    int e = errno;
    if (e == EISDIR)
        errmsg_set(err, err_len, path, "is a directory, expected %s", what);
    else if (e == EINVAL)
        errmsg_set(err, err_len, path, "%s", problem);
    else
        errmsg_set(err, err_len, path, "cannot open: %s", problem);
    errno = e;
    return NULL;
}

int is_special_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

int write_failure_status(int err)
{
    switch (err) {
    case ENOSPC:
    case EDQUOT:
    case EIO:
    case EFBIG:
    case ENOMEM:
        return 1;
    default:
        return 2;
    }
}

int check_output_path(const char *flag, const char *path, char *err, size_t err_len)
{
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        errno = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
        snprintf(err, err_len, "%s %s: %s", flag, path,
                 S_ISDIR(st.st_mode) ? "is a directory, expected a file name"
                                     : "is not a regular file (a FIFO, device or socket)");
        return -1;
    }
    size_t len = strlen(path);
    char *probe = malloc(len + 64);
    if (!probe) {
        snprintf(err, err_len, "%s %s: out of memory", flag, path);
        errno = ENOMEM;
        return -1;
    }
    /* a file beside the target, as the real write makes one (a temporary
     * file renamed into place, or the file itself) */
    const char *slash = strrchr(path, '/');
    int dir_len = slash ? (int)(slash - path) + 1 : 0;
    snprintf(probe, len + 64, "%.*s.bench-probe.%ld", dir_len, path, (long)getpid());
    int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT)
            snprintf(err, err_len, "%s %s: its directory %.*s does not exist", flag, path,
                     dir_len > 1 ? dir_len - 1 : 1, dir_len ? path : ".");
        else
            snprintf(err, err_len, "%s %s: cannot create a file there: %s", flag, path,
                     strerror(e));
        free(probe);
        errno = e;
        return -1;
    }
    close(fd);
    unlink(probe);
    free(probe);
    return 0;
}

FILE *create_new_file(const char *flag, const char *path, int *created, char *err,
                      size_t err_len)
{
    *created = 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
        *created = 1;
    } else if (errno == EEXIST) {
        /* O_NONBLOCK: a FIFO with no reader fails here instead of waiting */
        fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        struct stat st;
        int e = fd < 0 ? errno : 0;
        if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0) {
            fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        } else {
            if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
                snprintf(err, err_len, "%s %s: exists (%lld bytes); it is never overwritten: "
                         "remove it or pick another name", flag, path, (long long)st.st_size);
            else if (fd >= 0 || e == ENXIO)
                snprintf(err, err_len, "%s %s: is not a regular file (a FIFO, device or socket)",
                         flag, path);
            else
                snprintf(err, err_len, "%s %s: cannot open: %s", flag, path, strerror(e));
            if (fd >= 0)
                close(fd);
            errno = e ? e : EEXIST;
            return NULL;
        }
    }
    if (fd < 0) {
        int e = errno;
        snprintf(err, err_len, "%s %s: cannot create: %s", flag, path, strerror(e));
        errno = e;
        return NULL;
    }
    FILE *f = fdopen(fd, "w");
    if (!f) {
        int e = errno;
        snprintf(err, err_len, "%s %s: %s", flag, path, strerror(e));
        close(fd);
        if (*created)
            unlink(path);
        errno = e;
        return NULL;
    }
    return f;
}

int file_ends_with_newline(const char *path)
{
    FILE *f = fopen(path, "rb");
    int last = EOF;
    if (f && fseek(f, -1, SEEK_END) == 0)
        last = fgetc(f);
    if (f)
        fclose(f);
    return last == '\n';
}

void canonical_path(const char *path, char *out, size_t len)
{
    char copy[PATH_MAX];
    snprintf(copy, sizeof copy, "%s", path);
    size_t n = strlen(copy);
    while (n > 1 && copy[n - 1] == '/')
        copy[--n] = 0;
    char *slash = strrchr(copy, '/');
    const char *dir = ".", *base = copy;
    if (slash == copy) {
        dir = "/";
        base = copy + 1;
    } else if (slash) {
        *slash = 0;
        dir = copy;
        base = slash + 1;
    }
    char real[PATH_MAX];
    if (!realpath(dir, real))
        snprintf(real, sizeof real, "%s", dir);
    if (!*base || !strcmp(base, "."))
        snprintf(out, len, "%s", real);
    else
        snprintf(out, len, "%s%s%s", real, strcmp(real, "/") ? "/" : "", base);
}

int directory_entries(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}
