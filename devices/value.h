/* devices/value.h — the value a token carries: a scalar inline, or a reference to
 * a tensor. 16 bytes, copied by value; tensors are reference counted. */
#ifndef TFVM_DEV_VALUE_H
#define TFVM_DEV_VALUE_H

#include "devices/tensor.h"
#include "util/util.h"

typedef struct dev_value {
    uint8_t dtype;      /* tfvm_dtype; 0 only in an empty slot */
    uint8_t dead;       /* a dead token's value: nothing else is meaningful */
    uint8_t is_tensor;  /* u.t holds one reference */
    union {
        bool b;
        int32_t i32;
        int64_t i64;
        float f32;
        double f64;
        uint8_t u8;
        int8_t i8;
        int16_t i16;
        uint16_t u16; /* also the bits of an f16 or bf16 */
        uint32_t u32;
        uint64_t u64;
        tfvm_tensor *t;
    } u;
} dev_value;

static inline dev_value dev_dead(void) { return (dev_value){.dead = 1}; }

static inline void dev_value_retain(const dev_value *v)
{
    if (v->is_tensor)
        atomic_fetch_add_explicit(&v->u.t->refs, 1, memory_order_relaxed);
}
static inline void dev_value_release(dev_value *v)
{
    if (v->is_tensor) {
        tfvm_tensor_free(v->u.t);
        v->is_tensor = 0;
        v->u.t = NULL;
    }
}

#endif
