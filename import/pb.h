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

/* Messages nested deeper than this are refused before protobuf-c unpacks
 * them (it recurses once per level: ~8,700 levels overflow an 8 MB stack).
 * As protobuf's own default recursion limit; an ONNX subgraph costs 3
 * levels (NodeProto, AttributeProto, GraphProto). */
#define IMP_PB_MAX_DEPTH 100

/* Walks the wire format of a message of type d without recursing, and
 * returns false with *at = the byte offset of the key of the first message nested
 * deeper than IMP_PB_MAX_DEPTH. Bytes it cannot read are left for the
 * unpacker to refuse (true). */
bool imp_pb_depth_ok(const ProtobufCMessageDescriptor *d, const void *data, size_t len, size_t *at);

/* Replaces control characters in s with '?'. */
void imp_one_line(char *s);

#endif
