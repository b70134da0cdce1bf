/* The end of a record batch's life in the accumulator, in C: the 61-byte v2 header and the CRC-32C the
 * Sender's drain writes once per batch.
 *
 * How it works: two functions, each the C twin of a documented Python reference implementation in
 * record/builder.py (the tests compare their bytes and errors, tests/record/test_batch_header.py):
 *
 *   finish_batch(out, size, attributes, last_offset_delta, base_timestamp, max_timestamp, producer_id,
 *                producer_epoch, base_sequence, record_count, crc32c) -> memoryview
 *       ``_finish_batch_py``: the header packed into ``out[0:61]`` of the bytearray ``out`` (the
 *       records are at ``[61:size]``; base offset 0, partition leader epoch -1, magic 2), then the
 *       CRC-32C of bytes [21, size) at 17; returns ``memoryview(out)[:size]``. A field outside its
 *       width raises OverflowError naming it (``RecordBatchBuilder.close`` turns it into
 *       InvalidRecordInputError, as it does struct.error from the Python version).
 *   patch_producer_state(batch, producer_id, producer_epoch, base_sequence, is_transactional, crc32c)
 *       -> None or str
 *       ``_set_producer_state_py``: producer id, epoch, base sequence and the transactional bit of a
 *       closed batch rewritten in place, then its CRC; bytes that are not a v2 batch change nothing and
 *       return the reason (``set_producer_state`` raises CorruptRecordBatchError with it).
 *
 * The CRC itself is not computed here: ``crc32c`` is the function record/crc.py chose (the crc32c
 * package, which releases the GIL for large buffers, or the pure-Python one), called once per batch on
 * a read-only view of the bytes while the buffer is exported (so it cannot be resized meanwhile). What
 * C saves is the Python around it: keyword arguments, struct packing of 13 fields, three memoryviews.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_accel_common.h"

#define BATCH_OVERHEAD 61 /* record/layout.py RECORD_BATCH_OVERHEAD */
#define LOG_OVERHEAD 12
#define CRC_OFFSET 17
#define ATTRIBUTES_OFFSET 21
#define PRODUCER_ID_OFFSET 43
#define MAGIC 2
#define TRANSACTIONAL_FLAG 0x10

static inline void put_be16(unsigned char *p, uint16_t v) {
    p[0] = (unsigned char)(v >> 8);
    p[1] = (unsigned char)v;
}

static inline void put_be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static inline void put_be64(unsigned char *p, uint64_t v) {
    put_be32(p, (uint32_t)(v >> 32));
    put_be32(p + 4, (uint32_t)v);
}

static inline uint32_t get_be32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

/* An int argument within [lo, hi]; -1 with OverflowError naming the field (or TypeError) otherwise. */
static int get_field_int(PyObject *obj, const char *name, long long lo, long long hi, long long *out) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (overflow || v < lo || v > hi) {
        PyErr_Format(PyExc_OverflowError, "%s %R is outside [%lld, %lld]", name, obj, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

/* CRC-32C of buf[start:end) by the Python callable ``crc32c``; the caller holds an export of the buffer. */
static int batch_crc(PyObject *crc32c, char *buf, Py_ssize_t start, Py_ssize_t end, uint32_t *out) {
    PyObject *view = PyMemoryView_FromMemory(buf + start, end - start, PyBUF_READ);
    if (view == NULL)
        return -1;
    PyObject *crc = PyObject_Vectorcall(crc32c, &view, 1, NULL);
    Py_DECREF(view);
    if (crc == NULL)
        return -1;
    unsigned long value = PyLong_AsUnsignedLong(crc);
    Py_DECREF(crc);
    if (value == (unsigned long)-1 && PyErr_Occurred())
        return -1;
    if (value > 0xffffffffUL) {
        PyErr_SetString(PyExc_ValueError, "crc32c returned more than 32 bits");
        return -1;
    }
    *out = (uint32_t)value;
    return 0;
}

static PyObject *batch_finish(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 11) {
        PyErr_SetString(PyExc_TypeError,
                        "finish_batch(out, size, attributes, last_offset_delta, base_timestamp, max_timestamp, "
                        "producer_id, producer_epoch, base_sequence, record_count, crc32c) takes 11 arguments");
        return NULL;
    }
    PyObject *out = args[0];
    if (!PyByteArray_Check(out)) {
        PyErr_SetString(PyExc_TypeError, "finish_batch: out must be a bytearray");
        return NULL;
    }
    long long size, attributes, last_delta, base_ts, max_ts, pid, epoch, seq, count;
    /* each conversion checked before the next (an __index__ could run Python code) */
    if (get_field_int(args[1], "size", BATCH_OVERHEAD, INT32_MAX + (long long)LOG_OVERHEAD, &size) < 0
        || get_field_int(args[2], "attributes", INT16_MIN, INT16_MAX, &attributes) < 0
        || get_field_int(args[3], "last_offset_delta", INT32_MIN, INT32_MAX, &last_delta) < 0
        || get_field_int(args[4], "base_timestamp", INT64_MIN, INT64_MAX, &base_ts) < 0
        || get_field_int(args[5], "max_timestamp", INT64_MIN, INT64_MAX, &max_ts) < 0
        || get_field_int(args[6], "producer_id", INT64_MIN, INT64_MAX, &pid) < 0
        || get_field_int(args[7], "producer_epoch", INT16_MIN, INT16_MAX, &epoch) < 0
        || get_field_int(args[8], "base_sequence", INT32_MIN, INT32_MAX, &seq) < 0
        || get_field_int(args[9], "record_count", INT32_MIN, INT32_MAX, &count) < 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(out, &view, PyBUF_WRITABLE) < 0)
        return NULL;
    if (size > view.len) {
        PyBuffer_Release(&view);
        PyErr_Format(PyExc_ValueError, "finish_batch: size %lld is past the end of the %zd-byte buffer", size,
                     view.len);
        return NULL;
    }
    unsigned char *p = (unsigned char *)view.buf;
    put_be64(p, 0);                                    /* baseOffset */
    put_be32(p + 8, (uint32_t)(size - LOG_OVERHEAD));  /* batchLength */
    put_be32(p + 12, (uint32_t)-1);                    /* partitionLeaderEpoch */
    p[16] = MAGIC;
    put_be32(p + CRC_OFFSET, 0);
    put_be16(p + ATTRIBUTES_OFFSET, (uint16_t)attributes);
    put_be32(p + 23, (uint32_t)last_delta);
    put_be64(p + 27, (uint64_t)base_ts);
    put_be64(p + 35, (uint64_t)max_ts);
    put_be64(p + PRODUCER_ID_OFFSET, (uint64_t)pid);
    put_be16(p + 51, (uint16_t)epoch);
    put_be32(p + 53, (uint32_t)seq);
    put_be32(p + 57, (uint32_t)count);
    uint32_t crc;
    int failed = batch_crc(args[10], (char *)p, ATTRIBUTES_OFFSET, (Py_ssize_t)size, &crc);
    if (!failed)
        put_be32(p + CRC_OFFSET, crc);
    PyBuffer_Release(&view);
    if (failed)
        return NULL;
    PyObject *whole = PyMemoryView_FromObject(out);
    if (whole == NULL)
        return NULL;
    PyObject *result = PySequence_GetSlice(whole, 0, (Py_ssize_t)size);
    Py_DECREF(whole);
    return result;
}

static PyObject *batch_patch_producer_state(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "patch_producer_state(batch, producer_id, producer_epoch, base_sequence, "
                                         "is_transactional, crc32c) takes 6 arguments");
        return NULL;
    }
    long long pid, epoch, seq;
    if (get_field_int(args[1], "producer_id", INT64_MIN, INT64_MAX, &pid) < 0
        || get_field_int(args[2], "producer_epoch", INT16_MIN, INT16_MAX, &epoch) < 0
        || get_field_int(args[3], "base_sequence", INT32_MIN, INT32_MAX, &seq) < 0)
        return NULL;
    int transactional = PyObject_IsTrue(args[4]);
    if (transactional < 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_WRITABLE) < 0)
        return NULL;
    unsigned char *p = (unsigned char *)view.buf;
    PyObject *result = NULL;
    if (view.len < BATCH_OVERHEAD || p[16] != MAGIC) {
        result = PyUnicode_FromFormat("not a v2 record batch (need >= %d bytes and magic %d)", BATCH_OVERHEAD,
                                      MAGIC);
        goto done;
    }
    int32_t length = (int32_t)get_be32(p + 8);
    if (length < BATCH_OVERHEAD - LOG_OVERHEAD || (long long)length + LOG_OVERHEAD > (long long)view.len) {
        result = PyUnicode_FromFormat("batchLength %d does not match the %zd bytes given", (int)length, view.len);
        goto done;
    }
    uint16_t attributes = (uint16_t)((p[ATTRIBUTES_OFFSET] << 8) | p[ATTRIBUTES_OFFSET + 1]);
    attributes = transactional ? (uint16_t)(attributes | TRANSACTIONAL_FLAG)
                               : (uint16_t)(attributes & ~TRANSACTIONAL_FLAG);
    put_be16(p + ATTRIBUTES_OFFSET, attributes);
    put_be64(p + PRODUCER_ID_OFFSET, (uint64_t)pid);
    put_be16(p + 51, (uint16_t)epoch);
    put_be32(p + 53, (uint32_t)seq);
    uint32_t crc;
    if (batch_crc(args[5], (char *)p, ATTRIBUTES_OFFSET, LOG_OVERHEAD + (Py_ssize_t)length, &crc) < 0)
        goto done;
    put_be32(p + CRC_OFFSET, crc);
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef batch_methods[] = {
    {"finish_batch", (PyCFunction)(void (*)(void))batch_finish, METH_FASTCALL,
     "Pack a v2 batch header and its CRC-32C in front of the records (record/builder.py _finish_batch_py)."},
    {"patch_producer_state", (PyCFunction)(void (*)(void))batch_patch_producer_state, METH_FASTCALL,
     "Rewrite a closed batch's producer state and CRC (record/builder.py _set_producer_state_py)."},
    {NULL, NULL, 0, NULL},
};

int sparkafka_add_batch_functions(PyObject *module) { return PyModule_AddFunctions(module, batch_methods); }
