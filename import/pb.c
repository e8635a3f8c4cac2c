/* import/pb.c — protobuf-c on the tfvm allocator, one-line messages (pb.h). */
#include "import/pb.h"

#include <string.h>

#include "util/util.h"

/* protobuf-c frees without a size, and the tfvm hook needs one: each block
 * carries its size in front of it. */
#define PB_HDR 16

static void *pb_alloc(void *ud, size_t n)
{
    imp_pb *pb = ud;
    unsigned char *p = n <= SIZE_MAX - PB_HDR ? ut_alloc(pb->a, n + PB_HDR) : NULL;
    if (!p) {
        pb->failed = true;
        return NULL;
    }
    memcpy(p, &n, sizeof n);
    return p + PB_HDR;
}

static void pb_free(void *ud, void *p)
{
    imp_pb *pb = ud;
    if (!p)
        return;
    unsigned char *q = (unsigned char *)p - PB_HDR;
    size_t n;
    memcpy(&n, q, sizeof n);
    ut_free(pb->a, q, n + PB_HDR);
}

void imp_pb_init(imp_pb *pb, const tfvm_allocator *a)
{
    pb->a = a;
    pb->failed = false;
    pb->pa = (ProtobufCAllocator){.alloc = pb_alloc, .free = pb_free, .allocator_data = pb};
}

void imp_one_line(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = '?';
}
