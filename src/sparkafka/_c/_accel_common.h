/* Shared by the C accelerator's sources (_accel.c, _append.c, _send_lane.c): murmur2, varints, one record,
 * key and value arguments.
 *
 * How it works: plain static inline functions, so each source gets its own copy and the compiler
 * inlines them into the record loops; no state.
 */
#ifndef SPARKAFKA_ACCEL_COMMON_H
#define SPARKAFKA_ACCEL_COMMON_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Kafka's murmur2 (as Java's Utils.murmur2), unsigned. */
static inline uint32_t murmur2_u32(const unsigned char *data, Py_ssize_t length) {
    const uint32_t m = 0x5bd1e995u;
    const int r = 24;
    uint32_t h = 0x9747b28cu ^ (uint32_t)length;
    Py_ssize_t words = length / 4;
    for (Py_ssize_t i = 0; i < words; i++) {
        const unsigned char *p = data + 4 * i;
        uint32_t k = (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
        k *= m;
        k ^= k >> r;
        k *= m;
        h *= m;
        h ^= k;
    }
    const unsigned char *tail = data + 4 * words;
    switch (length & 3) {
    case 3:
        h ^= (uint32_t)tail[2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)tail[1] << 8;
        /* fall through */
    case 1:
        h ^= (uint32_t)tail[0];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return h;
}

/* Zigzag varint size and write (Kafka's record fields). */
static inline Py_ssize_t varint_len(int64_t v) {
    uint64_t u = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    Py_ssize_t n = 1;
    while (u >= 0x80) {
        u >>= 7;
        n++;
    }
    return n;
}

static inline char *put_varint(char *p, int64_t v) {
    uint64_t u = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    while (u >= 0x80) {
        *p++ = (char)((u & 0x7f) | 0x80);
        u >>= 7;
    }
    *p++ = (char)u;
    return p;
}

/* One v2 record without headers: its body size (what the leading varint holds) and its bytes. A
 * length of -1 is a null key or value (``k``/``v`` unused then). */
static inline Py_ssize_t record_body_size(int64_t ts_delta, int64_t offset_delta, Py_ssize_t klen, Py_ssize_t vlen) {
    return 1 + varint_len(ts_delta) + varint_len(offset_delta) + varint_len(klen) + (klen > 0 ? klen : 0)
           + varint_len(vlen) + (vlen > 0 ? vlen : 0) + 1;
}

/* A record's tail: key length and key, value length and value, no headers. */
static inline char *put_tail(char *p, const char *k, Py_ssize_t klen, const char *v, Py_ssize_t vlen) {
    p = put_varint(p, klen);
    if (klen > 0) {
        memcpy(p, k, (size_t)klen);
        p += klen;
    }
    p = put_varint(p, vlen);
    if (vlen > 0) {
        memcpy(p, v, (size_t)vlen);
        p += vlen;
    }
    *p++ = 0; /* no headers */
    return p;
}

static inline char *put_record(char *p, Py_ssize_t body, int64_t ts_delta, int64_t offset_delta, const char *k,
                               Py_ssize_t klen, const char *v, Py_ssize_t vlen) {
    p = put_varint(p, body);
    *p++ = 0; /* attributes */
    p = put_varint(p, ts_delta);
    p = put_varint(p, offset_delta);
    return put_tail(p, k, klen, v, vlen);
}

/* A key or value: bytes (fast), None (-1 length) or another buffer. */
typedef struct {
    const char *buf;
    Py_ssize_t len; /* -1 for None */
    Py_buffer view;
    int has_view;
} field_t;

static inline int get_field(PyObject *obj, field_t *f) {
    f->has_view = 0;
    if (obj == Py_None) {
        f->buf = NULL;
        f->len = -1;
        return 0;
    }
    if (PyBytes_CheckExact(obj)) {
        f->buf = PyBytes_AS_STRING(obj);
        f->len = PyBytes_GET_SIZE(obj);
        return 0;
    }
    if (PyObject_GetBuffer(obj, &f->view, PyBUF_SIMPLE) < 0)
        return -1;
    f->has_view = 1;
    f->buf = (const char *)f->view.buf;
    f->len = f->view.len;
    return 0;
}

static inline void release_field(field_t *f) {
    if (f->has_view) {
        PyBuffer_Release(&f->view);
        f->has_view = 0;
    }
}

/* The send lane type (_send_lane.c), added to the module by PyInit__accel. */
int sparkafka_add_send_lane(PyObject *module);

/* finish_batch and patch_producer_state (_batch.c), added to the module by PyInit__accel. */
int sparkafka_add_batch_functions(PyObject *module);
/* decode_produce_response (_produce_response.c), added the same way. */
int sparkafka_add_produce_response_functions(PyObject *module);

#endif
