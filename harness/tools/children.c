#include "harness/tools/children.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t caught;

static void on_signal(int sig)
{
    if (!caught)
        caught = sig;
}

void children_catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: a blocked wait or read returns EINTR */
    /* every signal whose default ends the process without a core dump
     * (and SIGQUIT's): ending the bench must end its child too */
    static const int ending[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM};
    for (size_t i = 0; i < sizeof ending / sizeof *ending; i++)
        sigaction(ending[i], &sa, NULL);
}

int children_signal(void) { return caught; }

void children_end_if_signalled(pid_t pid)
{
    if (caught && pid > 0)
        kill(pid, SIGTERM);
}

int children_wait(pid_t pid, int *status)
{
    int ended = 0;
    struct timespec tick = {0, 20 * 1000 * 1000};
    for (int waited = 0;;) {
        if (caught && !ended) {
            kill(pid, SIGTERM);
            ended = 1;
        }
        pid_t r = waitpid(pid, status, ended ? WNOHANG : 0);
        if (r == pid)
            return 0;
        if (r < 0 && errno != EINTR)
            return -1;
        if (r == 0) {
            /* valgrind may take a while to die on SIGTERM */
            if (++waited == 100)
                kill(pid, SIGKILL);
            nanosleep(&tick, NULL);
        }
    }
}
