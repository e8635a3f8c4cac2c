/* tools/profile.c — `tfvm profile`: runs a program several times after
 * warm-up runs, drops the outliers, and reports real/user/sys time, the
 * scheduler's counters, and where the firing time goes by opcode and by
 * instruction (from further runs in which the VM times every firing). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "tfvm.h"
#include "tfvm_debug.h"
#include "tools/debug.h"
#include "tools/opts.h"
#include "tools/profile.h"

const char *const cli_usage_profile =
    "usage: tfvm profile [options] FILE [ARG...] [NAME=VALUE...]\n"
    "Runs FILE's entry (FILE: .tfvm, .tfasm, .tfg, .onnx or .pb, all but .tfvm\n"
    "compiled in memory) with ARGs (given and parsed as for `tfvm run`: by\n"
    "position, then by name; options may also follow FILE) --warmup times, then\n"
    "--runs times measured, and prints the median real, user and sys time per\n"
    "run (runs slower than 1.5x the median are dropped as outliers), the counts\n"
    "of one run, and the opcodes and instructions that take the most firing\n"
    "time, measured over --runs further runs in which every firing is timed\n"
    "(that adds overhead: compare the shares, not the absolute times).\n"
    "  --runs N          measured runs (default 5)\n"
    "  --warmup N        runs before them, not measured (default 2)\n"
    "  --threads N       worker threads (default: one per core, or the TFVM_THREADS\n"
    "                    environment variable; 1 = deterministic)\n"
    "  --top N           instructions listed (default 10)\n"
    "  -e, --entry NAME  entry point (default: the first, or main)\n"
    "  --outputs A,B:1   for .pb: the tensors that become results (default: the\n"
    "                    outputs no node consumes)\n"
    "  -h, --help        show this help\n";

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double tv(struct timeval t) { return (double)t.tv_sec + (double)t.tv_usec * 1e-6; }

typedef struct sample {
    double real, user, sys;
} sample;

static int by_real(const void *a, const void *b)
{
    double x = ((const sample *)a)->real, y = ((const sample *)b)->real;
    return x < y ? -1 : x > y;
}

static bool parse_count(const char *s, long lo, long hi, long *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

/* One run; false (after printing why) if it fails. */
static bool run_once(tfvm_vm *vm, const tfvm_entry_info *e, const tfvm_value *args, sample *s)
{
    tfvm_value res[64];
    size_t nr = e->n_results < 64 ? e->n_results : 64;
    struct rusage r0, r1;
    getrusage(RUSAGE_SELF, &r0);
    double t0 = now();
    tfvm_status st = tfvm_run(vm, e->name, args, e->n_params, res, nr);
    double t1 = now();
    getrusage(RUSAGE_SELF, &r1);
    if (st != TFVM_OK) {
        cli_run_failed(vm);
        return false;
    }
    for (size_t k = 0; k < nr; k++)
        tfvm_value_release(&res[k]);
    if (s)
        *s = (sample){t1 - t0, tv(r1.ru_utime) - tv(r0.ru_utime), tv(r1.ru_stime) - tv(r0.ru_stime)};
    return true;
}

typedef struct row {
    uint32_t key; /* opcode or instruction */
    uint64_t count;
    double ns;
} row;

static int by_ns(const void *a, const void *b)
{
    double x = ((const row *)a)->ns, y = ((const row *)b)->ns;
    return x > y ? -1 : x < y;
}

int cli_profile(int argc, char **argv)
{
    enum { P_RUNS, P_WARMUP, P_THREADS, P_TOP, P_ENTRY, P_OUTPUTS };
    static const cli_opt opts[] = {
        [P_RUNS] = {NULL, "--runs", "needs a number"},
        [P_WARMUP] = {NULL, "--warmup", "needs a number"},
        [P_THREADS] = {NULL, "--threads", "needs an integer from 1 to 1024"},
        [P_TOP] = {NULL, "--top", "needs a number"},
        [P_ENTRY] = {"-e", "--entry", "needs an entry name"},
        [P_OUTPUTS] = {NULL, "--outputs", "needs a list of tensor names (a,b:1)"},
    };
    cli_args o;
    int rc = cli_parse("profile", cli_usage_profile, opts, (sizeof opts / sizeof opts[0]), CLI_FILE_ARGS, argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    long runs = 5, warmup = 2, top = 10;
    int threads = 0;
    const char *entry = o.val[P_ENTRY], *file = o.pos[0], *outputs = o.val[P_OUTPUTS];
    char **arg_text = o.pos + 1;
    size_t n_args = o.n_pos - 1;
    static const struct {
        int opt;
        long lo;
    } counts[] = {{P_RUNS, 1}, {P_WARMUP, 0}, {P_TOP, 1}};
    long *num[] = {&runs, &warmup, &top};
    for (size_t k = 0; k < (sizeof counts / sizeof counts[0]) && !rc; k++)
        if (o.val[counts[k].opt] && !parse_count(o.val[counts[k].opt], counts[k].lo, 1000000, num[k]))
            rc = cli_usage_error("profile", "%s needs a number", opts[counts[k].opt].lng);
    if (!rc) /* --threads, else TFVM_THREADS, as for run */
        rc = cli_threads("profile", o.val[P_THREADS], &threads);
    if (rc) {
        cli_args_free(&o);
        return rc;
    }
    rc = 1;

    tfvm_error err;
    tfvm_program *prog = NULL;
    tfvm_vm *vm = NULL;
    tfvm_value *args = NULL;
    const char **bound = NULL;
    sample *s = NULL;
    uint64_t *count = NULL;
    double *ns = NULL;
    row *rows = NULL;
    tfvm_inst_info *info = NULL;
    if (cli_load_program(file, entry, outputs, &prog, &err) != TFVM_OK) {
        rc = cli_load_failed(&err);
        goto out;
    }
    tfvm_entry_info e;
    int ei = entry ? tfvm_program_find_entry(prog, entry) : 0;
    if (ei < 0 || tfvm_program_entry(prog, (size_t)ei, &e) != TFVM_OK) {
        fprintf(stderr, "tfvm: %s: no entry point%s%s\n", file, entry ? " named " : "", entry ? entry : "");
        goto out;
    }
    args = calloc(e.n_params + 1, sizeof *args);
    bound = calloc(e.n_params + 1, sizeof *bound);
    if (!args || !bound)
        goto out;
    if (cli_bind_args(&e, arg_text, n_args, bound) != 0) {
        rc = 2;
        goto out;
    }
    for (size_t k = 0; k < e.n_params; k++)
        if (cli_parse_arg(&e, k, bound[k], &args[k]) != 0)
            goto out;
    tfvm_config cfg;
    tfvm_config_init(&cfg);
    cfg.threads = threads;
    cfg.deterministic = threads == 1;
    if (tfvm_vm_new(prog, &cfg, &vm) != TFVM_OK) {
        fprintf(stderr, "tfvm: cannot create the VM\n");
        goto out;
    }

    /* measured runs */
    s = calloc((size_t)runs, sizeof *s);
    if (!s)
        goto out;
    for (long k = 0; k < warmup; k++)
        if (!run_once(vm, &e, args, NULL))
            goto out;
    for (long k = 0; k < runs; k++)
        if (!run_once(vm, &e, args, &s[k]))
            goto out;
    tfvm_stats st;
    tfvm_vm_stats(vm, &st);
    qsort(s, (size_t)runs, sizeof *s, by_real);
    double median = s[runs / 2].real;
    long kept = 0;
    double user = 0, sys = 0;
    for (long k = 0; k < runs; k++)
        if (s[k].real <= 1.5 * median) {
            user += s[k].user;
            sys += s[k].sys;
            kept++;
        }
    printf("tfvm profile: %s", file);
    for (size_t k = 0; k < n_args; k++)
        printf(" %s", arg_text[k]);
    printf(" (entry %s), %u worker thread%s%s\n", e.name, st.workers, st.workers == 1 ? "" : "s",
           st.workers == 1 ? " (deterministic)" : "");
    printf("runs: %ld measured after %ld warm-up run%s; %ld dropped as outliers (slower than 1.5x the median)\n",
           runs, warmup, warmup == 1 ? "" : "s", runs - kept);
    /* nanoseconds shown for runs under a millisecond (a trivial run takes well under one) */
    int digits = median < 1e-3 ? 9 : 6;
    printf("  real %.*f s median (min %.*f, max %.*f)\n", digits, median, digits, s[0].real, digits, s[kept - 1].real);
    printf("  user %.6f s, sys %.6f s (mean of the kept runs)\n", user / (double)kept, sys / (double)kept);
    printf("one run: %llu firings, %llu tokens, %llu matches, %llu contexts (peak %llu); %.1f ns per firing\n",
           (unsigned long long)st.fired, (unsigned long long)st.tokens, (unsigned long long)st.matches,
           (unsigned long long)st.contexts_created, (unsigned long long)st.contexts_peak,
           st.fired ? median * 1e9 / (double)st.fired : 0.0);
    printf("scheduler: steals %llu, parks %llu, inline runs %llu, contexts shared %llu\n",
           (unsigned long long)st.steals, (unsigned long long)st.parks, (unsigned long long)st.inline_runs,
           (unsigned long long)st.shared);

    /* timed runs */
    if (tfvm_debug_profile(vm, true) != TFVM_OK) {
        fprintf(stderr, "tfvm: out of memory for the profile\n");
        goto out;
    }
    for (long k = 0; k < runs; k++)
        if (!run_once(vm, &e, args, NULL))
            goto out;
    uint32_t n = (uint32_t)tfvm_program_inst_count(prog);
    count = calloc((size_t)n + 1, sizeof *count);
    ns = calloc((size_t)n + 1, sizeof *ns);
    rows = calloc((size_t)n + 1, sizeof *rows);
    info = calloc((size_t)n + 1, sizeof *info);
    if (!count || !ns || !rows || !info)
        goto out;
    for (uint32_t i = 0; i < n; i++)
        tfvm_program_inst(prog, i, &info[i]);
    tfvm_debug_profile_read(vm, count, ns);
    double total = 0;
    for (uint32_t i = 0; i < n; i++)
        total += ns[i];
    if (total <= 0)
        total = 1;

    /* by opcode: each row keyed by the first instruction of its opcode */
    size_t m = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t j = 0;
        while (j < i && strcmp(info[j].op, info[i].op) != 0)
            j++;
        if (j < i)
            continue; /* counted with instruction j */
        row r = {i, 0, 0};
        for (uint32_t k = i; k < n; k++)
            if (strcmp(info[k].op, info[i].op) == 0) {
                r.count += count[k];
                r.ns += ns[k];
            }
        if (r.count)
            rows[m++] = r;
    }
    qsort(rows, m, sizeof *rows, by_ns);
    printf("\nby opcode (%ld timed runs; timing every firing adds overhead: compare shares):\n", runs);
    printf("  %-14s %14s %7s %10s\n", "opcode", "firings/run", "share", "ns/firing");
    for (size_t k = 0; k < m; k++)
        printf("  %-14s %14.0f %6.1f%% %10.1f\n", info[rows[k].key].op, (double)rows[k].count / (double)runs,
               100 * rows[k].ns / total, rows[k].ns / (double)rows[k].count);

    m = 0;
    for (uint32_t i = 0; i < n; i++)
        if (count[i])
            rows[m++] = (row){i, count[i], ns[i]};
    qsort(rows, m, sizeof *rows, by_ns);
    printf("\ntop %ld instructions:\n", top < (long)m ? top : (long)m);
    printf("  %-28s %-12s %14s %7s %10s  %s\n", "instruction", "opcode", "firings/run", "share", "ns/firing",
           "source");
    for (size_t k = 0; k < m && (long)k < top; k++) {
        const tfvm_inst_info *in = &info[rows[k].key];
        char label[160], where[256] = "-";
        snprintf(label, sizeof label, "%s.", in->region);
        size_t len = strlen(label);
        tfvm_inst_label(prog, rows[k].key, label + len, sizeof label - len);
        if (in->line)
            snprintf(where, sizeof where, "%u:%u", in->line, in->col);
        else if (in->origin) /* an imported model's node: name (op type) */
            snprintf(where, sizeof where, "%.200s (%.40s)", in->origin, in->origin_op ? in->origin_op : "?");
        printf("  %-28s %-12s %14.0f %6.1f%% %10.1f  %s\n", label, in->op,
               (double)rows[k].count / (double)runs, 100 * rows[k].ns / total, rows[k].ns / (double)rows[k].count,
               where);
    }
    rc = fflush(stdout) == 0 ? 0 : 1;
out:
    free(info);
    free(rows);
    free(ns);
    free(count);
    free(s);
    if (args)
        for (size_t k = 0; k < e.n_params; k++)
            tfvm_value_release(&args[k]);
    free(args);
    free(bound);
    tfvm_vm_free(vm);
    tfvm_program_free(prog);
    cli_args_free(&o);
    return rc;
}
