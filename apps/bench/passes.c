/*
 * passes.c - which points each pass of cabrank-bench's sweep measures (passes.h). A claim's
 * spread comes from its points measured again in the same run; the repetitions alternate the
 * configurations' order so that a drift of the machine reaches both sides of a claim alike.
 * Called by main.c on the program's thread; no state.
 */
#include "passes.h"

#include "report.h"

#include <limits.h>
#include <string.h>

bool bench_pass_measures(const struct bench_options *o, int pass, const char *w, unsigned c)
{
    unsigned lo = UINT_MAX;
    unsigned hi = 0;

    if (pass == 0)
        return true;
    if (!bench_claims_use_workload(w))
        return false;
    /* claims.c compares at the lowest or the highest concurrency both sides have. */
    for (int i = 0; i < o->nconc; i++) {
        lo = o->conc[i] < lo ? o->conc[i] : lo;
        hi = o->conc[i] > hi ? o->conc[i] : hi;
    }
    return c == 0 || c == lo || c == hi;
}

int bench_pass_config(const struct bench_options *o, int pass, int i)
{
    int k = pass % 2 ? o->nconfigs - 1 - i : i;

    return pass == 0 || bench_claims_use_config(o->configs[k]) ? k : -1;
}

int bench_pass_points(const struct bench_options *o, int pass, const char *w)
{
    int n = 0;

    if (!bench_pass_measures(o, pass, w, 0))
        return 0;
    if (strcmp(w, "interval") == 0)
        return 1;
    if (strcmp(w, "line-open") == 0)
        return o->nrates;
    for (int i = 0; i < o->nconc; i++)
        n += bench_pass_measures(o, pass, w, o->conc[i]);
    return n;
}
