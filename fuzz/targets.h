/* Fuzz targets for the input parsers: the IDX loader, the parameter file
 * parser and the CSV reader. Each takes one input and returns 0; a broken
 * invariant (a success that does not describe the input, a failure without
 * a one-line message naming the input, a failed parse that touched its
 * output) calls abort(), so libFuzzer and the replay test both see it as a
 * crash.
 *
 *   fuzz_idx_parse   idx_parse_images and idx_parse_labels on the bytes
 *   fuzz_idx_file    idx_load_images and idx_load_labels on the bytes as a
 *                    file (a memfd), which covers the gzip path
 *   fuzz_paramfile   paramfile_parse for a tiny workload (so valid files are
 *                    a few hundred bytes) and for LeNet
 *   fuzz_csv         csv_read (the reader of compare, history and plot) on
 *                    the bytes as a file
 */
#ifndef LB_FUZZ_TARGETS_H
#define LB_FUZZ_TARGETS_H

#include <stddef.h>
#include <stdint.h>

#include "workloads/workload.h"

int fuzz_idx_parse(const uint8_t *data, size_t size);
int fuzz_idx_file(const uint8_t *data, size_t size);
int fuzz_paramfile(const uint8_t *data, size_t size);
int fuzz_csv(const uint8_t *data, size_t size);

/* The tiny workload fuzz_paramfile parses against: conv 1->2 channels with
 * 2x2 kernels on 3x3 input, then a dense layer 8 -> 3 (37 parameters). */
void fuzz_tiny_workload(workload *w);

#endif
