/* devices/cpu/par.c — the calling thread's intra-op runner (par.h). */
#include "devices/cpu/par.h"

static _Thread_local const dev_par_runner *par_runner;

void dev_par_set_runner(const dev_par_runner *r) { par_runner = r; }

unsigned dev_par_width(void) { return par_runner && par_runner->width > 1 ? par_runner->width : 1; }

void dev_par_for(size_t n, size_t grain, dev_par_fn fn, void *arg)
{
    if (grain == 0)
        grain = 1;
    if (n == 0)
        return;
    if (n <= grain || dev_par_width() == 1) {
        fn(arg, 0, n);
        return;
    }
    par_runner->run(par_runner->self, n, grain, fn, arg);
}
