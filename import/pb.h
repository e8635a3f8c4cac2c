/* import/pb.h — what both importers share: protobuf-c unpacking through the
 * tfvm allocator (so a failed allocation is told apart from bad bytes, which
 * protobuf-c reports alike, as NULL), and messages kept to one printable line
 * whatever bytes a file's names hold. */
#ifndef TFVM_IMPORT_PB_H
#define TFVM_IMPORT_PB_H

#include <protobuf-c/protobuf-c.h>

#include "tfvm.h"

typedef struct imp_pb {
    ProtobufCAllocator pa; /* pass &pa to *__unpack and *__free_unpacked */
    const tfvm_allocator *a;
    bool failed;           /* an allocation failed: the unpack's NULL means out of memory */
} imp_pb;

/* a may be NULL (the C library). The struct must not move while in use. */
void imp_pb_init(imp_pb *pb, const tfvm_allocator *a);

/* Replaces control characters in s with '?'. */
void imp_one_line(char *s);

#endif
