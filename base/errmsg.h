/* One-line error messages of the form "name: problem", for the file
 * parsers: the name (a path) always comes first, and line breaks never
 * reach the message. And an engine's error text, set where a failing entry
 * returns. */
#ifndef LB_BASE_ERRMSG_H
#define LB_BASE_ERRMSG_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

__attribute__((format(printf, 4, 5))) static inline void
errmsg_set(char *err, size_t err_len, const char *name, const char *fmt, ...)
{
    if (!err || !err_len)
        return;
    int n = snprintf(err, err_len, "%s: ", name);
    if (n < 0 || (size_t)n >= err_len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + n, err_len - (size_t)n, fmt, ap);
    va_end(ap);
    for (char *p = err; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
}

/* fmt into an engine's error text; -1, so that a failing entry is
 * `return errmsg_fail(e->err, sizeof e->err, ...)`. */
__attribute__((format(printf, 3, 4))) static inline int errmsg_fail(char *err, size_t err_len,
                                                                    const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
    return -1;
}

#endif
