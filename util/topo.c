/* util/topo.c — the machine's physical cores, through hwloc (sysconf
 * without it): a fact of the machine, asked by the CPU device for its state
 * line and by the VM and the worker pools for their default size. */
#include <hwloc.h>
#include <stdlib.h>
#include <unistd.h>

#include "util/util.h"

struct ut_topo {
    hwloc_topology_t topo;
    unsigned cores;
};

ut_topo *ut_topo_load(void)
{
    ut_topo *t = malloc(sizeof *t);
    if (!t)
        return NULL;
    if (hwloc_topology_init(&t->topo) != 0) {
        free(t);
        return NULL;
    }
    if (hwloc_topology_load(t->topo) != 0) {
        hwloc_topology_destroy(t->topo);
        free(t);
        return NULL;
    }
    int n = hwloc_get_nbobjs_by_type(t->topo, HWLOC_OBJ_CORE);
    t->cores = n > 0 ? (unsigned)n : 1;
    return t;
}

void ut_topo_free(ut_topo *t)
{
    if (!t)
        return;
    hwloc_topology_destroy(t->topo);
    free(t);
}

unsigned ut_topo_cores(const ut_topo *t)
{
    if (t)
        return t->cores;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1;
}

