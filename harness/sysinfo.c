#include "harness/sysinfo.h"

#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "backends/engine.h"

#ifndef GIT_COMMIT
#define GIT_COMMIT "unknown"
#endif

/* First "key : value" line of a /proc file whose key starts with `key`. */
static int proc_field(const char *path, const char *key, char *out, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[512];
    int found = -1;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, strlen(key)) != 0)
            continue;
        char *colon = strchr(line, ':');
        if (!colon)
            continue;
        colon++;
        while (*colon == ' ' || *colon == '\t')
            colon++;
        colon[strcspn(colon, "\n")] = 0;
        snprintf(out, len, "%s", colon);
        found = 0;
        break;
    }
    fclose(f);
    return found;
}

static void read_caches(char *out, size_t len)
{
    size_t used = 0;
    out[0] = 0;
    for (int i = 0; i < 8; i++) {
        char path[128], level[16] = "", type[32] = "", size[32] = "";
        FILE *f;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        if (!(f = fopen(path, "r")))
            break;
        if (!fgets(level, sizeof level, f))
            level[0] = 0;
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        if ((f = fopen(path, "r"))) {
            if (!fgets(type, sizeof type, f))
                type[0] = 0;
            fclose(f);
        }
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if ((f = fopen(path, "r"))) {
            if (!fgets(size, sizeof size, f))
                size[0] = 0;
            fclose(f);
        }
        level[strcspn(level, "\n")] = type[strcspn(type, "\n")] = size[strcspn(size, "\n")] = 0;
        const char *t = strcmp(type, "Data") == 0 ? "d" : strcmp(type, "Instruction") == 0 ? "i" : "";
        used += (size_t)snprintf(out + used, used < len ? len - used : 0, "%sL%s%s %s",
                                 used ? ", " : "", level, t, size);
        if (used >= len)
            break;
    }
}

void sysinfo_collect(sysinfo *s)
{
    memset(s, 0, sizeof *s);
    if (gethostname(s->host, sizeof s->host - 1) != 0)
        strcpy(s->host, "unknown");
    struct utsname u;
    if (uname(&u) == 0)
        snprintf(s->os, sizeof s->os, "%s %s %s", u.sysname, u.release, u.machine);
    if (proc_field("/proc/cpuinfo", "model name", s->cpu_model, sizeof s->cpu_model) != 0)
        strcpy(s->cpu_model, "unknown");
    char mhz[64];
    if (proc_field("/proc/cpuinfo", "cpu MHz", mhz, sizeof mhz) == 0)
        s->cpu_mhz = atof(mhz);
    s->cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    char mem[64];
    if (proc_field("/proc/meminfo", "MemTotal", mem, sizeof mem) == 0)
        s->memory_gib = atof(mem) / (1024.0 * 1024.0);
    read_caches(s->caches, sizeof s->caches);
#ifdef __VERSION__
    snprintf(s->compiler, sizeof s->compiler, "%s %s",
#ifdef __clang__
             "clang",
#else
             "gcc",
#endif
             __VERSION__);
#endif
    snprintf(s->git_commit, sizeof s->git_commit, "%s", GIT_COMMIT);
    size_t used = 0;
    for (int i = 0; i < backend_count(); i++) {
        const backend *b = backend_at(i);
        if (!b->built || !b->library_info)
            continue;
        char info[256] = "";
        b->library_info(info, sizeof info);
        if (!info[0] || strstr(s->libraries, info))
            continue;
        used += (size_t)snprintf(s->libraries + used,
                                 used < sizeof s->libraries ? sizeof s->libraries - used : 0,
                                 "%s%s", used ? "; " : "", info);
    }
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(s->date, sizeof s->date, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void json_string(FILE *f, const char *str)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)str; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

void sysinfo_write_json(FILE *f, const sysinfo *s, int argc, char **argv)
{
    fprintf(f, "{\n  \"date\": ");
    json_string(f, s->date);
    fprintf(f, ",\n  \"host\": ");
    json_string(f, s->host);
    fprintf(f, ",\n  \"os\": ");
    json_string(f, s->os);
    fprintf(f, ",\n  \"cpu_model\": ");
    json_string(f, s->cpu_model);
    fprintf(f, ",\n  \"cores\": %d,\n  \"cpu_mhz\": %.0f,\n  \"caches\": ", s->cores, s->cpu_mhz);
    json_string(f, s->caches);
    fprintf(f, ",\n  \"memory_gib\": %.1f,\n  \"compiler\": ", s->memory_gib);
    json_string(f, s->compiler);
    fprintf(f, ",\n  \"git_commit\": ");
    json_string(f, s->git_commit);
    fprintf(f, ",\n  \"libraries\": ");
    json_string(f, s->libraries);
    fprintf(f, ",\n  \"command_line\": [");
    for (int i = 0; i < argc; i++) {
        fprintf(f, "%s", i ? ", " : "");
        json_string(f, argv[i]);
    }
    fprintf(f, "]\n}\n");
}
