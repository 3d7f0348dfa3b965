/* The child process of a framework peer and its channel: starting it
 * (fork, exec, its stdin and stdout on a socket pair, its stderr on a
 * pipe, PR_SET_PDEATHSIG, every signal at its default, in a process
 * group of its own that a guard process kills when ./bench ends, even by
 * SIGKILL), sending and
 * receiving against a deadline, the answer lines and payloads of the
 * protocol, and reaping it with how it ended. A signal during a wait (the
 * run is stopping) shortens the deadline to GRACE_AFTER_SIGNAL_S. */
#ifndef LB_PEER_CHANNEL_H
#define LB_PEER_CHANNEL_H

#include <stddef.h>
#include <sys/types.h>

/* Seconds every answer may take besides its allowance
 * (LENET_BENCH_PEER_TIMEOUT, else this). */
#define DEFAULT_TIMEOUT_S 120.0
/* after a signal (the run is stopping) the call in flight gets this long,
 * or the base timeout when that is shorter */
#define GRACE_AFTER_SIGNAL_S 10.0
/* how long a child told to end may take before it is killed */
#define EXIT_WAIT_S 5.0

enum { LINE_MAX_LEN = 65536, TAIL_LEN = 1024 };

typedef struct channel {
    pid_t pid; /* 0 once reaped */
    int sock;  /* commands out, answers in */
    int err;   /* the child's stderr, -1 at its end */
    char *in;  /* answers read but not consumed */
    size_t in_len;
    char tail[TAIL_LEN]; /* the end of its stderr */
    size_t tail_len;
    int status;    /* waitpid status once reaped */
    int signalled; /* a signal came during a wait (the run is stopping) */
    pid_t guard;    /* kills the group when ./bench ends (channel.c), 0: none */
    int guard_fd;   /* its pipe's write end, -1: none */
} channel;

typedef enum wait_result { READY, TIMED_OUT, CLOSED, BROKEN } wait_result;

/* LENET_BENCH_PEER_TIMEOUT when it is a number of seconds in its range
 * (peer_timeout_read, peer.h), else DEFAULT_TIMEOUT_S. */
double base_timeout(void);
/* 0 when LENET_BENCH_PEER_TIMEOUT is unset or such a number; -1 with why. */
int timeout_setting_ok(char *why, size_t why_len);
/* An executable named like execvp would find it, as an absolute path in
 * out: 0, or -1 when there is none. */
int find_program(const char *name, char *out, size_t len);
/* Starts argv[0] (an absolute path) with its stdin and stdout on one end
 * of a socket pair and its stderr on a pipe, in the environment envp
 * (NULL: this process's), in a process group of its own: 0, or -1 with
 * why in err. */
int channel_start(channel *c, char *const argv[], char *const envp[], char *err,
                  size_t err_len);
/* Reaps the child, killing it first when it has not exited within
 * wait_s seconds; what its process group still holds (an interpreter
 * wrapper's own child) is killed with it. */
void channel_reap(channel *c, double wait_s);
/* Ends the child's input, reaps it (channel_reap) and frees the channel. */
void channel_close(channel *c, double wait_s);
/* How the child ended, with its last stderr line ("exited with status 1:
 * ..."); reaps it. */
void describe_exit(channel *c, char *out, size_t len);
/* Sends len bytes before *deadline. */
wait_result channel_send(channel *c, const void *data, size_t len, double *deadline);
/* One answer line, without its newline (what came when not READY).
 * BROKEN: longer than LINE_MAX_LEN. */
wait_result channel_line(channel *c, char *line, size_t len, double *deadline);
/* Exactly len bytes of payload into dst. */
wait_result channel_bytes(channel *c, void *dst, size_t len, double *deadline);

#endif
