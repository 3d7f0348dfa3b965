/* Parameter files: the flat parameter vector of a workload, saved and loaded
 * the same way by every backend.
 *
 * Format (version 1). All integers are unsigned 32-bit little-endian; all
 * values are IEEE-754 float32 little-endian, whatever the host's byte order.
 *
 *   offset  size        field
 *   0       8           magic, the ASCII bytes "LBPARAMS"
 *   8       4           version = 1
 *   12      4           tensor count T
 *   then T tensors, each:
 *           4           name length L (1..PARAMFILE_MAX_NAME)
 *           L           name, ASCII, no terminating NUL ("conv1.weight")
 *           4           number of dimensions D (1..PARAMFILE_MAX_DIMS)
 *           4 x D       dimensions, outermost first
 *           4 x N       the values, N = product of the dimensions, row-major
 *   end of file (nothing may follow the last tensor)
 *
 * The tensors appear in the workload's order (workload_tensor_info): for
 * each conv or dense layer its weight then its bias. Conv weights are
 * [out_c][in_c][k][k], dense weights [out][in], biases [out]. A file holds
 * 8 + 4 + 4 + sum over tensors of (8 + L + 4 D + 4 N) bytes; LeNet's
 * 431,080 parameters take 1,724,320 bytes of values, 1,724,544 in all.
 *
 * Loading checks the magic, the version, the tensor count, every name and
 * shape against the workload ("was saved for a different workload"),
 * truncation, trailing bytes and that every value is finite (NaN and Inf are
 * rejected, naming the tensor). Saving writes a temporary file beside the
 * target and renames it into place, so a failed save leaves any earlier file
 * untouched; it refuses non-finite values, which loading would reject.
 *
 * Conventions: functions returning int give 0 on success and non-zero on
 * failure, with one line in err naming the file (or `name`) and the
 * problem. On failure params is left unchanged. */
#ifndef LB_PARAMFILE_H
#define LB_PARAMFILE_H

#include <stddef.h>
#include <stdint.h>

#include "workloads/workload.h"

#define PARAMFILE_MAGIC "LBPARAMS"
#define PARAMFILE_VERSION 1u
#define PARAMFILE_MAX_NAME 256u
#define PARAMFILE_MAX_DIMS 8u
/* No parameter file is read whole if bigger than this (1 GiB). */
#define PARAMFILE_MAX_BYTES ((size_t)1 << 30)

/* Exact size in bytes of the file for workload w. */
size_t paramfile_size(const workload *w);

/* Serialises w's w->param_count floats into buf (len must be at least
 * paramfile_size(w)). Returns the bytes written, or 0 with a message when
 * a value is not finite or buf is too small. `name` is used in messages. */
size_t paramfile_encode(const workload *w, const float *params, uint8_t *buf, size_t len,
                        const char *name, char *err, size_t err_len);

int paramfile_save(const char *path, const workload *w, const float *params, char *err,
                   size_t err_len);
int paramfile_load(const char *path, const workload *w, float *params, char *err,
                   size_t err_len);

/* paramfile_load's checks on a whole file held in memory (for fuzz targets);
 * messages start with "<param file>". Fills params only when the whole
 * buffer is valid. */
int paramfile_parse(const void *buf, size_t len, const workload *w, float *params,
                    char *err, size_t err_len);

/* As paramfile_parse, with `name` (a path) in messages. */
int paramfile_parse_named(const void *buf, size_t len, const char *name, const workload *w,
                          float *params, char *err, size_t err_len);

#endif
