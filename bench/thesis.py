"""bench/thesis.py — CPython references for `make bench`: the same programs as
bench/ref.c and examples/*.tfg (int32 semantics where the results could
overflow), written plainly (no call counter: bench/ref.c counts the calls),
so the reference is as fast as CPython runs them. Usage:
python3 thesis.py fib|ack|tak|primes|fac N [M [K]]; prints "RESULT - SECONDS"
for one timed run."""
import sys
import threading
import time

def i32(x):
    return (x + 2**31) % 2**32 - 2**31


def fib(n):
    return 1 if n <= 1 else fib(n - 1) + fib(n - 2)


def ack(m, n):
    if m == 0:
        return n + 1
    if n == 0:
        return ack(m - 1, 1)
    return ack(m - 1, ack(m, n - 1))


def tak(x, y, z):
    if y < x:
        return tak(tak(x - 1, y, z), tak(y - 1, z, x), tak(z - 1, x, y))
    return z


def test(n, i):
    d = 6 * i - 1
    if d * d > n:
        return True
    if n % d == 0:
        return False
    return test(n, i + 1)


def prime_minus(n, i):
    if test(6 * i - 1, 1):
        return 6 * i - 1 if n == 0 else prime_plus(n - 1, i)
    return prime_plus(n, i)


def prime_plus(n, i):
    if test(6 * i - 1, 1):  # 6i-1 again: the thesis's program as it was run
        return 6 * i - 1 if n == 0 else prime_minus(n - 1, i + 1)
    return prime_minus(n, i + 1)


def primes(n):
    return 2 if n <= 0 else (3 if n == 1 else prime_minus(n - 2, 1))


def fac(n):
    return 1 if n <= 1 else i32(n * fac(n - 1))


def fac_loop(n, reps):
    acc = 0
    for _ in range(reps):
        acc = i32(acc + fac(n))
    return acc


BENCH = {"fib": fib, "ack": ack, "tak": tak, "primes": primes, "fac": fac_loop}


def main():
    fn = BENCH[sys.argv[1]]
    args = [int(a) for a in sys.argv[2:]]
    t0 = time.perf_counter()
    r = fn(*args)
    t = time.perf_counter() - t0
    if isinstance(r, bool):
        r = int(r)
    print(f"{r} - {t:.6f}")


if __name__ == "__main__":
    # primes recurses about 15,000 calls deep: a big stack and recursion limit
    sys.setrecursionlimit(1_000_000)
    threading.stack_size(512 * 1024 * 1024)
    th = threading.Thread(target=main)
    th.start()
    th.join()
