/* test/unit/test_onnx_conformance.c — ONNX's backend node cases, converted
 * by test/onnx/setup.sh into build/onnx-node/CASE/ (model.onnx, .npy inputs
 * and expected outputs, meta.txt). Every case of test/onnx/allowlist.txt must
 * import and give the expected outputs, deterministically and on 2 threads;
 * without the data the suite says it skipped. TFVM_ONNX_ALL=1 runs every
 * case instead and prints a line per case and pass counts per op (what the
 * allowlist and test/onnx/known_failures.txt are made from). Each case runs
 * in a child process with a time limit, so a crash or a hang is a failure
 * of that case, not of the suite (TFVM_ONNX_NOFORK=1: in process, for
 * LeakSanitizer). */
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "import/onnx_int.h"
#include "onnx_util.h"
#include "testutil.h"

#define DATA "build/onnx-node"
#define MAX_IO 32

typedef struct ocase {
    char name[128];
    char ops[1024];
    char skip[256];
    int n_in, n_out;
    char in_file[MAX_IO][64], out_file[MAX_IO][64];
} ocase;

static bool read_meta(const char *name, ocase *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    char path[512], line[2048];
    snprintf(path, sizeof path, DATA "/%s/meta.txt", name);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char nm[256], file[64];
        if (strncmp(line, "ops ", 4) == 0)
            snprintf(c->ops, sizeof c->ops, "%.1000s", line + 4);
        else if (strncmp(line, "skip ", 5) == 0)
            snprintf(c->skip, sizeof c->skip, "%.250s", line + 5);
        else if (sscanf(line, "input %255s %63s", nm, file) == 2 && c->n_in < MAX_IO)
            snprintf(c->in_file[c->n_in++], 64, "%s", file);
        else if (sscanf(line, "output %255s %63s", nm, file) == 2 && c->n_out < MAX_IO)
            snprintf(c->out_file[c->n_out++], 64, "%s", file);
    }
    fclose(f);
    return true;
}

/* Runs one case in this process: "" on success, else why. */
static void run_case(const ocase *c, char *why, size_t size)
{
    char path[512];
    tfvm_error err;
    why[0] = 0;
    if (c->skip[0]) {
        snprintf(why, size, "not expressible: %s", c->skip);
        return;
    }
    snprintf(path, sizeof path, DATA "/%s/model.onnx", c->name);
    tfvm_program *p;
    if (ou_compile(path, NULL, &p, &err) != TFVM_OK) {
        snprintf(why, size, "import: %s", err.message);
        return;
    }
    tfvm_value args[MAX_IO], res[MAX_IO];
    tfvm_tensor *want[MAX_IO] = {0};
    int n_args = 0;
    const isa_entry *en = &p->isa.entries[0];
    if ((int)en->n_params != c->n_in || (int)en->n_results != c->n_out) {
        snprintf(why, size, "entry takes %u and gives %u values, the case has %d and %d", en->n_params,
                 en->n_results, c->n_in, c->n_out);
        goto done;
    }
    for (int k = 0; k < c->n_in; k++, n_args++) {
        tfvm_tensor *t;
        snprintf(path, sizeof path, DATA "/%s/%s", c->name, c->in_file[k]);
        if (tfvm_npy_load(path, NULL, &t, &err) != TFVM_OK) {
            snprintf(why, size, "input: %s", err.message);
            goto done;
        }
        if (en->params[k].rank == 0 && tfvm_tensor_count(t) == 1) {
            tfvm_value v = {.dtype = tfvm_tensor_dtype(t)};
            memcpy(&v.as, tfvm_tensor_cdata(t), tfvm_dtype_size(v.dtype));
            tfvm_tensor_free(t);
            args[k] = v;
        } else {
            args[k] = tfvm_tensor_value(t);
        }
    }
    for (int k = 0; k < c->n_out; k++) {
        snprintf(path, sizeof path, DATA "/%s/%s", c->name, c->out_file[k]);
        if (tfvm_npy_load(path, NULL, &want[k], &err) != TFVM_OK) {
            snprintf(why, size, "output: %s", err.message);
            goto done;
        }
    }
    for (int mode = 0; mode < 2 && !why[0]; mode++) {
        tfvm_config cfg;
        tfvm_config_init(&cfg);
        cfg.deterministic = mode == 0;
        cfg.threads = mode == 0 ? 1 : 2;
        tfvm_vm *vm;
        if (tfvm_vm_new(p, &cfg, &vm) != TFVM_OK) {
            snprintf(why, size, "vm_new failed");
            break;
        }
        if (tfvm_run(vm, "main", args, (size_t)n_args, res, (size_t)c->n_out) != TFVM_OK) {
            snprintf(why, size, "run%s: %s", mode ? " (2 threads)" : "", tfvm_errmsg(vm));
        } else {
            for (int k = 0; k < c->n_out; k++) {
                char w[300];
                if (!why[0] && !ou_same(&res[k], want[k], w, sizeof w))
                    snprintf(why, size, "output %d%s: %s", k, mode ? " (2 threads)" : "", w);
                tfvm_value_release(&res[k]);
            }
        }
        tfvm_vm_free(vm);
    }
done:
    for (int k = 0; k < n_args; k++)
        tfvm_value_release(&args[k]);
    for (int k = 0; k < c->n_out; k++)
        tfvm_tensor_free(want[k]);
    tfvm_program_free(p);
}

/* run_case in a child with a 20 s limit */
static void run_isolated(const ocase *c, char *why, size_t size)
{
    if (getenv("TFVM_ONNX_NOFORK")) { /* in this process: LeakSanitizer sees every case */
        run_case(c, why, size);
        return;
    }
    int fd[2];
    if (pipe(fd) != 0) {
        snprintf(why, size, "pipe failed");
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        alarm(20);
        char w[600];
        run_case(c, w, sizeof w);
        ssize_t n = write(fd[1], w, strlen(w) + 1);
        (void)n;
        _exit(0);
    }
    close(fd[1]);
    size_t got = 0;
    ssize_t n;
    while (got < size - 1 && (n = read(fd[0], why + got, size - 1 - got)) > 0)
        got += (size_t)n;
    why[got] = 0;
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFSIGNALED(status))
        snprintf(why, size, "%s (signal %d)", WTERMSIG(status) == SIGALRM ? "timed out after 20 s" : "crashed",
                 WTERMSIG(status));
    else if (got == 0)
        snprintf(why, size, "child exited with status %d", WEXITSTATUS(status));
}

static bool all_supported(const char *ops)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", ops);
    for (char *s = strtok(buf, " "); s; s = strtok(NULL, " "))
        if (!ox_op_supported(s))
            return false;
    return ops[0] != 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static bool have_data(void)
{
    DIR *d = opendir(DATA);
    if (!d)
        return false;
    closedir(d);
    return true;
}

START_TEST(allowlisted_cases_pass)
{
    if (getenv("TFVM_ONNX_SKIP")) { /* make tsan: 2,800 forked runs take 20 minutes there */
        printf("test_onnx_conformance: skipped: TFVM_ONNX_SKIP is set\n");
        return;
    }
    if (!have_data()) {
        printf("test_onnx_conformance: skipped: run test/onnx/setup.sh (no " DATA ")\n");
        return;
    }
    FILE *f = fopen("test/onnx/allowlist.txt", "r");
    ck_assert_msg(f != NULL, "test/onnx/allowlist.txt is missing");
    char line[256], why[700];
    int n = 0, failed = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n\r")] = 0;
        if (!line[0] || line[0] == '#')
            continue;
        ocase c;
        if (!read_meta(line, &c)) {
            printf("FAIL %s: no such case in " DATA "\n", line);
            failed++;
            continue;
        }
        run_isolated(&c, why, sizeof why);
        n++;
        if (why[0]) {
            printf("FAIL %s: %s\n", line, why);
            failed++;
        }
    }
    fclose(f);
    printf("test_onnx_conformance: %d of %d allowlisted cases pass\n", n - failed, n);
    ck_assert_int_eq(failed, 0);
}
END_TEST

/* TFVM_ONNX_ALL=1: every case; PASS/FAIL lines, then per-op counts. */
static int run_all(void)
{
    DIR *d = opendir(DATA);
    if (!d) {
        printf("skipped: run test/onnx/setup.sh\n");
        return 0;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap)
            names = realloc(names, (cap = cap ? 2 * cap : 256) * sizeof *names);
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    const char *only = getenv("TFVM_ONNX_ONLY");
    int pass = 0, total = 0, sup_pass = 0, sup_total = 0;
    for (size_t i = 0; i < n; i++) {
        if (only && !strstr(names[i], only)) {
            free(names[i]);
            continue;
        }
        ocase c;
        char why[700];
        read_meta(names[i], &c);
        run_isolated(&c, why, sizeof why);
        bool sup = all_supported(c.ops);
        total++;
        sup_total += sup;
        if (!why[0]) {
            pass++;
            sup_pass += sup;
            printf("PASS %s [%s]\n", names[i], c.ops);
        } else {
            printf("FAIL %s [%s]%s: %s\n", names[i], c.ops, sup ? "" : " (unsupported op)", why);
        }
        fflush(stdout);
        free(names[i]);
    }
    free(names);
    printf("TOTAL %d of %d cases pass; %d of %d cases whose ops are all supported\n", pass, total, sup_pass,
           sup_total);
    return 0;
}

int main(void)
{
    if (getenv("TFVM_ONNX_ALL"))
        return run_all();
    Suite *s = suite_create("onnx_conformance");
    TCase *tc = tcase_create("node");
    tcase_set_timeout(tc, 3600);
    tcase_add_test(tc, allowlisted_cases_pass);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
