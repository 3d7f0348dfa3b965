/* Backends as modules: the heavy backends (blas, cuda) and the NCCL
 * communicator are shared objects under $(BUILD)/modules/, opened with
 * dlopen the first time the registry or a communicator needs them. So
 * `--help`, `--list` of one backend, a naive run and the subcommands never
 * map OpenBLAS, the CUDA runtime, cuDNN, cuBLAS or NCCL, and a library
 * that fails to load costs only the backend that needs it (with the
 * loader's message as the reason).
 *
 * A module exports one symbol, lb_module_entry, which hands out the
 * module's tables by name ("backend", "kernel_probe", "devmem", "nccl")
 * for the ABI the program was built with; every module defines it with
 * LB_MODULE_TABLES below. */
#ifndef LB_MODULE_H
#define LB_MODULE_H

#include <stddef.h>
#include <string.h>

/* Bumped whenever a table handed across the module boundary changes
 * shape (struct backend and its tables, the devmem and NCCL tables). */
#define LB_MODULE_ABI 6

/* What a module defines (exactly one per module). */
#define LB_MODULE_ENTRY_NAME "lb_module_entry"
typedef const void *(*lb_module_entry_fn)(int abi, const char *table);
#define LB_MODULE_EXPORT __attribute__((visibility("default")))

/* A table a module hands out, by name. */
typedef struct module_export {
    const char *name;
    const void *table;
} module_export;

/* What a module's lb_module_entry answers from its list of tables: the
 * one named `table`, NULL for another ABI or a name it does not list. */
static inline const void *module_export_find(int abi, const char *table,
                                             const module_export *exports, size_t count)
{
    if (abi != LB_MODULE_ABI)
        return NULL;
    for (size_t i = 0; i < count; i++)
        if (strcmp(exports[i].name, table) == 0)
            return exports[i].table;
    return NULL;
}

/* Defines the module's lb_module_entry over its tables, given as
 * {"name", &table} pairs: LB_MODULE_TABLES({"backend", &blas_backend}). */
#define LB_MODULE_TABLES(...)                                                                      \
    LB_MODULE_EXPORT const void *lb_module_entry(int abi, const char *table_name)                  \
    {                                                                                              \
        static const module_export exports[] = {__VA_ARGS__};                                      \
        return module_export_find(abi, table_name, exports, sizeof exports / sizeof exports[0]);   \
    }

/* Table `table` of module `name`, loading the module on first use. NULL
 * with the reason in why (file missing, a library it needs missing, a
 * module from another build). Thread-safe. */
const void *module_table(const char *name, const char *table, char *why, size_t why_len);

/* 1 when module `name` has been loaded by this process. */
int module_loaded(const char *name);

/* Where modules are looked for, first match wins: $LENET_BENCH_MODULES,
 * then <program's directory>/<build dir>/modules, then the build's own
 * directory (an absolute path fixed at build time). Writes the path the
 * module `name` was (or would be) loaded from. */
void module_path(const char *name, char *buf, size_t len);

#endif
