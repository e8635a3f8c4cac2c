/* scheduler/topology.c — physical cores and thread pinning through hwloc. */
#include <hwloc.h>
#include <stdlib.h>
#include <unistd.h>

#include "sched.h"

struct sched_topo {
    hwloc_topology_t topo;
    unsigned cores;
};

sched_topo *sched_topo_load(void)
{
    sched_topo *t = malloc(sizeof *t);
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

void sched_topo_free(sched_topo *t)
{
    if (!t)
        return;
    hwloc_topology_destroy(t->topo);
    free(t);
}

unsigned sched_topo_cores(const sched_topo *t)
{
    if (t)
        return t->cores;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1;
}

