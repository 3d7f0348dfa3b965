/* MNIST-style IDX files: the training and test images and labels.
 *
 * Files may be plain or gzip-compressed; gzip is recognised by its magic
 * bytes (1f 8b), not by the file name, and needs a build with zlib. Every
 * file is validated whole before it is used: magic (0x00000803 images,
 * 0x00000801 labels), element type unsigned byte, number of dimensions,
 * image size against the workload's input, data length exactly as the
 * header describes (no truncation, no trailing bytes), a size limit of
 * IDX_MAX_BYTES, labels below the class count, and as many labels as images.
 * What a header claims is held to what the file can hold (its size, or
 * deflate's largest ratio for gzip) and the label count to the image count
 * before the data is allocated.
 *
 * Conventions: functions returning int give 0 on success and non-zero on
 * failure, with one line in err naming the file and the problem, e.g.
 *   data/train-labels-idx1-ubyte.gz: label 12 at index 4051 is outside 0..9
 */
#ifndef LB_IDX_H
#define LB_IDX_H

#include <stddef.h>
#include <stdint.h>

#include "backends/engine.h"

#define IDX_MAGIC_IMAGES 0x00000803u
#define IDX_MAGIC_LABELS 0x00000801u

/* The most data (bytes after the header) one file may hold: 2 GiB. */
#define IDX_MAX_BYTES ((size_t)1 << 31)

/* Where Debian's dataset-fashion-mnist package puts the four .gz files. */
#define IDX_DEFAULT_DIR "/usr/share/datasets/fashion-mnist"

/* Loads <dir>/<split>-images-idx3-ubyte and <dir>/<split>-labels-idx1-ubyte
 * (split is "train" or "t10k"). Each name is looked for as is, with ".gz",
 * and in the original MNIST site's dot spelling (<split>-images.idx3-ubyte,
 * with or without ".gz"), in that order; the first that exists is used.
 * On success *out owns its buffers: release them with dataset_free. On
 * failure *out is left empty. */
int idx_load_split(const char *dir, const char *split, int classes, int rows, int cols,
                   dataset *out, char *err, size_t err_len);

/* The file idx_load_split reads for <split>-<kind> ("images" or "labels")
 * in dir, into path. When another spelling of it is present too (plain
 * and .gz side by side), it is not read: its path goes into unread (may be
 * NULL), else unread is "". 0, or -1 with a message when none exists. */
int idx_find(const char *dir, const char *split, const char *kind, char *path,
             size_t path_len, char *unread, size_t unread_len, char *err, size_t err_len);

/* For the record of a run: the four files read from dir, comma-separated,
 * into used; the spellings present beside them but not read into unread
 * ("" when none), e.g. "D/train-images-idx3-ubyte.gz (read
 * D/train-images-idx3-ubyte instead)". */
void idx_describe_files(const char *dir, char *used, size_t used_len, char *unread,
                        size_t unread_len);

/* Both splits: "train" into *train and "t10k" into *test. On failure both
 * are left empty. */
int idx_load(const char *dir, int classes, int rows, int cols, dataset *train,
             dataset *test, char *err, size_t err_len);
/* idx_load holding only the first train_keep training and test_keep test
 * images (0: all; --limit and --test-limit): every file is still read and
 * checked whole, but no more is allocated than is kept. A split's count is
 * then the smaller of what is kept and what the file holds. */
int idx_load_kept(const char *dir, int classes, int rows, int cols, int train_keep,
                  int test_keep, dataset *train, dataset *test, char *err, size_t err_len);

/* Frees what idx_load / idx_load_split allocated and zeroes *d. Safe on a
 * zeroed dataset. */
void dataset_free(dataset *d);

/* One file. On success *pixels (count x rows x cols) or *labels is a
 * malloc'd buffer the caller frees. */
int idx_load_images(const char *path, int rows, int cols, uint8_t **pixels, int *count,
                    char *err, size_t err_len);
int idx_load_labels(const char *path, int classes, uint8_t **labels, int *count,
                    char *err, size_t err_len);

/* The same checks on a whole (uncompressed) file held in memory, for fuzz
 * targets and tests; `name` is used in messages. On success *pixels or
 * *labels points into buf (no allocation). */
int idx_parse_images(const uint8_t *buf, size_t len, const char *name, int rows, int cols,
                     const uint8_t **pixels, int *count, char *err, size_t err_len);
int idx_parse_labels(const uint8_t *buf, size_t len, const char *name, int classes,
                     const uint8_t **labels, int *count, char *err, size_t err_len);

#endif
