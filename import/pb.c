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

/* A varint at *pos (< end); false when it runs past end or 10 bytes. */
static bool pb_varint(const uint8_t *b, size_t *pos, size_t end, uint64_t *v)
{
    *v = 0;
    for (unsigned k = 0; k < 10 && *pos < end; k++) {
        const uint8_t c = b[(*pos)++];
        *v |= (uint64_t)(c & 0x7f) << (7 * k);
        if (!(c & 0x80))
            return true;
    }
    return false;
}

static const ProtobufCFieldDescriptor *pb_field(const ProtobufCMessageDescriptor *d, uint64_t id)
{
    for (unsigned k = 0; k < d->n_fields; k++)
        if (d->fields[k].id == id)
            return &d->fields[k];
    return NULL;
}

bool imp_pb_depth_ok(const ProtobufCMessageDescriptor *d, const void *data, size_t len, size_t *at)
{
    struct {
        const ProtobufCMessageDescriptor *d;
        size_t end;
    } st[IMP_PB_MAX_DEPTH + 1];
    const uint8_t *b = data;
    size_t depth = 0, pos = 0;
    st[0].d = d;
    st[0].end = len;
    for (;;) {
        while (depth && pos == st[depth].end)
            depth--;
        const size_t end = st[depth].end;
        if (pos >= end)
            return true; /* the end, or bad bytes */
        uint64_t tag, n;
        const size_t key = pos;
        if (!pb_varint(b, &pos, end, &tag))
            return true;
        switch (tag & 7) {
        case 0:
            if (!pb_varint(b, &pos, end, &n))
                return true;
            break;
        case 1:
            if (end - pos < 8)
                return true;
            pos += 8;
            break;
        case 5:
            if (end - pos < 4)
                return true;
            pos += 4;
            break;
        case 2: {
            if (!pb_varint(b, &pos, end, &n) || n > end - pos)
                return true;
            const ProtobufCFieldDescriptor *f = pb_field(st[depth].d, tag >> 3);
            if (!f || f->type != PROTOBUF_C_TYPE_MESSAGE || !n) {
                pos += n;
                break;
            }
            if (depth == IMP_PB_MAX_DEPTH) {
                *at = key;
                return false;
            }
            depth++;
            st[depth].d = f->descriptor;
            st[depth].end = pos + n;
            break;
        }
        default: /* groups: protobuf-c refuses them */
            return true;
        }
    }
}

void imp_one_line(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = '?';
}
