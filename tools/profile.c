/* tools/profile.c — `tfvm profile`: runs a program several times after
 * warm-up runs, drops the outliers, and reports real/user/sys time with
 * percentiles, the scheduler's counters, and where the firing time goes by
 * opcode and by instruction (from further runs in which the VM times and
 * records every firing), as text or JSON; --trace writes one more run's
 * firings as a Chrome-trace timeline (Perfetto, chrome://tracing). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "tfvm.h"
#include "tfvm_debug.h"
#include "tools/buf.h"
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
    "(that adds overhead: compare the shares, not the absolute times), with the\n"
    "50th, 90th and 99th percentiles of a run's time and of a firing's per opcode.\n"
    "Counts include dead firings (dead inputs, no work: docs/isa.md), so the\n"
    "instructions of a loop's body fire once more per loop than it iterates.\n"
    "  --runs N          measured runs (default 5)\n"
    "  --warmup N        runs before them, not measured (default 2)\n"
    "  --threads N       worker threads (default: one per core, or the TFVM_THREADS\n"
    "                    environment variable; 1 = deterministic)\n"
    "  --top N           instructions listed (default 10)\n"
    "  --json            print the report as one JSON object instead of text\n"
    "  --trace FILE      also write one more timed run's firings to FILE as a\n"
    "                    Chrome-trace timeline (JSON; open it in ui.perfetto.dev\n"
    "                    or chrome://tracing): a track per worker thread, each\n"
    "                    firing with its instruction, opcode, source, tag and\n"
    "                    input types; at most 1000000 firings per worker\n"
    "  --device DEV      where tensor work runs: cpu (default), cuda or auto (or\n"
    "                    the TFVM_DEVICE environment variable), as for `tfvm run`\n"
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

/* Firings each worker records: in the timed runs (for the percentiles of a
 * firing's time) and in the --trace run. */
enum { SAMPLE_FIRINGS = 200000, TRACE_FIRINGS = 1000000 };

typedef struct row {
    uint32_t key; /* opcode (its first instruction) or instruction */
    uint64_t count;
    double ns;
    double pct[3]; /* opcodes: p50, p90, p99 of a firing's ns */
} row;

static const double pcts[3] = {50, 90, 99};

/* Everything one profile measures, for the text or the JSON report. */
typedef struct prof {
    const char *file;
    char **arg_text;
    size_t n_args;
    tfvm_program *prog;
    tfvm_vm *vm;
    tfvm_entry_info e;
    tfvm_value *args;
    long runs, warmup, top;
    sample *s;                /* the measured runs, by real time */
    double pct_real[3];       /* p50, p90, p99 of their real time */
    long kept;                /* not outliers */
    double user, sys;         /* sums over the kept runs */
    tfvm_stats st;            /* of one run */
    uint32_t n;               /* instructions */
    tfvm_inst_info *info;
    uint64_t *count;
    double *ns, total;
    uint32_t *op_key;         /* per instruction: the first instruction of its opcode */
    row *ops, *insts;
    size_t n_ops, n_insts;
    uint64_t sampled, dropped; /* firings recorded for the percentiles, and not */
} prof;

static int by_ns(const void *a, const void *b)
{
    double x = ((const row *)a)->ns, y = ((const row *)b)->ns;
    return x > y ? -1 : x < y;
}

/* Nearest rank: the smallest value with at least p% of them at or below it. */
static double percentile(const double *sorted, size_t n, double p)
{
    if (!n)
        return 0;
    size_t rank = (size_t)ceil(p / 100 * (double)n);
    return sorted[rank ? rank - 1 : 0];
}

/* The source of instruction i as the profile names it: its position
 * ("12:5"), an imported model's node ("/m/encoder/Cast_1 (Cast)"), or "-".
 * Every report and the trace take it from here. */
static const char *inst_source(const prof *p, uint32_t i, char *buf, size_t size)
{
    const tfvm_inst_info *in = &p->info[i];
    if (in->line)
        snprintf(buf, size, "%u:%u", in->line, in->col);
    else if (in->origin)
        snprintf(buf, size, "%.200s (%.40s)", in->origin, in->origin_op ? in->origin_op : "?");
    else
        snprintf(buf, size, "-");
    return buf;
}

/* "main.fused_matmul_0": the region, then the instruction's label. */
static const char *inst_name(const prof *p, uint32_t i, char *buf, size_t size)
{
    int len = snprintf(buf, size, "%s.", p->info[i].region);
    if (len >= 0 && (size_t)len < size)
        tfvm_inst_label(p->prog, i, buf + len, size - (size_t)len);
    return buf;
}

/* ---- Measuring ------------------------------------------------------------------ */

static bool measure(prof *p)
{
    for (long k = 0; k < p->warmup; k++)
        if (!run_once(p->vm, &p->e, p->args, NULL))
            return false;
    for (long k = 0; k < p->runs; k++)
        if (!run_once(p->vm, &p->e, p->args, &p->s[k]))
            return false;
    tfvm_vm_stats(p->vm, &p->st);
    qsort(p->s, (size_t)p->runs, sizeof *p->s, by_real);
    double *real = malloc((size_t)p->runs * sizeof *real);
    if (!real)
        return false;
    for (long k = 0; k < p->runs; k++)
        real[k] = p->s[k].real;
    for (int k = 0; k < 3; k++)
        p->pct_real[k] = percentile(real, (size_t)p->runs, pcts[k]);
    free(real);
    double median = p->pct_real[0] = p->s[p->runs / 2].real; /* p50: the median, for an even count too */
    for (long k = 0; k < p->runs; k++)
        if (p->s[k].real <= 1.5 * median) {
            p->user += p->s[k].user;
            p->sys += p->s[k].sys;
            p->kept++;
        }
    return true;
}

/* A recorded firing's time, keyed for sorting by opcode, then time. */
typedef struct firing {
    uint32_t key;
    double ns;
} firing;

typedef struct firings {
    const prof *p;
    firing *f;
    size_t n;
} firings;

static void collect(void *ud, const tfvm_debug_trace_ev *ev)
{
    firings *fs = ud;
    fs->f[fs->n++] = (firing){fs->p->op_key[ev->inst], ev->dur_ns};
}

static int by_key_ns(const void *a, const void *b)
{
    const firing *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->ns < y->ns ? -1 : x->ns > y->ns;
}

/* p50/p90/p99 of each opcode row, from the firings the timed runs recorded. */
static bool op_percentiles(prof *p)
{
    size_t n = tfvm_debug_trace_read(p->vm, NULL, NULL, &p->dropped);
    firings fs = {p, calloc(n + 1, sizeof *fs.f), 0};
    double *ns = calloc(n + 1, sizeof *ns);
    if (!fs.f || !ns) {
        free(fs.f);
        free(ns);
        return false;
    }
    tfvm_debug_trace_read(p->vm, collect, &fs, NULL);
    p->sampled = fs.n;
    qsort(fs.f, fs.n, sizeof *fs.f, by_key_ns);
    for (size_t r = 0; r < p->n_ops; r++) {
        size_t m = 0;
        for (size_t k = 0; k < fs.n; k++)
            if (fs.f[k].key == p->ops[r].key)
                ns[m++] = fs.f[k].ns;
        for (int k = 0; k < 3; k++)
            p->ops[r].pct[k] = percentile(ns, m, pcts[k]);
    }
    free(ns);
    free(fs.f);
    return true;
}

/* The timed runs: firing counts and times per instruction and per opcode. */
static bool time_firings(prof *p)
{
    uint32_t n = p->n = (uint32_t)tfvm_program_inst_count(p->prog);
    p->count = calloc((size_t)n + 1, sizeof *p->count);
    p->ns = calloc((size_t)n + 1, sizeof *p->ns);
    p->ops = calloc((size_t)n + 1, sizeof *p->ops);
    p->insts = calloc((size_t)n + 1, sizeof *p->insts);
    p->info = calloc((size_t)n + 1, sizeof *p->info);
    p->op_key = calloc((size_t)n + 1, sizeof *p->op_key);
    if (!p->count || !p->ns || !p->ops || !p->insts || !p->info || !p->op_key ||
        tfvm_debug_profile(p->vm, true) != TFVM_OK || tfvm_debug_trace(p->vm, SAMPLE_FIRINGS) != TFVM_OK) {
        fprintf(stderr, "tfvm: out of memory for the profile\n");
        return false;
    }
    for (long k = 0; k < p->runs; k++)
        if (!run_once(p->vm, &p->e, p->args, NULL))
            return false;
    for (uint32_t i = 0; i < n; i++)
        tfvm_program_inst(p->prog, i, &p->info[i]);
    tfvm_debug_profile_read(p->vm, p->count, p->ns);
    p->total = 0;
    for (uint32_t i = 0; i < n; i++)
        p->total += p->ns[i];
    if (p->total <= 0)
        p->total = 1;

    /* by opcode: each row keyed by the first instruction of its opcode */
    for (uint32_t i = 0; i < n; i++) {
        uint32_t j = 0;
        while (j < i && strcmp(p->info[j].op, p->info[i].op) != 0)
            j++;
        p->op_key[i] = j;
        if (j == i)
            p->ops[p->n_ops++] = (row){i, 0, 0, {0}};
    }
    for (size_t r = 0; r < p->n_ops; r++)
        for (uint32_t k = p->ops[r].key; k < n; k++)
            if (p->op_key[k] == p->ops[r].key) {
                p->ops[r].count += p->count[k];
                p->ops[r].ns += p->ns[k];
            }
    size_t m = 0;
    for (size_t r = 0; r < p->n_ops; r++)
        if (p->ops[r].count)
            p->ops[m++] = p->ops[r];
    p->n_ops = m;
    qsort(p->ops, p->n_ops, sizeof *p->ops, by_ns);
    for (uint32_t i = 0; i < n; i++)
        if (p->count[i])
            p->insts[p->n_insts++] = (row){i, p->count[i], p->ns[i], {0}};
    qsort(p->insts, p->n_insts, sizeof *p->insts, by_ns);
    if (p->n_insts > (size_t)p->top)
        p->n_insts = (size_t)p->top;
    if (!op_percentiles(p)) {
        fprintf(stderr, "tfvm: out of memory for the profile\n");
        return false;
    }
    return true;
}

/* ---- The text report ------------------------------------------------------------- */

/* The widest of the texts fn gives for rows, at least min columns. */
static int column_width(const prof *p, const row *rows, size_t n, int min,
                        const char *(*fn)(const prof *, uint32_t, char *, size_t))
{
    int w = min;
    char buf[256];
    for (size_t k = 0; k < n; k++) {
        int len = (int)strlen(fn(p, rows[k].key, buf, sizeof buf));
        if (len > w)
            w = len;
    }
    return w;
}

static const char *inst_op(const prof *p, uint32_t i, char *buf, size_t size)
{
    snprintf(buf, size, "%s", p->info[i].op);
    return buf;
}

static void print_text(const prof *p)
{
    const tfvm_stats *st = &p->st;
    printf("tfvm profile: %s", p->file);
    for (size_t k = 0; k < p->n_args; k++)
        printf(" %s", p->arg_text[k]);
    printf(" (entry %s), %u worker thread%s%s\n", p->e.name, st->workers, st->workers == 1 ? "" : "s",
           st->workers == 1 ? " (deterministic)" : "");
    printf("runs: %ld measured after %ld warm-up run%s; %ld dropped as outliers (slower than 1.5x the median)\n",
           p->runs, p->warmup, p->warmup == 1 ? "" : "s", p->runs - p->kept);
    double median = p->s[p->runs / 2].real;
    /* nanoseconds shown for runs under a millisecond (a trivial run takes well under one) */
    int d = median < 1e-3 ? 9 : 6;
    printf("  real %.*f s median (min %.*f, max %.*f)\n", d, median, d, p->s[0].real, d, p->s[p->kept - 1].real);
    printf("  real p50 %.*f s, p90 %.*f s, p99 %.*f s (of all %ld measured runs)\n", d, p->pct_real[0], d,
           p->pct_real[1], d, p->pct_real[2], p->runs);
    printf("  user %.6f s, sys %.6f s (mean of the kept runs)\n", p->user / (double)p->kept,
           p->sys / (double)p->kept);
    printf("one run: %llu firings, %llu tokens, %llu matches, %llu contexts (peak %llu); %.1f ns per firing\n",
           (unsigned long long)st->fired, (unsigned long long)st->tokens, (unsigned long long)st->matches,
           (unsigned long long)st->contexts_created, (unsigned long long)st->contexts_peak,
           st->fired ? median * 1e9 / (double)st->fired : 0.0);
    printf("scheduler: steals %llu, parks %llu, inline runs %llu, contexts shared %llu\n",
           (unsigned long long)st->steals, (unsigned long long)st->parks, (unsigned long long)st->inline_runs,
           (unsigned long long)st->shared);

    int ow = column_width(p, p->ops, p->n_ops, 14, inst_op);
    printf("\nby opcode (%ld timed runs; timing every firing adds overhead: compare shares):\n", p->runs);
    printf("  %-*s %14s %7s %10s %10s %10s %10s\n", ow, "opcode", "firings/run", "share", "ns/firing", "p50 ns",
           "p90 ns", "p99 ns");
    for (size_t k = 0; k < p->n_ops; k++) {
        const row *r = &p->ops[k];
        printf("  %-*s %14.0f %6.1f%% %10.1f %10.1f %10.1f %10.1f\n", ow, p->info[r->key].op,
               (double)r->count / (double)p->runs, 100 * r->ns / p->total, r->ns / (double)r->count, r->pct[0],
               r->pct[1], r->pct[2]);
    }
    if (p->dropped)
        printf("  (percentiles of the first %llu firings per worker: %llu of %llu firings)\n",
               (unsigned long long)SAMPLE_FIRINGS, (unsigned long long)p->sampled,
               (unsigned long long)(p->sampled + p->dropped));

    int iw = column_width(p, p->insts, p->n_insts, 28, inst_name);
    ow = column_width(p, p->insts, p->n_insts, 12, inst_op);
    printf("\ntop %zu instructions:\n", p->n_insts);
    printf("  %-*s %-*s %14s %7s %10s  %s\n", iw, "instruction", ow, "opcode", "firings/run", "share", "ns/firing",
           "source");
    for (size_t k = 0; k < p->n_insts; k++) {
        const row *r = &p->insts[k];
        char name[256], src[256];
        printf("  %-*s %-*s %14.0f %6.1f%% %10.1f  %s\n", iw, inst_name(p, r->key, name, sizeof name), ow,
               p->info[r->key].op, (double)r->count / (double)p->runs, 100 * r->ns / p->total,
               r->ns / (double)r->count, inst_source(p, r->key, src, sizeof src));
    }
}

/* ---- JSON ------------------------------------------------------------------------ */

static void json_key(FILE *f, const char *sep, const char *key)
{
    fputs(sep, f);
    tb_json_str(f, key);
    fputc(':', f);
}

static void json_pcts(FILE *f, const double *v)
{
    fprintf(f, "\"p50\":%.9g,\"p90\":%.9g,\"p99\":%.9g", v[0], v[1], v[2]);
}

static void print_json(const prof *p)
{
    FILE *f = stdout;
    const tfvm_stats *st = &p->st;
    char buf[256], src[256];
    json_key(f, "{", "file");
    tb_json_str(f, p->file);
    json_key(f, ",", "args");
    for (size_t k = 0; k < p->n_args; k++) {
        fputs(k ? "," : "[", f);
        tb_json_str(f, p->arg_text[k]);
    }
    fputs(p->n_args ? "]" : "[]", f);
    json_key(f, ",", "entry");
    tb_json_str(f, p->e.name);
    fprintf(f, ",\"workers\":%u,\"runs\":%ld,\"warmup\":%ld,\"outliers\":%ld", st->workers, p->runs, p->warmup,
            p->runs - p->kept);
    fprintf(f, ",\"real_s\":{\"median\":%.9g,\"min\":%.9g,\"max\":%.9g,", p->s[p->runs / 2].real, p->s[0].real,
            p->s[p->kept - 1].real);
    json_pcts(f, p->pct_real);
    fprintf(f, "},\"user_s\":%.9g,\"sys_s\":%.9g", p->user / (double)p->kept, p->sys / (double)p->kept);
    fprintf(f, ",\"one_run\":{\"firings\":%llu,\"tokens\":%llu,\"matches\":%llu,\"contexts\":%llu,"
               "\"contexts_peak\":%llu,\"steals\":%llu,\"parks\":%llu,\"inline_runs\":%llu,\"shared\":%llu}",
            (unsigned long long)st->fired, (unsigned long long)st->tokens, (unsigned long long)st->matches,
            (unsigned long long)st->contexts_created, (unsigned long long)st->contexts_peak,
            (unsigned long long)st->steals, (unsigned long long)st->parks, (unsigned long long)st->inline_runs,
            (unsigned long long)st->shared);
    fprintf(f, ",\"timed_runs\":%ld,\"firings_sampled\":%llu,\"firings_not_sampled\":%llu", p->runs,
            (unsigned long long)p->sampled, (unsigned long long)p->dropped);
    json_key(f, ",", "opcodes");
    fputc('[', f);
    for (size_t k = 0; k < p->n_ops; k++) {
        const row *r = &p->ops[k];
        json_key(f, k ? ",{" : "{", "opcode");
        tb_json_str(f, p->info[r->key].op);
        fprintf(f, ",\"firings_per_run\":%.9g,\"share\":%.6f,\"ns_per_firing\":%.6g,\"ns\":{",
                (double)r->count / (double)p->runs, r->ns / p->total, r->ns / (double)r->count);
        json_pcts(f, r->pct);
        fputs("}}", f);
    }
    fputc(']', f);
    json_key(f, ",", "instructions");
    fputc('[', f);
    for (size_t k = 0; k < p->n_insts; k++) {
        const row *r = &p->insts[k];
        json_key(f, k ? ",{" : "{", "instruction");
        tb_json_str(f, inst_name(p, r->key, buf, sizeof buf));
        json_key(f, ",", "opcode");
        tb_json_str(f, p->info[r->key].op);
        json_key(f, ",", "source");
        tb_json_str(f, inst_source(p, r->key, src, sizeof src));
        fprintf(f, ",\"firings_per_run\":%.9g,\"share\":%.6f,\"ns_per_firing\":%.6g}",
                (double)r->count / (double)p->runs, r->ns / p->total, r->ns / (double)r->count);
    }
    fputs("]}\n", f);
}

/* ---- The timeline ---------------------------------------------------------------- */

typedef struct trace_out {
    const prof *p;
    FILE *f;
} trace_out;

/* One firing as a complete event ("ph":"X"), times in microseconds. */
static void trace_event(void *ud, const tfvm_debug_trace_ev *ev)
{
    trace_out *t = ud;
    char name[256], text[512], src[256];
    fprintf(t->f, ",\n{\"ph\":\"X\",\"pid\":1,\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f", ev->worker, ev->start_ns / 1e3,
            ev->dur_ns / 1e3);
    json_key(t->f, ",", "name");
    tb_json_str(t->f, inst_name(t->p, ev->inst, name, sizeof name));
    json_key(t->f, ",", "cat");
    tb_json_str(t->f, t->p->info[ev->inst].op);
    tfvm_inst_format(t->p->prog, ev->inst, text, sizeof text);
    json_key(t->f, ",", "args");
    json_key(t->f, "{", "instruction");
    tb_json_str(t->f, text);
    json_key(t->f, ",", "op");
    tb_json_str(t->f, t->p->info[ev->inst].op);
    json_key(t->f, ",", "source");
    tb_json_str(t->f, inst_source(t->p, ev->inst, src, sizeof src));
    json_key(t->f, ",", "tag");
    tb_json_str(t->f, ev->tag);
    json_key(t->f, ",", "inputs");
    tb_json_str(t->f, ev->inputs);
    fputs("}}", t->f);
}

/* One more timed run, its firings written to path in the Trace Event
 * Format: a process named after the file, a thread per worker. */
static bool write_trace(prof *p, const char *path)
{
    if (tfvm_debug_trace(p->vm, TRACE_FIRINGS) != TFVM_OK || !run_once(p->vm, &p->e, p->args, NULL))
        return false;
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "tfvm: %s: %s\n", path, strerror(errno));
        return false;
    }
    trace_out t = {p, f};
    fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n{\"ph\":\"M\",\"pid\":1,\"name\":\"process_name\","
          "\"args\":{\"name\":",
          f);
    char title[512];
    snprintf(title, sizeof title, "tfvm %s (entry %s)", p->file, p->e.name);
    tb_json_str(f, title);
    fputs("}}", f);
    for (uint32_t w = 0; w < p->st.workers; w++)
        fprintf(f, ",\n{\"ph\":\"M\",\"pid\":1,\"tid\":%u,\"name\":\"thread_name\",\"args\":{\"name\":\"worker %u\"}}",
                w, w);
    uint64_t dropped;
    tfvm_debug_trace_read(p->vm, trace_event, &t, &dropped);
    fputs("\n]}\n", f);
    bool ok = !ferror(f);
    if (fclose(f) != 0 || !ok) {
        fprintf(stderr, "tfvm: %s: cannot write the trace\n", path);
        return false;
    }
    if (dropped)
        fprintf(stderr, "tfvm: %s: the first %d firings per worker; %llu more not written\n", path,
                TRACE_FIRINGS, (unsigned long long)dropped);
    return true;
}

/* ---- The command ------------------------------------------------------------------ */

int cli_profile(int argc, char **argv)
{
    enum { P_RUNS, P_WARMUP, P_THREADS, P_TOP, P_ENTRY, P_OUTPUTS, P_JSON, P_TRACE, P_DEVICE };
    static const cli_opt opts[] = {
        [P_RUNS] = {NULL, "--runs", "needs a number"},
        [P_WARMUP] = {NULL, "--warmup", "needs a number"},
        [P_THREADS] = {NULL, "--threads", "needs an integer from 1 to 1024"},
        [P_TOP] = {NULL, "--top", "needs a number"},
        [P_ENTRY] = {"-e", "--entry", "needs an entry name"},
        [P_OUTPUTS] = {NULL, "--outputs", "needs a list of tensor names (a,b:1)"},
        [P_JSON] = {NULL, "--json", NULL},
        [P_TRACE] = {NULL, "--trace", "needs a file name"},
        [P_DEVICE] = {NULL, "--device", "takes cpu, cuda or auto"},
    };
    cli_args o;
    int rc = cli_parse("profile", cli_usage_profile, opts, (sizeof opts / sizeof opts[0]), CLI_FILE_ARGS, argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    prof p = {.file = o.pos[0], .arg_text = o.pos + 1, .n_args = o.n_pos - 1, .runs = 5, .warmup = 2, .top = 10};
    int threads = 0, device = TFVM_DEVICE_CPU;
    const char *entry = o.val[P_ENTRY], *outputs = o.val[P_OUTPUTS];
    static const struct {
        int opt;
        long lo;
    } counts[] = {{P_RUNS, 1}, {P_WARMUP, 0}, {P_TOP, 1}};
    long *num[] = {&p.runs, &p.warmup, &p.top};
    for (size_t k = 0; k < (sizeof counts / sizeof counts[0]) && !rc; k++)
        if (o.val[counts[k].opt] && !parse_count(o.val[counts[k].opt], counts[k].lo, 1000000, num[k]))
            rc = cli_usage_error("profile", "%s needs a whole number from %ld to 1000000", opts[counts[k].opt].lng,
                                 counts[k].lo);
    if (!rc) /* --threads, else TFVM_THREADS, as for run; --device likewise */
        rc = cli_threads("profile", o.val[P_THREADS], &threads);
    if (!rc)
        rc = cli_device("profile", o.val[P_DEVICE], &device);
    if (rc) {
        cli_args_free(&o);
        return rc;
    }
    rc = 1;

    tfvm_error err;
    const char **bound = NULL;
    if (cli_load_program(p.file, entry, outputs, &p.prog, &err) != TFVM_OK) {
        rc = cli_load_failed(&err);
        goto out;
    }
    int ei = entry ? tfvm_program_find_entry(p.prog, entry) : 0;
    if (ei < 0 || tfvm_program_entry(p.prog, (size_t)ei, &p.e) != TFVM_OK) {
        fprintf(stderr, "tfvm: %s: no entry point%s%s\n", p.file, entry ? " named " : "", entry ? entry : "");
        goto out;
    }
    p.args = calloc(p.e.n_params + 1, sizeof *p.args);
    bound = calloc(p.e.n_params + 1, sizeof *bound);
    p.s = calloc((size_t)p.runs, sizeof *p.s);
    if (!p.args || !bound || !p.s)
        goto out;
    if (cli_bind_args(&p.e, p.arg_text, p.n_args, bound) != 0) {
        rc = 2;
        goto out;
    }
    for (size_t k = 0; k < p.e.n_params; k++)
        if (cli_parse_arg(&p.e, k, bound[k], &p.args[k]) != 0)
            goto out;
    tfvm_config cfg;
    tfvm_config_init(&cfg);
    cfg.threads = threads;
    cfg.deterministic = threads == 1;
    cfg.device = (tfvm_device)device;
    tfvm_status vst = tfvm_vm_new(p.prog, &cfg, &p.vm);
    if (vst == TFVM_ERR_DEVICE) {
        char state[256];
        tfvm_device_status("cuda", state, sizeof state);
        fprintf(stderr, "tfvm: cuda: %s\n", state);
        goto out;
    } else if (vst != TFVM_OK) {
        fprintf(stderr, "tfvm: cannot create the VM\n");
        goto out;
    }
    if (!measure(&p) || !time_firings(&p) || (o.val[P_TRACE] && !write_trace(&p, o.val[P_TRACE])))
        goto out;
    if (o.val[P_JSON])
        print_json(&p);
    else
        print_text(&p);
    rc = fflush(stdout) == 0 ? 0 : 1;
out:
    free(p.op_key);
    free(p.info);
    free(p.insts);
    free(p.ops);
    free(p.ns);
    free(p.count);
    free(p.s);
    if (p.args)
        for (size_t k = 0; k < p.e.n_params; k++)
            tfvm_value_release(&p.args[k]);
    free(p.args);
    free(bound);
    tfvm_vm_free(p.vm);
    tfvm_program_free(p.prog);
    cli_args_free(&o);
    return rc;
}
