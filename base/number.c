/* The grammar of every number the program reads (number.h). */
#include "base/number.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DIGITS "0123456789"

static int written_as_whole(const char *s)
{
    s += *s == '-';
    size_t digits = strspn(s, DIGITS);
    return digits > 0 && !s[digits];
}

static int written_as_number(const char *s)
{
    s += *s == '-';
    size_t i = strspn(s, DIGITS), digits = i;
    if (s[i] == '.') {
        size_t fraction = strspn(s + i + 1, DIGITS);
        digits += fraction;
        i += 1 + fraction;
    }
    if (!digits)
        return 0;
    if (s[i] == 'e' || s[i] == 'E') {
        i++;
        i += s[i] == '+' || s[i] == '-';
        size_t exponent = strspn(s + i, DIGITS);
        if (!exponent)
            return 0;
        i += exponent;
    }
    return !s[i];
}

int number_read_whole(const char *s, long long *out)
{
    if (!written_as_whole(s))
        return -1;
    errno = 0;
    long long v = strtoll(s, NULL, 10);
    if (errno)
        return -2;
    *out = v;
    return 0;
}

int number_read(const char *s, double *out)
{
    if (!written_as_number(s))
        return -1;
    errno = 0;
    double v = strtod(s, NULL);
    if (errno == ERANGE && isinf(v))
        return -2; /* too large; too small is the nearest double, 0 at worst */
    *out = v;
    return 0;
}
