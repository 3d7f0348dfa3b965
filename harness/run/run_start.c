/* What a run needs before it trains: its inputs (the data, the initial
 * parameters) and its destinations checked and opened. A part of the run
 * (run_impl.h). */
#include "harness/run/run_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "harness/formats/fileio.h"
#include "harness/formats/idx.h"
#include "harness/formats/paramfile.h"
#include "harness/run/init.h"

int run_load_inputs(run_state *s)
{
    const run_config *cfg = s->cfg;
    const workload *w = &cfg->work;
    char err[1024];
    /* only what --limit and --test-limit train and score is held */
    if (idx_load_kept(cfg->data_dir, w->classes, w->input.h, w->input.w, cfg->limit,
                      cfg->test_limit, &s->train, &s->test, err, sizeof err) != 0) {
        fprintf(stderr, "bench: %s\n", err);
        return errno == ENOMEM ? 1 : 2; /* out of memory is no fault of the input */
    }
    if (cli_check_against_data(cfg, s->train.count, s->test.count) != 0)
        return 2;
    if (cfg->limit)
        s->train.count = cfg->limit;
    if (cfg->test_limit)
        s->test.count = cfg->test_limit;
    s->init_params = xmalloc(sizeof(float) * w->param_count);
    s->order = xmalloc(sizeof(int32_t) * (size_t)s->train.count);
    /* batch_sizes is ascending: the smallest batch takes the most steps */
    s->losses = xmalloc(sizeof(float) * ((size_t)s->train.count / cfg->batch_sizes[0] + 1));
    if (cfg->init_params[0]) {
        if (paramfile_load(cfg->init_params, w, s->init_params, err, sizeof err) != 0) {
            fprintf(stderr, "bench: %s\n", err);
            return errno == ENOMEM ? 1 : 2;
        }
    } else {
        init_params(w, cfg->seed, s->init_params);
    }
    return 0;
}

void run_free_inputs(run_state *s)
{
    dataset_free(&s->train);
    dataset_free(&s->test);
    free(s->init_params);
    free(s->order);
    free(s->losses);
}

void run_abandon_start(run_state *s)
{
    const run_config *cfg = s->cfg;
    if (s->step_losses) {
        fclose(s->step_losses);
        if (s->step_losses_created)
            unlink(cfg->step_losses);
    }
    run_free_inputs(s);
}

/* A name the run writes in its results directory (results.c, plot.c). */
static int written_by_the_run(const char *name)
{
    static const char *const files[] = {"epochs.csv", "summary.csv", "system.json"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        if (!strcmp(name, files[i]))
            return 1;
    size_t n = strlen(name);
    int csv = n > 4 && !strcmp(name + n - 4, ".csv");
    return (csv && (!strncmp(name, "confusion-", 10) || !strncmp(name, "profile-", 8))) ||
           (n > 4 && (!strcmp(name + n - 4, ".png") || !strcmp(name + n - 4, ".svg"))) ||
           strstr(name, ".part-") != NULL;
}

/* Destinations that would overwrite each other or what is not ours: an
 * --out that holds files and no run of ours (`--out /`, a home directory),
 * --save-params or --step-losses on a file the run writes in --out, and
 * the two on one path. 0, or 2 with the message printed. */
static int check_collisions(const run_config *cfg)
{
    char out[PATH_LEN], file[2 * PATH_LEN];
    if (cfg->out_dir[0]) {
        canonical_path(cfg->out_dir, out, sizeof out);
        struct stat st;
        int entries = stat(cfg->out_dir, &st) == 0 && S_ISDIR(st.st_mode)
                          ? directory_entries(cfg->out_dir) : 0;
        char probe[PATH_LEN + 16];
        snprintf(probe, sizeof probe, "%s/epochs.csv", cfg->out_dir);
        if (entries > 0 && access(probe, F_OK) != 0) {
            fprintf(stderr, "bench: --out %s is a directory that holds %d entr%s and no "
                    "run: give a new or empty directory\n", cfg->out_dir, entries,
                    entries == 1 ? "y" : "ies");
            return 2;
        }
    }
    const char *flags[2] = {"--save-params", "--step-losses"};
    const char *paths[2] = {cfg->save_params, cfg->step_losses};
    char canon[2][PATH_LEN] = {"", ""};
    for (int i = 0; i < 2; i++) {
        if (!paths[i][0])
            continue;
        canonical_path(paths[i], canon[i], sizeof canon[i]);
        snprintf(file, sizeof file, "%s", canon[i]);
        char *slash = strrchr(file, '/');
        if (cfg->out_dir[0] && slash) {
            *slash = 0;
            if (!strcmp(file[0] ? file : "/", out) && written_by_the_run(slash + 1)) {
                fprintf(stderr, "bench: %s %s is a file the run writes in --out %s: choose "
                        "another name or place\n", flags[i], paths[i], cfg->out_dir);
                return 2;
            }
        }
    }
    if (cfg->save_params[0] && cfg->step_losses[0] && !strcmp(canon[0], canon[1])) {
        fprintf(stderr, "bench: --step-losses %s and --save-params %s are both one file: give "
                "each its own\n", cfg->step_losses, cfg->save_params);
        return 2;
    }
    return 0;
}

int run_open_destinations(run_state *s)
{
    const run_config *cfg = s->cfg;
    char err[PATH_LEN + 256];
    if (check_collisions(cfg) != 0)
        return 2;
    if (cfg->save_params[0] && check_output_path("--save-params", cfg->save_params, err,
                                                 sizeof err) != 0) {
        fprintf(stderr, "bench: %s\n", err);
        return write_failure_status(errno);
    }
    if (cfg->step_losses[0]) {
        s->step_losses = create_new_file("--step-losses", cfg->step_losses,
                                         &s->step_losses_created, err, sizeof err);
        if (!s->step_losses) {
            fprintf(stderr, "bench: %s\n", err);
            return write_failure_status(errno);
        }
        /* the first eight columns as they always were; the rest of the
         * row's key after them, so that configurations can be told apart */
        fprintf(s->step_losses, "backend,replicas,ranks,repeat,epoch,step,images,loss,"
                                "workload,precision,threads,devices,batch_size,optimizer\n");
    }
    return 0;
}

void run_note_unread_data_files(const char *dir)
{
    char used[4 * PATH_LEN], unread[8 * PATH_LEN];
    idx_describe_files(dir, used, sizeof used, unread, sizeof unread);
    if (unread[0])
        fprintf(stderr, "note: not read: %s\n", unread);
}
