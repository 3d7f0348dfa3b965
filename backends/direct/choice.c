/* The choice among a precision's candidates (candidates.h): made once a
 * process, and again only when a test changes LENET_BENCH_DIRECT_ISA or
 * the precision's variable between two engines. */
#include "backends/direct/candidates.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/direct/fp32/direct.h"
#include "backends/direct/fp32/isa.h"

/* A table's choice and the environment it was made in */
typedef struct slot {
    const direct_candidates *table;
    int made, ok;
    char isa[64], asked[64];
    direct_choice choice;
    char refusal[320];
} slot;

static slot slots[2];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* 1 when row r runs here; else 0, the short reason and the whole one */
static int row_runs(const direct_candidate *r, int tiles,
                    const char *tiles_why, char *brief, size_t brief_len, char *why,
                    size_t why_len)
{
    if (!r->set) {
        snprintf(brief, brief_len, "no %s in this build", r->products);
        snprintf(why, why_len, "%s left out of this build (%s)", r->products,
                 r->missing ? r->missing : "not built");
        return 0;
    }
    if (r->runs && !r->runs(brief, brief_len, why, why_len))
        return 0;
    if (!r->isa && !tiles) { /* it runs on the fp32 tiles, which cannot run here */
        snprintf(brief, brief_len, "%s", tiles_why);
        snprintf(why, why_len, "%s", tiles_why);
        return 0;
    }
    return 1;
}

static double rate_of(const direct_candidate *r) { return r->rate ? r->rate() : 1.0; }

/* Appends text to buf (len bytes) after a separator when buf is not empty */
static void append(char *buf, size_t len, const char *sep, const char *text)
{
    size_t n = strlen(buf);
    if (!*text)
        return;
    for (const char *c = n ? sep : ""; *c && n + 1 < len; c++)
        buf[n++] = *c;
    for (const char *c = text; *c && n + 1 < len; c++)
        buf[n++] = *c;
    if (n < len)
        buf[n] = '\0';
}

static void choose(slot *s)
{
    const direct_candidates *t = s->table;
    char tiles_why[256] = "";
    /* the fp32 tiles are chosen either way: rows with no ISA of their own run on them */
    const int tiles = direct_choose(tiles_why, sizeof tiles_why) != NULL;
    char brief[192], why[256];
    s->ok = 0;
    s->refusal[0] = '\0';
    const char *asked = direct_candidate_asked(t);
    if (asked) {
        const direct_candidate *r = direct_candidate_named(t, asked);
        if (!r) {
            /* (the harness refuses such a value before it gets here) */
            direct_candidates_check(s->refusal, sizeof s->refusal);
            return;
        }
        if (!row_runs(r, tiles, tiles_why, brief, sizeof brief, why, sizeof why)) {
            snprintf(s->refusal, sizeof s->refusal, "%s=%s: %s", t->variable, asked, why);
            return;
        }
        s->choice.row = r;
        snprintf(s->choice.why, sizeof s->choice.why, "forced by %s=%s", t->variable, asked);
        s->ok = 1;
        return;
    }
    /* the fastest of those that run, a tie to the first listed */
    const direct_candidate *best = NULL;
    double best_rate = 0;
    char others[192] = "", refusals[320] = "";
    for (int i = 0; i < t->count; i++) {
        const direct_candidate *r = &t->rows[i];
        if (r->named_only)
            continue;
        if (!row_runs(r, tiles, tiles_why, brief, sizeof brief, why, sizeof why)) {
            append(others, sizeof others, "; ", brief);
            append(refusals, sizeof refusals, "; ", why);
            continue;
        }
        const double rate = rate_of(r);
        if (!best || rate > best_rate) {
            best = r;
            best_rate = rate;
        }
    }
    if (!best) {
        snprintf(s->refusal, sizeof s->refusal, "%s", refusals);
        for (int i = 0; i < t->count; i++)
            if (t->rows[i].named_only && t->rows[i].set) {
                char hint[160];
                snprintf(hint, sizeof hint, "%s=%s runs the %s", t->variable, t->rows[i].name,
                         t->rows[i].products);
                append(s->refusal, sizeof s->refusal, "; ", hint);
            }
        return;
    }
    /* why: its measured rate, or what the others measured, or why they do not run */
    char measured[192] = "";
    for (int i = 0; i < t->count; i++) {
        const direct_candidate *r = &t->rows[i];
        if (r == best || r->named_only || !r->rate ||
            !row_runs(r, tiles, tiles_why, brief, sizeof brief, why, sizeof why))
            continue;
        char line[128];
        snprintf(line, sizeof line, "%s measured at %.2fx the FMA rate here", r->products,
                 rate_of(r));
        append(measured, sizeof measured, "; ", line);
    }
    if (best->rate)
        snprintf(s->choice.why, sizeof s->choice.why, "measured %.2fx the FMA rate here",
                 best_rate);
    else if (measured[0] || others[0]) {
        snprintf(s->choice.why, sizeof s->choice.why, "%s", measured);
        append(s->choice.why, sizeof s->choice.why, "; ", others);
    } else
        snprintf(s->choice.why, sizeof s->choice.why, "the one that runs here");
    s->choice.row = best;
    s->ok = 1;
}

const direct_choice *direct_candidates_choose(const direct_candidates *t, char *why,
                                              size_t why_len)
{
    const char *isa = direct_isa_forced(), *asked = direct_candidate_asked(t);
    pthread_mutex_lock(&lock);
    slot *s = NULL;
    for (size_t i = 0; i < sizeof slots / sizeof slots[0] && !s; i++)
        if (slots[i].table == t || !slots[i].table)
            s = &slots[i];
    s->table = t;
    if (!s->made || strcmp(s->isa, isa ? isa : "") != 0 ||
        strcmp(s->asked, asked ? asked : "") != 0) {
        snprintf(s->isa, sizeof s->isa, "%s", isa ? isa : "");
        snprintf(s->asked, sizeof s->asked, "%s", asked ? asked : "");
        choose(s);
        s->made = 1;
    }
    const direct_choice *c = s->ok ? &s->choice : NULL;
    if (!c)
        snprintf(why, why_len, "%s", s->refusal);
    pthread_mutex_unlock(&lock);
    return c;
}

const direct_candidate *direct_candidate_of_set(const direct_candidates *t,
                                                const struct chwn_products_f32 *set)
{
    for (int i = 0; set && i < t->count; i++)
        if (t->rows[i].set == set)
            return &t->rows[i];
    return NULL;
}

void direct_candidates_list(const direct_candidates *t, char *buf, size_t len)
{
    char tiles_why[256] = "", brief[192], why[256], line[320];
    char refusal[320];
    const direct_choice *c = direct_candidates_choose(t, refusal, sizeof refusal);
    const int tiles = direct_choose(tiles_why, sizeof tiles_why) != NULL;
    buf[0] = '\0';
    for (int i = 0; i < t->count; i++) {
        const direct_candidate *r = &t->rows[i];
        if (c && c->row == r)
            snprintf(line, sizeof line, "%s (chosen: %s)", r->name, c->why);
        else if (!row_runs(r, tiles, tiles_why, brief, sizeof brief, why, sizeof why))
            snprintf(line, sizeof line, "%s (not here: %s)", r->name, brief);
        else if (r->named_only)
            snprintf(line, sizeof line, "%s (only when named)", r->name);
        else if (r->rate)
            snprintf(line, sizeof line, "%s (%.2fx the FMA rate here)", r->name, rate_of(r));
        else
            snprintf(line, sizeof line, "%s", r->name);
        append(buf, len, ", ", line);
    }
}
