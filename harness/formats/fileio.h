/* Opening the files the program reads and checking the ones it will write,
 * so that a FIFO, device or socket named by mistake is refused at once
 * instead of blocking the run, and a destination that cannot be written is
 * found before training instead of after it. */
#ifndef LB_FILEIO_H
#define LB_FILEIO_H

#include <stddef.h>
#include <stdio.h>

/* Opens path for reading ("rb") if it is a regular file. The open never
 * blocks (O_NONBLOCK, cleared again before returning). On failure returns
 * NULL with errno set (EISDIR for a directory) and *problem a short reason:
 * strerror(errno), "is a directory" or "is not a regular file (a FIFO,
 * device or socket)". */
FILE *fopen_regular(const char *path, const char **problem);

/* fopen_regular for an input file of the run, a failure worded as one
 * line in err: "path: is a directory, expected <what>", "path: is not a
 * regular file (...)" or "path: cannot open: <reason>". errno is left as
 * fopen_regular set it (ENOENT: the file is missing). */
FILE *open_input(const char *path, const char *what, char *err, size_t err_len);

/* Whether a path names an existing file that is not a regular one. */
int is_special_file(const char *path);

/* 1 when the file's last byte is a newline (an empty or missing file: 0),
 * so an appended row does not join a cut-short last line. */
int file_ends_with_newline(const char *path);

/* The exit status for a write that failed with errno err: 1 when the system
 * could not take the data (disk full, quota, I/O error, out of memory), 2
 * when the destination named on the command line cannot be used (missing
 * directory, no permission, read-only, a directory, taken). */
int write_failure_status(int err);

/* Checks before training that `path` (given with `flag`) can be written
 * later: not a directory nor a special file, and its directory exists and
 * takes a new file (tried by creating and removing one). 0, or -1 with
 * "flag path: reason" in err and errno set. */
int check_output_path(const char *flag, const char *path, char *err, size_t err_len);

/* Creates path for writing (given with `flag`), refusing to overwrite: an
 * existing file is taken only when it is empty (made beforehand with
 * mktemp or touch), never a FIFO, device or directory. *created says
 * whether this call made it (to remove it again if the run stops before
 * writing). NULL with "flag path: reason" in err and errno set. */
FILE *create_new_file(const char *flag, const char *path, int *created, char *err,
                      size_t err_len);

/* path with its directory resolved (realpath) and its last name kept, so
 * that two spellings of one destination compare equal before it exists. */
void canonical_path(const char *path, char *out, size_t len);

/* Entries in a directory besides . and ..; -1 when it cannot be read. */
int directory_entries(const char *path);

#endif
