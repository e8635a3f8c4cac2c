/* bench/ref.c — C references for `make bench`: the thesis's recursion
 * benchmarks (fib, ackermann, takeuchi, primes, as in examples/*.tfg) and
 * factorial in a loop, on int32 like the .tfg programs. Prints
 * "RESULT CALLS SECONDS": seconds per run (the best of several runs of at
 * least 0.2 s in all), calls = calls of the recursive functions in one run. */
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t calls;

/* Integers wrap like the VM's (two's complement), without undefined behaviour. */
static int32_t add(int32_t a, int32_t b) { return (int32_t)((uint32_t)a + (uint32_t)b); }
static int32_t sub(int32_t a, int32_t b) { return (int32_t)((uint32_t)a - (uint32_t)b); }
static int32_t mul(int32_t a, int32_t b) { return (int32_t)((uint32_t)a * (uint32_t)b); }

static int32_t fib(int32_t n)
{
    calls++;
    return n <= 1 ? 1 : add(fib(n - 1), fib(n - 2));
}

static int32_t ack(int32_t m, int32_t n)
{
    calls++;
    if (m == 0)
        return add(n, 1);
    if (n == 0)
        return ack(m - 1, 1);
    return ack(m - 1, ack(m, n - 1));
}

static int32_t tak(int32_t x, int32_t y, int32_t z)
{
    calls++;
    if (y < x)
        return tak(tak(x - 1, y, z), tak(y - 1, z, x), tak(z - 1, x, y));
    return z;
}

static int test(int32_t n, int32_t i)
{
    calls++;
    int32_t d = sub(mul(6, i), 1);
    if (mul(d, d) > n)
        return 1;
    if (n % d == 0)
        return 0;
    return test(n, add(i, 1));
}

static int32_t prime_plus(int32_t n, int32_t i);

static int32_t prime_minus(int32_t n, int32_t i)
{
    calls++;
    if (test(sub(mul(6, i), 1), 1))
        return n == 0 ? sub(mul(6, i), 1) : prime_plus(n - 1, i);
    return prime_plus(n, i);
}

static int32_t prime_plus(int32_t n, int32_t i)
{
    calls++;
    if (test(sub(mul(6, i), 1), 1)) /* 6i-1 again: the thesis's program as it was run */
        return n == 0 ? sub(mul(6, i), 1) : prime_minus(n - 1, add(i, 1));
    return prime_minus(n, add(i, 1));
}

static int32_t primes(int32_t n)
{
    calls++;
    return n <= 0 ? 2 : n == 1 ? 3 : prime_minus(n - 2, 1);
}

static int32_t fac(int32_t n)
{
    calls++;
    return n <= 1 ? 1 : mul(n, fac(n - 1));
}

static int32_t fac_loop(int32_t n, int32_t reps)
{
    int32_t acc = 0;
    for (int32_t k = 0; k < reps; k++)
        acc = add(acc, fac(n));
    return acc;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* volatile: the compiler must not fold the calls away */
static volatile int32_t sink;

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: ref fib|ack|tak|primes|fac N [M [K]]\n");
        return 2;
    }
    const char *b = argv[1];
    int32_t a[3] = {0, 0, 0};
    for (int i = 2; i < argc && i < 5; i++)
        a[i - 2] = (int32_t)atoi(argv[i]);
    double best = 1e30, total = 0;
    int32_t r = 0;
    uint64_t c = 0;
    for (int run = 0; run < 1000 && (run < 3 || total < 0.2); run++) {
        calls = 0;
        double t0 = now();
        if (strcmp(b, "fib") == 0)
            r = fib(a[0]);
        else if (strcmp(b, "ack") == 0)
            r = ack(a[0], a[1]);
        else if (strcmp(b, "tak") == 0)
            r = tak(a[0], a[1], a[2]);
        else if (strcmp(b, "primes") == 0)
            r = primes(a[0]);
        else if (strcmp(b, "fac") == 0)
            r = fac_loop(a[0], a[1]);
        else
            return 2;
        double t = now() - t0;
        sink = r;
        c = calls;
        total += t;
        if (t < best)
            best = t;
    }
    printf("%d %llu %.6f\n", r, (unsigned long long)c, best);
    return 0;
}
