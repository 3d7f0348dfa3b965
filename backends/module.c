/* Loading the backend modules (see module.h). */
#include "backends/module.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Set by the Makefile: the build directory as given (relative to the
 * program when it is relative) and as an absolute path. */
#ifndef LB_BUILD_DIR
#define LB_BUILD_DIR "build"
#endif
#ifndef LB_BUILD_DIR_ABS
#define LB_BUILD_DIR_ABS LB_BUILD_DIR
#endif

enum { MAX_MODULES = 8 };

typedef struct loaded_module {
    char name[32];
    void *handle;            /* NULL when loading failed */
    lb_module_entry_fn entry;
    char why[512];           /* why loading failed */
} loaded_module;

static loaded_module modules[MAX_MODULES];
static int n_modules;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* Why module m did not load (vsnprintf: the loader's text may be long). */
static void set_why(loaded_module *m, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->why, sizeof m->why, fmt, ap);
    va_end(ap);
}

static int is_readable(const char *path) { return access(path, R_OK) == 0; }

/* dir/name.so into buf. */
static void join(char *buf, size_t len, const char *dir, const char *name)
{
    snprintf(buf, len, "%s/%s.so", dir, name);
}

void module_path(const char *name, char *buf, size_t len)
{
    const char *env = getenv("LENET_BENCH_MODULES");
    if (env && *env) {
        join(buf, len, env, name);
        return;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0 && LB_BUILD_DIR[0] != '/') {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            char dir[PATH_MAX + 64];
            snprintf(dir, sizeof dir, "%s/%s/modules", exe, LB_BUILD_DIR);
            join(buf, len, dir, name);
            if (is_readable(buf))
                return;
        }
    }
    join(buf, len, LB_BUILD_DIR_ABS "/modules", name);
}

static loaded_module *open_module(const char *name)
{
    for (int i = 0; i < n_modules; i++)
        if (strcmp(modules[i].name, name) == 0)
            return &modules[i];
    if (n_modules == MAX_MODULES)
        return NULL;
    loaded_module *m = &modules[n_modules++];
    snprintf(m->name, sizeof m->name, "%s", name);
    char path[PATH_MAX + 96];
    module_path(name, path, sizeof path);
    if (!is_readable(path)) {
        set_why(m, "module %s not found (was the build moved or cleaned? "
                 "run make, or set LENET_BENCH_MODULES to its directory)", path);
        return m;
    }
    /* RTLD_LOCAL: the module's copies of shared helpers stay its own */
    m->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!m->handle) {
        const char *e = dlerror();
        set_why(m, "cannot load %s: %s", path, e ? e : "unknown error");
        return m;
    }
    m->entry = (lb_module_entry_fn)(uintptr_t)dlsym(m->handle, LB_MODULE_ENTRY_NAME);
    if (!m->entry) {
        set_why(m, "%s has no %s: not a lenet-bench module", path,
                 LB_MODULE_ENTRY_NAME);
        dlclose(m->handle);
        m->handle = NULL;
    }
    return m;
}

const void *module_table(const char *name, const char *table, char *why, size_t why_len)
{
    pthread_mutex_lock(&lock);
    loaded_module *m = open_module(name);
    const void *t = NULL;
    if (!m)
        snprintf(why, why_len, "too many modules");
    else if (!m->entry)
        snprintf(why, why_len, "%s", m->why);
    else if (!(t = m->entry(LB_MODULE_ABI, table)))
        snprintf(why, why_len, "module %s offers no '%s' table for this program (a module "
                 "from another build? run make)", name, table);
    pthread_mutex_unlock(&lock);
    return t;
}

int module_loaded(const char *name)
{
    pthread_mutex_lock(&lock);
    int loaded = 0;
    for (int i = 0; i < n_modules; i++)
        if (strcmp(modules[i].name, name) == 0 && modules[i].handle)
            loaded = 1;
    pthread_mutex_unlock(&lock);
    return loaded;
}
