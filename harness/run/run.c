/* The run: load the data once, make the initial parameters once, then train
 * each backend from those same floats in the same batch order, timing each
 * epoch and writing a row as it ends. Its parts: run_impl.h. */
#include "harness/run/run_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "harness/formats/fileio.h"
#include "harness/run/agree.h"
#include "harness/run/label.h"
#include "parallel/world.h"

/* The failed row of the configuration the stuck run was training, then
 * the report; the process's exit status. */
static int finish_stuck_run(void *arg)
{
    run_state *s = arg;
    const run_config *cfg = s->cfg;
    const int i = s->current_config, r = s->current_repeat;
    if (i >= 0) {
        attempt *a = &s->runs[i * cfg->repeat + r];
        a->status = STATUS_FAILED;
        snprintf(a->message, sizeof a->message,
                 "signal %d in epoch %d (%d of %d epochs finished) while this rank waited for "
                 "the others: one of them stopped answering", (int)run_stop_signal,
                 a->epochs_done + 1, a->epochs_done, cfg->epochs);
        s->done_runs[i] = r + 1;
    }
    s->ending = 1;
    run_report(s, 1);
    fflush(stdout);
    fflush(stderr);
    return 1;
}

/* A stop signal during start-up: 130, said once (under mpirun by rank 0). */
static int stopped_at_start(void)
{
    if (world_rank() == 0)
        fprintf(stderr, "bench: stopped by signal %d during start-up\n", (int)run_stop_signal);
    return 130;
}

static int run_backends(const run_config *cfg, run_chart_drawer *draw_charts)
{
    configuration *configs = xcalloc(MAX_RUN_CONFIGS, sizeof *configs);
    char err[1024];
    int n = plan_configurations(cfg, configs, MAX_RUN_CONFIGS, err, sizeof err);
    if (n < 0) {
        if (world_rank() == 0) /* every rank refuses alike; one says why */
            fprintf(stderr, "bench: %s\n", err);
        free(configs);
        return 2;
    }
    if (run_stopping(NULL)) { /* every rank asks here, so all stop alike */
        free(configs);
        return stopped_at_start();
    }
    /* a configuration one rank cannot run is skipped on every rank */
    int runnable[MAX_RUN_CONFIGS];
    char *reasons[MAX_RUN_CONFIGS];
    for (int i = 0; i < n; i++) {
        runnable[i] = configs[i].runnable;
        reasons[i] = configs[i].reason;
    }
    if (agree_on_runnable(n, runnable, reasons, sizeof configs[0].reason) != 0) {
        free(configs);
        return 2;
    }
    int any = 0;
    for (int i = 0; i < n; i++)
        any |= configs[i].runnable = runnable[i];
    if (!any) {
        for (int i = 0; i < n && world_rank() == 0; i++) /* every rank alike: one says */
            if (cfg->n_precisions > 1)
                fprintf(stderr, "bench: %s at %s: %s\n", configs[i].b->name,
                        precision_name(configs[i].prec), configs[i].reason);
            else
                fprintf(stderr, "bench: %s: %s\n", configs[i].b->name, configs[i].reason);
        free(configs);
        return 3;
    }

    run_state s = {.cfg = cfg, .root = world_rank() == 0, .draw_charts = draw_charts};
    s.label_axes = (cfg->n_precisions > 1 ? LABEL_PRECISION : 0) |
                   (cfg->n_batch_sizes > 1 ? LABEL_BATCH : 0);
    int rc = run_load_inputs(&s);
    if (!rc && run_stop_signal)
        rc = stopped_at_start();
    if (!rc && s.root)
        rc = run_open_destinations(&s);
    /* every rank stops when one cannot start, or read other data */
    rc = agree_on_inputs(rc, &s.train, &s.test, s.init_params, (size_t)cfg->work.param_count);
    if (rc) {
        run_abandon_start(&s);
        free(configs);
        return rc;
    }
    if (s.root && results_open(&s.res, cfg, err, sizeof err) != 0) {
        int status = write_failure_status(errno);
        fprintf(stderr, "bench: %s\n", err);
        results_close(&s.res);
        run_abandon_start(&s);
        free(configs);
        return status;
    }
    attempt *runs = xcalloc((size_t)n * cfg->repeat, sizeof *runs);
    for (int k = 0; k < n * cfg->repeat; k++)
        runs[k].epoch_seconds = xcalloc((size_t)cfg->epochs, sizeof(double));
    s.configs = configs;
    s.n_configs = n;
    s.runs = runs;
    s.current_config = -1;
    /* the skipped rows, from the start: before anything is printed, so
     * that a process ended by its output (a closed pipe, a full terminal
     * log) still has them */
    run_save_summary(&s);
    if (s.root)
        run_note_unread_data_files(cfg->data_dir);
    if (s.root) {
        char batches[MAX_BATCH_SIZES * 12] = "";
        size_t used = 0;
        for (int k = 0; k < cfg->n_batch_sizes && used < sizeof batches; k++)
            used += (size_t)snprintf(batches + used, sizeof batches - used, "%s%d", k ? "," : "",
                                     cfg->batch_sizes[k]);
        fprintf(stderr, "%s: %d training and %d test images from %s, %s, batch %s, %d epoch%s -> %s\n",
            cfg->work.name, s.train.count, s.test.count, cfg->data_dir,
            optimizer_name(cfg->engine.opt.kind), batches, cfg->epochs,
            cfg->epochs == 1 ? "" : "s", s.res.dir);
    }
    for (int i = 0; i < n && s.root; i++)
        if (!configs[i].runnable) {
            attempt none = {.replicas = configs[i].replicas};
            row_key key = run_row_key(&s, &configs[i], &none);
            char label[128];
            config_label(&key, label, sizeof label);
            fprintf(stderr, "%-10s skipped: %s\n", label, configs[i].reason);
        }

    /* --repeat interleaves: round r trains every backend once (A B A B, not
     * A A B B), so a change in the machine's load falls on all of them. */
    if (s.root)
        run_watch_ranks(finish_stuck_run, &s);
    int stopped[MAX_RUN_CONFIGS] = {0};
    for (int r = 0; r < cfg->repeat && rc == 0 && !run_stopping(NULL); r++)
        for (int i = 0; i < n && rc == 0 && !run_stopping(NULL); i++) {
            if (!configs[i].runnable || stopped[i])
                continue;
            attempt *a = &runs[i * cfg->repeat + r];
            s.current_config = i;
            s.current_repeat = r;
            /* a row that could not be written (a full disk) stops the
             * run, yet the configuration keeps its row, failed */
            const int io_error = run_train_configuration(&s, &configs[i], r + 1, a) != 0;
            s.done_runs[i] = r + 1;
            s.current_config = -1;
            stopped[i] = a->status != STATUS_OK;
            run_save_summary(&s); /* the report at the end tries again if it fails */
            if (io_error) {
                rc = 1;
                break;
            }
        }
    rc = run_report(&s, rc);
    for (int k = 0; k < n * cfg->repeat; k++)
        free(runs[k].epoch_seconds);
    free(runs);
    free(configs);
    run_free_inputs(&s);
    return rc;
}

int run_benchmark(const run_config *cfg, run_chart_drawer *draw_charts)
{
    /* from here a signal ends the run with 130: while MPI starts, the
     * backends are probed (modules, kernel-choice children, a peer's
     * interpreter) and the data loads too */
    run_install_signal_handlers();
    char err[512];
    if (world_init(err, sizeof err) != 0) {
        fprintf(stderr, "bench: %s\n", err);
        return 2;
    }
    /* ranks told different things would train different models, or wait
     * for each other in a collective forever */
    int rc = agree_on_config(cfg);
    if (rc == 0)
        rc = run_backends(cfg, draw_charts);
    world_finalize();
    return rc;
}
