/* A framework peer's child process and its channel (channel.h). */
#include "backends/peer/channel.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backends/peer/peer.h"
#include "base/clock.h"
#include "base/number.h"

extern char **environ;

int peer_timeout_read(const char *s, double *out)
{
    double v;
    if (number_read(s, &v) != 0 || !(v >= PEER_TIMEOUT_MIN_S && v <= PEER_TIMEOUT_MAX_S))
        return -1;
    *out = v;
    return 0;
}

/* LENET_BENCH_PEER_TIMEOUT's seconds, 0 when unset, -1 when it is no
 * number of seconds in range. */
static double timeout_setting(void)
{
    const char *env = getenv("LENET_BENCH_PEER_TIMEOUT");
    double v;
    if (!env)
        return 0;
    return peer_timeout_read(env, &v) == 0 ? v : -1;
}

double base_timeout(void)
{
    double v = timeout_setting();
    return v > 0 ? v : DEFAULT_TIMEOUT_S;
}

int timeout_setting_ok(char *why, size_t why_len)
{
    if (timeout_setting() >= 0)
        return 0;
    snprintf(why, why_len, "LENET_BENCH_PEER_TIMEOUT=%.40s is not a number of seconds from %g to %g",
             getenv("LENET_BENCH_PEER_TIMEOUT"), PEER_TIMEOUT_MIN_S, PEER_TIMEOUT_MAX_S);
    return -1;
}

/* An executable named like execvp would find it, as an absolute path (so
 * that the child needs nothing but execv after fork). */
int find_program(const char *name, char *out, size_t len)
{
    if (strchr(name, '/')) {
        snprintf(out, len, "%s", name);
        return access(out, X_OK) == 0 ? 0 : -1;
    }
    const char *p = getenv("PATH");
    while (p && *p) {
        size_t n = strcspn(p, ":");
        snprintf(out, len, "%.*s/%s", (int)n, n ? p : ".", name);
        struct stat st;
        if (stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0)
            return 0;
        p += n + (p[n] == ':');
    }
    return -1;
}

/* Every catchable signal at its default disposition and none blocked, in
 * a child between fork and exec (async-signal-safe calls only). */
static void default_signals(void)
{
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            sigaction(sig, &dfl, NULL); /* (the real-time ones glibc keeps fail: fine) */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

/* The guard of the peer's process group: a forked copy of this process in
 * that group, holding nothing but the read end of a pipe whose write end
 * only ./bench holds. When ./bench ends however it ends (SIGKILL too) the
 * pipe reads end-of-file and the guard kills the whole group: the
 * interpreter and whatever a wrapper that does not exec started, which
 * PR_SET_PDEATHSIG (the direct child's alone) does not reach. channel_reap
 * kills it with the group. Returns its pid (0 when it could not start: the
 * group is then stopped by channel_reap alone) and the pipe's write end. */
static pid_t start_guard(pid_t group, int *write_end)
{
    int gp[2];
    *write_end = -1;
    if (pipe2(gp, O_CLOEXEC) != 0)
        return 0;
    pid_t pid = fork();
    if (pid < 0) {
        close(gp[0]), close(gp[1]);
        return 0;
    }
    if (pid == 0) {
        /* only async-signal-safe calls: it never execs */
        setpgid(0, group);
        default_signals();
        struct sigaction ign = {.sa_handler = SIG_IGN};
        static const int ignored[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1, SIGUSR2};
        for (size_t i = 0; i < sizeof ignored / sizeof *ignored; i++)
            sigaction(ignored[i], &ign, NULL);
        if (dup2(gp[0], STDIN_FILENO) < 0)
            _exit(0);
        /* nothing else open: another channel's socket must see its end */
        if (syscall(SYS_close_range, 1u, ~0u, 0u) != 0)
            for (int fd = 1; fd < 65536; fd++)
                close(fd);
        for (;;) {
            char b;
            ssize_t n = read(STDIN_FILENO, &b, 1);
            if (n < 0 && errno == EINTR)
                continue;
            if (n == 0)
                kill(-group, SIGKILL); /* ./bench is gone: so is its peer */
            _exit(0);
        }
    }
    setpgid(pid, group); /* (either side may come first) */
    close(gp[0]);
    *write_end = gp[1];
    return pid;
}

/* Stops the guard before the group's leader is reaped (whose pid may then
 * be another's). */
static void stop_guard(channel *c)
{
    if (c->guard > 0) {
        kill(c->guard, SIGKILL);
        while (waitpid(c->guard, NULL, 0) < 0 && errno == EINTR)
            ;
        c->guard = 0;
    }
    if (c->guard_fd >= 0)
        close(c->guard_fd);
    c->guard_fd = -1;
}

/* Starts argv[0] (an absolute path) with its stdin and stdout on one end
 * of a socket pair and its stderr on a pipe. */
int channel_start(channel *c, char *const argv[], char *const envp[], char *err,
                  size_t err_len)
{
    memset(c, 0, sizeof *c);
    c->sock = c->err = c->guard_fd = -1;
    c->in = malloc(LINE_MAX_LEN);
    int sv[2], ep[2];
    if (!c->in) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        snprintf(err, err_len, "socketpair: %s", strerror(errno));
        free(c->in);
        return -1;
    }
    if (pipe2(ep, O_CLOEXEC) != 0) {
        snprintf(err, err_len, "pipe: %s", strerror(errno));
        close(sv[0]), close(sv[1]), free(c->in);
        return -1;
    }
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, err_len, "fork: %s", strerror(errno));
        close(sv[0]), close(sv[1]), close(ep[0]), close(ep[1]), free(c->in);
        return -1;
    }
    if (pid == 0) {
        /* only async-signal-safe calls from here to exec */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        /* a group of its own: an interpreter wrapper that does not exec
         * leaves its own child, which the group's kill takes too */
        setpgid(0, 0);
        /* the framework's runtime starts as any program does: every signal
         * at its default, none blocked (what ./bench ignores or catches is
         * not handed on; the group is out of reach of the terminal's
         * signals, and ./bench stops it) */
        default_signals();
        dup2(sv[1], STDIN_FILENO);
        dup2(sv[1], STDOUT_FILENO);
        dup2(ep[1], STDERR_FILENO);
        execve(argv[0], argv, envp ? envp : environ);
        static const char msg[] = "cannot execute the interpreter\n";
        if (write(STDERR_FILENO, msg, sizeof msg - 1) < 0)
            _exit(127);
        _exit(127);
    }
    setpgid(pid, pid); /* (either side may come first) */
    close(sv[1]);
    close(ep[1]);
    c->pid = pid;
    c->guard = start_guard(pid, &c->guard_fd);
    c->sock = sv[0];
    c->err = ep[0];
    fcntl(c->sock, F_SETFL, fcntl(c->sock, F_GETFL) | O_NONBLOCK);
    fcntl(c->err, F_SETFL, fcntl(c->err, F_GETFL) | O_NONBLOCK);
    return 0;
}

/* Keeps the last TAIL_LEN bytes of the child's stderr; 0 at its end. */
static int drain_stderr(channel *c)
{
    char buf[4096];
    for (;;) {
        ssize_t n = read(c->err, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return 1; /* EAGAIN: nothing more now */
        if (n == 0) {
            close(c->err);
            c->err = -1;
            return 0;
        }
        size_t got = (size_t)n;
        if (got >= TAIL_LEN) {
            memcpy(c->tail, buf + got - TAIL_LEN, TAIL_LEN);
            c->tail_len = TAIL_LEN;
            continue;
        }
        size_t keep = c->tail_len + got > TAIL_LEN ? TAIL_LEN - got : c->tail_len;
        memmove(c->tail, c->tail + c->tail_len - keep, keep);
        memcpy(c->tail + keep, buf, got);
        c->tail_len = keep + got;
    }
}

/* The last non-empty line the child wrote to stderr, or "". */
static void last_stderr_line(const channel *c, char *out, size_t len)
{
    size_t end = c->tail_len;
    while (end > 0 && (c->tail[end - 1] == '\n' || c->tail[end - 1] == '\r' ||
                       c->tail[end - 1] == ' '))
        end--;
    size_t start = end;
    while (start > 0 && c->tail[start - 1] != '\n')
        start--;
    size_t n = end - start, o = 0;
    for (size_t i = 0; i < n && o + 1 < len; i++) {
        unsigned char ch = (unsigned char)c->tail[start + i];
        out[o++] = ch < 0x20 || ch == 0x7f ? ' ' : (char)ch;
    }
    if (len)
        out[o] = 0;
}

/* Reaps the child, killing it first when it has not exited within
 * wait_s seconds. */
void channel_reap(channel *c, double wait_s)
{
    if (c->pid <= 0)
        return;
    double until = now_seconds() + wait_s;
    for (;;) {
        /* ended, not yet reaped: its pid (the group's id) cannot be taken
         * by another process until it is */
        siginfo_t info = {0};
        int r = waitid(P_PID, (id_t)c->pid, &info, WEXITED | WNOHANG | WNOWAIT);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            stop_guard(c);
            break; /* reaped elsewhere: its group id may be another's now */
        }
        if (info.si_pid == c->pid) {
            kill(-c->pid, SIGKILL); /* what its group still holds */
            stop_guard(c);
            while (waitpid(c->pid, &c->status, 0) < 0 && errno == EINTR)
                ;
            break;
        }
        if (now_seconds() >= until) {
            kill(-c->pid, SIGKILL);
            kill(c->pid, SIGKILL);
            stop_guard(c);
            while (waitpid(c->pid, &c->status, 0) < 0 && errno == EINTR)
                ;
            break;
        }
        if (c->err >= 0)
            drain_stderr(c);
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    c->pid = 0;
    if (c->err >= 0)
        drain_stderr(c);
}

void channel_close(channel *c, double wait_s)
{
    if (c->sock >= 0)
        shutdown(c->sock, SHUT_WR); /* end of input: the child exits */
    channel_reap(c, wait_s);
    if (c->sock >= 0)
        close(c->sock);
    if (c->err >= 0)
        close(c->err);
    c->sock = c->err = -1;
    free(c->in);
    c->in = NULL;
}

/* How the child ended, with its last stderr line. */
void describe_exit(channel *c, char *out, size_t len)
{
    channel_reap(c, 2.0);
    char last[300];
    last_stderr_line(c, last, sizeof last);
    int n;
    if (WIFEXITED(c->status))
        n = snprintf(out, len, "exited with status %d", WEXITSTATUS(c->status));
    else if (WIFSIGNALED(c->status))
        n = snprintf(out, len, "was killed by signal %d", WTERMSIG(c->status));
    else
        n = snprintf(out, len, "ended");
    if (last[0] && n > 0 && (size_t)n < len)
        snprintf(out + n, len - n, ": %s", last);
}

/* Waits until the socket is ready for `events`, draining stderr meanwhile.
 * A signal (the run is stopping) leaves the call GRACE_AFTER_SIGNAL_S. */
static wait_result channel_wait(channel *c, short events, double *deadline)
{
    for (;;) {
        double left = *deadline - now_seconds();
        if (left <= 0)
            return TIMED_OUT;
        struct pollfd fds[2] = {{c->sock, events, 0}, {c->err, POLLIN, 0}};
        int ms = left > 1e6 ? 1000000000 : (int)(left * 1000) + 1;
        int r = poll(fds, c->err >= 0 ? 2 : 1, ms);
        if (r < 0 && errno == EINTR) {
            double base = base_timeout();
            double grace = now_seconds() + (base < GRACE_AFTER_SIGNAL_S ? base : GRACE_AFTER_SIGNAL_S);
            if (grace < *deadline)
                *deadline = grace;
            c->signalled = 1;
            continue;
        }
        if (r < 0)
            return BROKEN;
        if (c->err >= 0 && fds[1].revents)
            drain_stderr(c);
        if (fds[0].revents & events)
            return READY;
        if (fds[0].revents & (POLLHUP | POLLERR | POLLNVAL))
            return CLOSED;
    }
}

wait_result channel_send(channel *c, const void *data, size_t len, double *deadline)
{
    const char *p = data;
    while (len > 0) {
        ssize_t n = send(c->sock, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            p += n, len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            wait_result w = channel_wait(c, POLLOUT, deadline);
            if (w != READY)
                return w;
            continue;
        }
        return CLOSED; /* EPIPE, ECONNRESET: the child is gone */
    }
    return READY;
}

/* Receives up to len (> 0) bytes into dst, waiting until some arrive or
 * the deadline passes; *got: how many came. */
static wait_result channel_recv(channel *c, void *dst, size_t len, size_t *got, double *deadline)
{
    for (;;) {
        ssize_t n = recv(c->sock, dst, len, MSG_DONTWAIT);
        if (n > 0) {
            *got = (size_t)n;
            return READY;
        }
        if (n == 0)
            return CLOSED;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return CLOSED;
        wait_result w = channel_wait(c, POLLIN, deadline);
        if (w != READY)
            return w;
    }
}

/* Reads more answer bytes into c->in. */
static wait_result channel_fill(channel *c, double *deadline)
{
    size_t got = 0;
    wait_result w = channel_recv(c, c->in + c->in_len, LINE_MAX_LEN - c->in_len, &got, deadline);
    c->in_len += got;
    return w;
}

/* One answer line, without its newline. BROKEN: longer than LINE_MAX_LEN. */
wait_result channel_line(channel *c, char *line, size_t len, double *deadline)
{
    for (;;) {
        char *nl = memchr(c->in, '\n', c->in_len);
        if (nl) {
            size_t n = (size_t)(nl - c->in);
            snprintf(line, len, "%.*s", (int)n, c->in);
            memmove(c->in, nl + 1, c->in_len - n - 1);
            c->in_len -= n + 1;
            return READY;
        }
        if (c->in_len == LINE_MAX_LEN) {
            snprintf(line, len, "%.*s", (int)c->in_len, c->in);
            return BROKEN;
        }
        wait_result w = channel_fill(c, deadline);
        if (w != READY) {
            snprintf(line, len, "%.*s", (int)c->in_len, c->in);
            return w;
        }
    }
}

wait_result channel_bytes(channel *c, void *dst, size_t len, double *deadline)
{
    char *out = dst;
    size_t have = c->in_len < len ? c->in_len : len;
    memcpy(out, c->in, have);
    memmove(c->in, c->in + have, c->in_len - have);
    c->in_len -= have;
    while (have < len) {
        size_t got = 0;
        wait_result w = channel_recv(c, out + have, len - have, &got, deadline);
        if (w != READY)
            return w;
        have += got;
    }
    return READY;
}
