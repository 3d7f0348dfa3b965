/* SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and SIGALRM for the subcommands that wait on a child process
 * (plot runs gnuplot, count runs valgrind): the signal is noted, the child
 * is ended and reaped, the command removes its temporaries and exits with
 * 128 + the signal, as the main run does. Without this the child went on
 * after the bench had died, and its temporaries stayed. */
#ifndef LB_CHILDREN_H
#define LB_CHILDREN_H

#include <sys/types.h>

/* Installs the handlers (a wait or read is then interrupted, not resumed). */
void children_catch_signals(void);
/* The signal caught, or 0. */
int children_signal(void);
/* Waits for pid; when a signal has come (or comes while waiting), ends it
 * (SIGTERM, SIGKILL after 2 s) first. 0 with its status, or -1. */
int children_wait(pid_t pid, int *status);
/* Ends pid at once if a signal has come; for loops that read a child's
 * output before waiting. */
void children_end_if_signalled(pid_t pid);

#endif
