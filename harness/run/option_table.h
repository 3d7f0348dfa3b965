/* The options of ./bench and of its subcommands as a table: each entry
 * names a flag, what it does with its value and where the value goes, and
 * one scan of argv reads them all (getopt_long set up and its errors worded
 * by options.h), so every command reads its flags the same way. */
#ifndef LB_OPTION_TABLE_H
#define LB_OPTION_TABLE_H

#include <getopt.h> /* optind, the first operand after a scan */
#include <stdio.h>

/* What an option does; the first four take no value. */
typedef enum option_action {
    OPTION_SET,    /* *(int *)to = 1 */
    OPTION_CLEAR,  /* *(int *)to = 0 */
    OPTION_HELP,   /* print(stdout), and the scan ends: OPTIONS_DONE */
    OPTION_DO,     /* read(flag, NULL, entry): the command's own action (--list) */
    OPTION_TEXT,   /* *(const char **)to = the value, as written */
    OPTION_INT,    /* a whole number in [lo, hi] into *(int *)to (option_int) */
    OPTION_NUMBER, /* a number in its range into *(double *)to (option_real) */
    OPTION_READ,   /* read(flag, value, entry): a value the command reads itself */
} option_action;

typedef struct option_entry option_entry;

/* Reads one option: `flag` is "--name", `value` NULL for OPTION_DO. Returns
 * 0 to go on, 2 after writing a one-line error, or OPTIONS_DONE when the
 * option has done the command's work (--list). */
typedef int option_reader(const char *flag, const char *value, const option_entry *e);

struct option_entry {
    const char *name;     /* the flag without its "--"; NULL ends a table */
    option_action action;
    void *to;             /* where the value goes */
    double lo, hi;        /* the range of OPTION_INT and OPTION_NUMBER (a reader may use it) */
    unsigned how;         /* OPTION_NUMBER: NUMBER_ABOVE_LO, NUMBER_IN_FLOAT (options.h) */
    option_reader *read;  /* OPTION_DO, OPTION_READ */
    void (*print)(FILE *f); /* OPTION_HELP: the usage */
};

/* What a reader returns to end the scan with the command's work done. */
#define OPTIONS_DONE 1

typedef struct option_command {
    const char *subcommand;      /* "compare", ...; NULL for ./bench itself */
    const option_entry *entries; /* in the order an unknown option's error lists them */
    /* refuse a value given as the next argument that starts with "--" (a
     * forgotten value: `--out --epochs 3`); --flag=--value still passes */
    int values_are_not_options;
} option_command;

/* Reads argv's options from argv[1] on, in order (getopt_long moves the
 * operands after them; optind is then the first operand). Returns 0 when
 * all were read, 2 after a one-line error on stderr (an unknown option, a
 * missing or bad value), or what a reader returned to stop. */
int options_read(const option_command *cmd, int argc, char **argv);

/* A subcommand's options, read as options_read does: -1 to go on with
 * the command, else the status it exits with (0 when a reader did its
 * work, --help; 2 after an error). */
int subcommand_options(const char *subcommand, const option_entry *entries, int argc,
                       char **argv);

#endif
