/* sparkafka._accel: optional C versions of the hottest pure-Python loops.
 *
 * How it works: the module is built by setup.py as an optional setuptools Extension; when it is
 * missing (no compiler) or SPARKAFKA_NO_ACCEL=1 is set, sparkafka uses its pure-Python code, which
 * gives the same results (the tests run both). It provides:
 *
 *   murmur2(data) -> int              Kafka's murmur2 of a bytes-like object (signed 32-bit, as Java)
 *   partition_for_key(key, n) -> int  (murmur2(key) & 0x7fffffff) % n, n >= 1
 *   write_record(buf, pos, size, ts_delta, offset_delta, key, value) -> end
 *       one v2 record without headers written into the bytearray ``buf`` at ``pos`` (grown when
 *       needed): varint(size), attributes 0, varint(ts_delta), varint(offset_delta), key, value,
 *       0 headers. ``size`` (the body size the caller accounted) is checked against what is written.
 *   append_tails(buf, pooled, pos, n, ts_delta, offsets, data, start, stop, uncompressed, estimate,
 *                factor, write_limit) -> (count, written)
 *       RecordBatchBuilder.append_tails: many records from pre-encoded tails (the bulk Arrow path).
 *   partitions_for_offsets(offsets, data, start, count, num_partitions[, wide]) -> bytearray
 *       murmur2 partitions of ``count`` byte strings laid out as an Arrow binary column (offsets +
 *       data; int64 offsets when ``wide``, the default, else int32), as native int32s.
 *   encode_tails_kv(koffsets, kdata, kvalid, kfirst, kwide, voffsets, vdata, vvalid, vfirst, vwide, n)
 *       -> (offsets, data)
 *       the record tails (producer/arrow/tails.py encode_tails) of n rows of a key and a value column without
 *       headers, as the int64 offsets and the data of a large_binary array (two bytearrays). The
 *       loops run without the GIL (the Sender thread keeps working meanwhile) when every input
 *       buffer is read-only (Arrow IPC data as Spark hands it over); writable ones keep the GIL.
 *   encode_tails_kvh(k x5, v x5, loffsets, lvalid, lfirst, lwide, hk x5, hv x5, items, n) -> (offsets, data)
 *       the same with headers: a list column (offsets into ``items`` header items, validity) and the
 *       items' key and value columns.
 *   run_success_callbacks(callbacks, metadata_type, topic, partition, base, base_ts, log_append_time, report)
 *       the callbacks of a successful batch, each with its RecordMetadata (see below).
 *   BuilderState, BatchState, FutureState, StickyState, PartitionerState (_append.c): the state the
 *       open-batch append reads and changes, and the rule (RecordBatchBuilder.try_append_open,
 *       ProducerBatch.try_append_open); _append.h is the interface between the producer and the C code.
 *   SendLane (_send_lane.c): KafkaProducer.send() for the common record in one C call.
 *   wait_for_io(epoll_fd, timeout_ms, max_events), hand_over_gil() (_sender_io.c): the Sender's socket wait,
 *       and the sending threads giving the GIL to it as soon as that wait ends.
 *   io_thread(), send_turn_stats() (_send_turns.c): busy sending threads taking turns without the GIL.
 *   finish_batch, patch_producer_state (_batch.c): a drained batch's header and CRC-32C.
 *   decode_produce_response (_produce_response.c): the Produce response body as protocol/produce.py decodes it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_accel_common.h"
#include "_append.h"
#include "_sender_io.h"

/* The divisor of (h & 0x7fffffff) % n for a count n >= 1 as a uint32: a count above 2^31 - 1 is larger
 * than any positive hash, so 2^31 gives the same result (a plain cast made 2^32 divide by zero). */
static inline uint32_t partition_divisor(long n) {
    return n > 0x7fffffffL ? 0x80000000u : (uint32_t)n;
}

/* Hash any bytes-like object; returns 0 and sets *out, or -1 with an exception set. */
static int hash_object(PyObject *obj, uint32_t *out) {
    if (PyBytes_CheckExact(obj)) {
        *out = murmur2_u32((const unsigned char *)PyBytes_AS_STRING(obj), PyBytes_GET_SIZE(obj));
        return 0;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE) < 0)
        return -1;
    *out = murmur2_u32((const unsigned char *)view.buf, view.len);
    PyBuffer_Release(&view);
    return 0;
}

static PyObject *accel_murmur2(PyObject *self, PyObject *data) {
    uint32_t h;
    if (hash_object(data, &h) < 0)
        return NULL;
    return PyLong_FromLong((long)(int32_t)h);
}

static PyObject *accel_partition_for_key(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "partition_for_key(key, num_partitions) takes 2 arguments");
        return NULL;
    }
    long n = PyLong_AsLong(args[1]);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (n < 1) {
        PyErr_Format(PyExc_ValueError, "num_partitions must be >= 1, got %ld", n);
        return NULL;
    }
    uint32_t h;
    if (hash_object(args[0], &h) < 0)
        return NULL;
    return PyLong_FromLong((long)((h & 0x7fffffffu) % partition_divisor(n)));
}

/* ---- record encoding ------------------------------------------------------------------------- */

/* write_record(buf, pos, size, ts_delta, offset_delta, key, value) -> end
 * Writes one record without headers into the bytearray ``buf`` at ``pos`` (which must be <= len(buf));
 * ``buf`` is grown when the record ends past it. ``size`` is the record's body size as accounted by
 * the caller; it must match what is written. */
static PyObject *accel_write_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "write_record(buf, pos, size, ts_delta, offset_delta, key, value) takes 7 arguments");
        return NULL;
    }
    PyObject *buf = args[0];
    if (!PyByteArray_Check(buf)) {
        PyErr_SetString(PyExc_TypeError, "write_record: buf must be a bytearray");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred())
        return NULL;
    long long size = PyLong_AsLongLong(args[2]);
    if (size == -1 && PyErr_Occurred())
        return NULL;
    long long ts_delta = PyLong_AsLongLong(args[3]);
    if (ts_delta == -1 && PyErr_Occurred())
        return NULL;
    long long offset_delta = PyLong_AsLongLong(args[4]);
    if (offset_delta == -1 && PyErr_Occurred())
        return NULL;
    if (pos < 0 || pos > PyByteArray_GET_SIZE(buf) || size < 0 || size > PY_SSIZE_T_MAX / 4) {
        PyErr_SetString(PyExc_ValueError, "write_record: bad position or size");
        return NULL;
    }
    field_t key, value;
    if (get_field(args[5], &key) < 0)
        return NULL;
    if (get_field(args[6], &value) < 0) {
        release_field(&key);
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t body = record_body_size(ts_delta, offset_delta, key.len, value.len);
    if (body != size) {
        PyErr_Format(PyExc_ValueError, "write_record: the record encodes to %zd bytes, but %lld were accounted",
                     body, size);
        goto done;
    }
    Py_ssize_t end = pos + varint_len(size) + body;
    if (end > PyByteArray_GET_SIZE(buf) && PyByteArray_Resize(buf, end) < 0)
        goto done;
    put_record(PyByteArray_AS_STRING(buf) + pos, size, ts_delta, offset_delta, key.buf, key.len, value.buf, value.len);
    result = PyLong_FromSsize_t(end);
done:
    release_field(&key);
    release_field(&value);
    return result;
}

/* ---- the bulk (Arrow) path ------------------------------------------------------------------- */

/* A read-only buffer argument (any object with the buffer protocol). */
static int get_ro_buffer(PyObject *obj, Py_buffer *view, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        if (PyObject_GetBuffer(obj, view, PyBUF_ND) < 0) {
            PyErr_Format(PyExc_TypeError, "%s must support the buffer protocol", what);
            return -1;
        }
    }
    return 0;
}

/* Offsets of an Arrow binary column, 32- or 64-bit. */
typedef struct {
    const void *off;
    int wide;
} offsets_t;

static inline int64_t off_at(const offsets_t *o, Py_ssize_t i) {
    return o->wide ? ((const int64_t *)o->off)[i] : (int64_t)((const int32_t *)o->off)[i];
}

/* The error of offsets that decrease or point past their data (check_column, append_tails). */
static int bad_offsets(void) {
    PyErr_SetString(PyExc_ValueError, "offsets are not increasing or point past the data buffer");
    return -1;
}

/* Rows [start, start + count] of the offsets must exist, increase, and stay inside data. */
static int check_column(const offsets_t *o, Py_ssize_t off_bytes, Py_ssize_t data_len, Py_ssize_t start,
                        Py_ssize_t count) {
    Py_ssize_t n_off = off_bytes / (o->wide ? 8 : 4);
    if (start < 0 || count < 0 || start + count >= n_off) {
        PyErr_SetString(PyExc_ValueError, "row range outside the offsets buffer");
        return -1;
    }
    int64_t prev = off_at(o, start);
    if (prev < 0)
        goto bad;
    for (Py_ssize_t i = start + 1; i <= start + count; i++) {
        int64_t cur = off_at(o, i);
        if (cur < prev)
            goto bad;
        prev = cur;
    }
    if (prev > data_len)
        goto bad;
    return 0;
bad:
    return bad_offsets();
}

/* append_tails(buf, pooled, pos, n, ts_delta, offsets, data, start, stop, uncompressed, estimate, factor,
 *              write_limit) -> (count, written)
 * Appends records (offset deltas n, n+1, ...) whose tails are rows [start, stop) while they fit: the
 * first record of an empty batch (n == 0) always fits, later ones while estimate + size <= write_limit and,
 * when compressing (factor != 0), the bytes held uncompressed (pos - 61) + size <= 2 * write_limit (the
 * caller compresses them and calls again: RecordBatchBuilder.append_tails); after each record
 * estimate = 61 + uncompressed (scaled by factor). Returns the count and the bytes written. If the records
 * that fit would run past the end of a pooled buffer nothing is written and (-1, bytes needed) returned. */
static PyObject *accel_append_tails(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 13) {
        PyErr_SetString(PyExc_TypeError, "append_tails takes 13 arguments");
        return NULL;
    }
    PyObject *buf = args[0];
    if (!PyByteArray_Check(buf)) {
        PyErr_SetString(PyExc_TypeError, "append_tails: buf must be a bytearray");
        return NULL;
    }
    int pooled = PyObject_IsTrue(args[1]);
    if (pooled < 0)
        return NULL;
    /* each conversion checked before the next (a later one can run Python code) */
    Py_ssize_t pos, start, stop;
    long long n, ts_delta, uncompressed, estimate, limit;
    double factor;
    if (((pos = PyLong_AsSsize_t(args[2])) == -1 && PyErr_Occurred())
        || ((n = PyLong_AsLongLong(args[3])) == -1 && PyErr_Occurred())
        || ((ts_delta = PyLong_AsLongLong(args[4])) == -1 && PyErr_Occurred())
        || ((start = PyLong_AsSsize_t(args[7])) == -1 && PyErr_Occurred())
        || ((stop = PyLong_AsSsize_t(args[8])) == -1 && PyErr_Occurred())
        || ((uncompressed = PyLong_AsLongLong(args[9])) == -1 && PyErr_Occurred())
        || ((estimate = PyLong_AsLongLong(args[10])) == -1 && PyErr_Occurred())
        || ((factor = PyFloat_AsDouble(args[11])) == -1.0 && PyErr_Occurred())
        || ((limit = PyLong_AsLongLong(args[12])) == -1 && PyErr_Occurred()))
        return NULL;
    if (pos < 0 || pos > PyByteArray_GET_SIZE(buf) || n < 0) {
        PyErr_SetString(PyExc_ValueError, "append_tails: bad position or record count");
        return NULL;
    }
    Py_buffer ov, dv;
    if (get_ro_buffer(args[5], &ov, "offsets") < 0)
        return NULL;
    if (get_ro_buffer(args[6], &dv, "data") < 0) {
        PyBuffer_Release(&ov);
        return NULL;
    }
    PyObject *result = NULL;
    const int64_t *off = (const int64_t *)ov.buf;
    const char *data = (const char *)dv.buf;
    /* The range must lie in the offsets buffer; each row's offsets are checked as pass 1 reaches it
     * (increasing, within the data), before anything is written. Checking all of [start, stop) up
     * front re-read the rest of a partition's rows for every batch: 190 instructions per row of a
     * 10,000-row Arrow batch at 16 KiB batches (callgrind). */
    if (start < 0 || stop < start || stop >= ov.len / (Py_ssize_t)sizeof(int64_t)) {
        PyErr_SetString(PyExc_ValueError, "row range outside the offsets buffer");
        goto done;
    }
    if (off[start] < 0)
        goto bad;
    /* pass 1: how many fit, and their bytes */
    Py_ssize_t ts_len = varint_len(ts_delta);
    long long cap = 2 * limit, held = pos - 61; /* MAX_UNCOMPRESSED_RATIO: the bytes held uncompressed */
    long long written = 0, k = n;
    Py_ssize_t i = start;
    for (; i < stop; i++, k++) {
        if (off[i + 1] < off[i] || off[i + 1] > (int64_t)dv.len)
            goto bad;
        long long body = 1 + ts_len + varint_len(k) + (off[i + 1] - off[i]);
        long long total = varint_len(body) + body;
        if (k > 0 && (estimate + total > limit || (factor != 0.0 && held + written + total > cap)))
            break;
        written += total;
        long long after = uncompressed + written;
        estimate = 61 + (factor != 0.0 ? (long long)((double)after * factor) : after);
    }
    Py_ssize_t count = i - start;
    Py_ssize_t end = pos + (Py_ssize_t)written;
    if (end > PyByteArray_GET_SIZE(buf)) {
        if (pooled) {
            result = Py_BuildValue("(nL)", (Py_ssize_t)-1, written);
            goto done;
        }
        if (PyByteArray_Resize(buf, end) < 0)
            goto done;
    }
    /* pass 2: write them */
    char *p = PyByteArray_AS_STRING(buf) + pos;
    k = n;
    for (i = start; i < start + count; i++, k++) {
        Py_ssize_t len = (Py_ssize_t)(off[i + 1] - off[i]);
        long long body = 1 + ts_len + varint_len(k) + len;
        p = put_varint(p, body);
        *p++ = 0;
        p = put_varint(p, ts_delta);
        p = put_varint(p, k);
        memcpy(p, data + off[i], (size_t)len);
        p += len;
    }
    result = Py_BuildValue("(nL)", count, written);
    goto done;
bad:
    bad_offsets();
done:
    PyBuffer_Release(&ov);
    PyBuffer_Release(&dv);
    return result;
}

/* group_tails(offsets, data, first, count, parts, num_partitions) -> (offsets, data, groups) or None
 * The bulk path's grouping by partition (producer/arrow/bulk.py): rows [first, first + count) of the
 * tails (int64 ``offsets``, ``data``) with partitions ``parts`` (count native int32) are copied,
 * partition after partition in ascending order and in row order within one, into new buffers:
 * (int64 offsets as bytes, the data as a bytearray, [(partition, start, stop)]); a counting sort, so one
 * pass to count and one to copy. (None, None, [(partition, 0, count)]) when every row has the same
 * partition (nothing copied); None when a partition is outside [0, num_partitions) (the caller's general
 * path then decides). It replaces Arrow's value_counts + sort_indices + take, whose hash kernel and
 * per-row Status objects cost ~100 instructions per row (callgrind). */
static PyObject *accel_group_tails(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "group_tails takes 6 arguments");
        return NULL;
    }
    /* each conversion checked before the next (a later one can run Python code) */
    Py_ssize_t first, count;
    long np;
    if (((first = PyLong_AsSsize_t(args[2])) == -1 && PyErr_Occurred())
        || ((count = PyLong_AsSsize_t(args[3])) == -1 && PyErr_Occurred())
        || ((np = PyLong_AsLong(args[5])) == -1 && PyErr_Occurred()))
        return NULL;
    if (np < 1 || count < 1 || first < 0) {
        PyErr_Format(PyExc_ValueError, "group_tails: num_partitions (%ld) and count (%zd) must be >= 1, first >= 0",
                     np, count);
        return NULL;
    }
    Py_buffer ov, dv, pv;
    if (get_ro_buffer(args[0], &ov, "offsets") < 0)
        return NULL;
    if (get_ro_buffer(args[1], &dv, "data") < 0) {
        PyBuffer_Release(&ov);
        return NULL;
    }
    if (get_ro_buffer(args[4], &pv, "parts") < 0) {
        PyBuffer_Release(&ov);
        PyBuffer_Release(&dv);
        return NULL;
    }
    PyObject *result = NULL, *out_off = NULL, *out_data = NULL, *groups = NULL;
    Py_ssize_t *next = NULL;
    const int64_t *off = (const int64_t *)ov.buf;
    const int32_t *parts = (const int32_t *)pv.buf;
    if (first + count >= ov.len / (Py_ssize_t)sizeof(int64_t) || pv.len / (Py_ssize_t)sizeof(int32_t) < count) {
        PyErr_SetString(PyExc_ValueError, "row range outside the offsets or partitions buffer");
        goto done;
    }
    next = PyMem_Calloc((size_t)np + 1, sizeof(Py_ssize_t));
    if (next == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* pass 1: count the rows of each partition (in next[p + 1]) and check each row's offsets in the same
     * loop (check_column's rule; a pass of its own cost ~45 instructions per row more, callgrind) */
    if (off[first] < 0)
        goto bad;
    for (Py_ssize_t i = 0; i < count; i++) {
        int32_t p = parts[i];
        if (p < 0 || p >= np) {
            result = Py_None;
            Py_INCREF(result);
            goto done;
        }
        if (off[first + i + 1] < off[first + i] || off[first + i + 1] > (int64_t)dv.len)
            goto bad;
        next[p + 1]++;
    }
    groups = PyList_New(0);
    if (groups == NULL)
        goto done;
    /* next[p] becomes the first sorted position of partition p */
    for (long p = 0; p < np; p++) {
        Py_ssize_t rows = next[p + 1];
        next[p + 1] = next[p] + rows;
        if (rows == 0)
            continue;
        PyObject *g = Py_BuildValue("(lnn)", p, next[p], next[p] + rows);
        if (g == NULL || PyList_Append(groups, g) < 0) {
            Py_XDECREF(g);
            goto done;
        }
        Py_DECREF(g);
        if (rows == count) { /* one partition: the rows stay where they are */
            result = Py_BuildValue("(OOO)", Py_None, Py_None, groups);
            goto done;
        }
    }
    /* pass 2: each row's bytes to its place; the offsets of sorted position k go in out[k] */
    int64_t total = off[first + count] - off[first];
    out_off = PyBytes_FromStringAndSize(NULL, (count + 1) * (Py_ssize_t)sizeof(int64_t));
    out_data = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (out_off == NULL || out_data == NULL)
        goto done;
    int64_t *o = (int64_t *)PyBytes_AS_STRING(out_off);
    char *dst = PyByteArray_AS_STRING(out_data);
    const char *src = (const char *)dv.buf;
    /* sizes first (o[k + 1] = length of the row at sorted position k), then a running sum, then copies */
    Py_ssize_t *pos = next; /* next[p]: the next free sorted position of partition p */
    o[0] = 0;
    for (Py_ssize_t i = 0; i < count; i++)
        o[pos[parts[i]]++ + 1] = off[first + i + 1] - off[first + i];
    for (Py_ssize_t k = 0; k < count; k++)
        o[k + 1] += o[k];
    /* pos[p] now ends partition p: walk the rows backwards to find each one's sorted position again */
    for (Py_ssize_t i = count - 1; i >= 0; i--) {
        Py_ssize_t k = --pos[parts[i]];
        memcpy(dst + o[k], src + off[first + i], (size_t)(o[k + 1] - o[k]));
    }
    result = Py_BuildValue("(OOO)", out_off, out_data, groups);
    goto done;
bad:
    bad_offsets();
done:
    PyMem_Free(next);
    Py_XDECREF(out_off);
    Py_XDECREF(out_data);
    Py_XDECREF(groups);
    PyBuffer_Release(&ov);
    PyBuffer_Release(&dv);
    PyBuffer_Release(&pv);
    return result;
}

/* The error of an encoder that found its input changed while it read it without the GIL (see span_at). */
static const char CHANGED[] = "%s: the input buffers changed while they were read (another thread writing them?)";

/* partitions_for_offsets(offsets, data, start, count, num_partitions[, wide]) -> bytearray of count
 * native int32 */
static PyObject *accel_partitions_for_offsets(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5 && nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "partitions_for_offsets takes 5 or 6 arguments");
        return NULL;
    }
    /* each conversion checked before the next (a later one can run Python code) */
    Py_ssize_t start = PyLong_AsSsize_t(args[2]);
    if (start == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t count = PyLong_AsSsize_t(args[3]);
    if (count == -1 && PyErr_Occurred())
        return NULL;
    long np = PyLong_AsLong(args[4]);
    if (np == -1 && PyErr_Occurred())
        return NULL;
    int wide = nargs == 6 ? PyObject_IsTrue(args[5]) : 1;
    if (wide < 0)
        return NULL;
    if (np < 1 || count < 0) {
        PyErr_Format(PyExc_ValueError, "num_partitions must be >= 1 (got %ld) and count >= 0", np);
        return NULL;
    }
    Py_buffer ov, dv;
    if (get_ro_buffer(args[0], &ov, "offsets") < 0)
        return NULL;
    if (get_ro_buffer(args[1], &dv, "data") < 0) {
        PyBuffer_Release(&ov);
        return NULL;
    }
    PyObject *out = NULL;
    offsets_t o = {ov.buf, wide};
    if (check_column(&o, ov.len, dv.len, start, count) < 0)
        goto done;
    out = PyByteArray_FromStringAndSize(NULL, count * (Py_ssize_t)sizeof(int32_t));
    if (out == NULL)
        goto done;
    int32_t *parts = (int32_t *)PyByteArray_AS_STRING(out);
    const unsigned char *data = (const unsigned char *)dv.buf;
    uint32_t divisor = partition_divisor(np);
    /* without the GIL only when no Python thread can change the offsets checked above meanwhile */
    PyThreadState *released = ov.readonly && dv.readonly ? PyEval_SaveThread() : NULL;
    int changed = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t lo = off_at(&o, start + i), hi = off_at(&o, start + i + 1);
        if (lo < 0 || hi < lo || hi > (int64_t)dv.len) { /* changed since checked: see span_at */
            changed = 1;
            break;
        }
        uint32_t h = murmur2_u32(data + lo, (Py_ssize_t)(hi - lo));
        parts[i] = (int32_t)((h & 0x7fffffffu) % divisor);
    }
    if (released != NULL)
        PyEval_RestoreThread(released);
    if (changed) {
        PyErr_Format(PyExc_ValueError, CHANGED, "partitions_for_offsets");
        Py_CLEAR(out);
    }
done:
    PyBuffer_Release(&ov);
    PyBuffer_Release(&dv);
    return out;
}

/* One column of encode_tails_kv: offsets, data and an optional validity bitmap (bit first + i). */
typedef struct {
    Py_buffer ov, dv, vv;
    int has_o, has_d, has_v;
    offsets_t o;
    Py_ssize_t first;
} column_t;

static void release_column(column_t *c) {
    if (c->has_o)
        PyBuffer_Release(&c->ov);
    if (c->has_d)
        PyBuffer_Release(&c->dv);
    if (c->has_v)
        PyBuffer_Release(&c->vv);
    c->has_o = c->has_d = c->has_v = 0;
}

/* Rows [first + skip, first + skip + n) of a column (args: offsets, data, validity or None, first, wide). */
static int get_column_span(PyObject *const *args, Py_ssize_t skip, Py_ssize_t n, column_t *c, const char *what) {
    c->has_o = c->has_d = c->has_v = 0;
    c->first = PyLong_AsSsize_t(args[3]);
    if (c->first == -1 && PyErr_Occurred())
        return -1;
    c->first += skip;
    int wide = PyObject_IsTrue(args[4]);
    if (wide < 0)
        return -1;
    if (get_ro_buffer(args[0], &c->ov, what) < 0)
        return -1;
    c->has_o = 1;
    if (get_ro_buffer(args[1], &c->dv, what) < 0)
        return -1;
    c->has_d = 1;
    if (args[2] != Py_None) {
        if (get_ro_buffer(args[2], &c->vv, what) < 0)
            return -1;
        c->has_v = 1;
        if (c->first < 0 || (c->first + n + 7) / 8 > c->vv.len) {
            PyErr_Format(PyExc_ValueError, "%s: validity bitmap shorter than the rows", what);
            return -1;
        }
    }
    c->o.off = c->ov.buf;
    c->o.wide = wide;
    return check_column(&c->o, c->ov.len, c->dv.len, c->first, n);
}

static int get_column(PyObject *const *args, Py_ssize_t n, column_t *c, const char *what) {
    return get_column_span(args, 0, n, c, what);
}

/* The bytes of row i: its length, or -1 for a null. */
static inline int64_t column_len(const column_t *c, Py_ssize_t i) {
    Py_ssize_t j = c->first + i;
    if (c->has_v && !((((const unsigned char *)c->vv.buf)[j >> 3] >> (j & 7)) & 1))
        return -1;
    return off_at(&c->o, j + 1) - off_at(&c->o, j);
}

/* Where row i's ``len`` (> 0) bytes start in the column's data, or NULL when they no longer lie inside
 * it. The encoders read read-only buffers without the GIL, and read-only is not unchanging (a read-only
 * view of a bytearray another thread writes): check_column's checks can be stale by then, so every copy
 * is checked again, and a change is an error instead of a write past the output (reviewed: a heap
 * overflow, "double free or corruption"). */
static inline const char *span_at(const column_t *c, Py_ssize_t i, int64_t len) {
    int64_t start = off_at(&c->o, c->first + i);
    if (len > INT32_MAX || start < 0 || start > (int64_t)c->dv.len - len)
        return NULL;
    return (const char *)c->dv.buf + start;
}


static PyObject *accel_encode_tails_kv(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 11) {
        PyErr_SetString(PyExc_TypeError, "encode_tails_kv takes 11 arguments");
        return NULL;
    }
    Py_ssize_t n = PyLong_AsSsize_t(args[10]);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "encode_tails_kv: negative row count");
        return NULL;
    }
    column_t k, v;
    k.has_o = k.has_d = k.has_v = 0;
    v.has_o = v.has_d = v.has_v = 0;
    int has_key = args[0] != Py_None;
    PyObject *offsets = NULL, *data = NULL, *result = NULL;
    if (has_key && get_column(args, n, &k, "keys") < 0)
        goto done;
    if (get_column(args + 5, n, &v, "values") < 0)
        goto done;
    /* Without the GIL only when every input buffer is read-only (Arrow IPC data, bytes): pass 2
     * trusts the sizes of pass 1, so a Python thread changing a writable offsets or validity buffer
     * between the passes would make it write past ``data``. Writable buffers keep the GIL. */
    int nogil = v.ov.readonly && v.dv.readonly && (!v.has_v || v.vv.readonly)
                && (!has_key || (k.ov.readonly && k.dv.readonly && (!k.has_v || k.vv.readonly)));
    PyThreadState *released;
    /* pass 1: the size of every tail; lengths are int32 in the record format */
    int64_t total = 0;
    int too_long = 0;
    released = nogil ? PyEval_SaveThread() : NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t kl = has_key ? column_len(&k, i) : -1;
        int64_t vl = column_len(&v, i);
        if (kl > INT32_MAX || vl > INT32_MAX) {
            too_long = 1;
            break;
        }
        total += varint_len(kl) + (kl > 0 ? kl : 0) + varint_len(vl) + (vl > 0 ? vl : 0) + 1;
    }
    if (released != NULL)
        PyEval_RestoreThread(released);
    if (too_long) {
        PyErr_SetString(PyExc_ValueError, "a key or value is longer than 2^31-1 bytes");
        goto done;
    }
    offsets = PyByteArray_FromStringAndSize(NULL, (n + 1) * (Py_ssize_t)sizeof(int64_t));
    data = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(total > 0 ? total : 0));
    if (offsets == NULL || data == NULL)
        goto done;
    /* pass 2: write them (the bytearrays are not shared with anyone yet) */
    int64_t *out_off = (int64_t *)PyByteArray_AS_STRING(offsets);
    char *base = PyByteArray_AS_STRING(data);
    released = nogil ? PyEval_SaveThread() : NULL;
    char *p = base;
    char *const end = base + (total > 0 ? total : 0);
    int changed = 0;
    out_off[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t kl = has_key ? column_len(&k, i) : -1;
        int64_t vl = column_len(&v, i);
        const char *kp = kl > 0 ? span_at(&k, i, kl) : NULL;
        const char *vp = vl > 0 ? span_at(&v, i, vl) : NULL;
        if ((kl > 0 && kp == NULL) || (vl > 0 && vp == NULL) || kl < -1 || vl < -1
            || varint_len(kl) + (kl > 0 ? kl : 0) + varint_len(vl) + (vl > 0 ? vl : 0) + 1 > end - p) {
            changed = 1;
            break;
        }
        p = put_tail(p, kp, (Py_ssize_t)kl, vp, (Py_ssize_t)vl);
        out_off[i + 1] = (int64_t)(p - base);
    }
    if (released != NULL)
        PyEval_RestoreThread(released);
    if (changed || p != end) {
        PyErr_Format(PyExc_ValueError, CHANGED, "encode_tails_kv");
        goto done;
    }
    result = PyTuple_Pack(2, offsets, data);
done:
    Py_XDECREF(offsets);
    Py_XDECREF(data);
    release_column(&k);
    release_column(&v);
    return result;
}

/* The list column of encode_tails_kvh: offsets into the header items, an optional validity bitmap. */
typedef struct {
    Py_buffer ov, vv;
    int has_o, has_v;
    offsets_t o;
    Py_ssize_t first;
} list_t;

static void release_list(list_t *l) {
    if (l->has_o)
        PyBuffer_Release(&l->ov);
    if (l->has_v)
        PyBuffer_Release(&l->vv);
    l->has_o = l->has_v = 0;
}

/* args: offsets, validity or None, first, wide; rows [first, first + n]; offsets within [0, items]. */
static int get_list(PyObject *const *args, Py_ssize_t n, Py_ssize_t items, list_t *l) {
    l->has_o = l->has_v = 0;
    l->first = PyLong_AsSsize_t(args[2]);
    if (l->first == -1 && PyErr_Occurred())
        return -1;
    int wide = PyObject_IsTrue(args[3]);
    if (wide < 0)
        return -1;
    if (get_ro_buffer(args[0], &l->ov, "headers") < 0)
        return -1;
    l->has_o = 1;
    if (args[1] != Py_None) {
        if (get_ro_buffer(args[1], &l->vv, "headers") < 0)
            return -1;
        l->has_v = 1;
        if (l->first < 0 || (l->first + n + 7) / 8 > l->vv.len) {
            PyErr_SetString(PyExc_ValueError, "headers: validity bitmap shorter than the rows");
            return -1;
        }
    }
    l->o.off = l->ov.buf;
    l->o.wide = wide;
    return check_column(&l->o, l->ov.len, items, l->first, n);
}

static inline int list_valid(const list_t *l, Py_ssize_t i) {
    Py_ssize_t j = l->first + i;
    return !l->has_v || ((((const unsigned char *)l->vv.buf)[j >> 3] >> (j & 7)) & 1);
}

static inline int ro_column(const column_t *c) {
    return c->ov.readonly && c->dv.readonly && (!c->has_v || c->vv.readonly);
}

/* Row j's length and bytes at *pp, if they fit before ``end`` and lie inside the column's data (see
 * span_at); 0, with nothing written, otherwise. */
static inline int put_bytes(char **pp, const char *end, const column_t *c, Py_ssize_t j) {
    int64_t len = column_len(c, j);
    const char *src = len > 0 ? span_at(c, j, len) : NULL;
    if ((len > 0 && src == NULL) || len < -1 || varint_len(len) + (len > 0 ? len : 0) > end - *pp)
        return 0;
    char *p = put_varint(*pp, len);
    if (len > 0) {
        memcpy(p, src, (size_t)len);
        p += len;
    }
    *pp = p;
    return 1;
}

/* encode_tails_kvh(k x5, v x5, loffsets, lvalid, lfirst, lwide, hk x5, hv x5, items, n) -> (offsets, data)
 * encode_tails_kv with headers: row i's headers are the header items [lo, hi) of the list offsets (a null
 * list is no headers), item j's key and value are row j of the hk and hv columns (``items`` rows each);
 * each header is ``keyLength key valueLength value`` after the header count (Java DefaultRecord). */
static PyObject *accel_encode_tails_kvh(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 26) {
        PyErr_SetString(PyExc_TypeError, "encode_tails_kvh takes 26 arguments");
        return NULL;
    }
    Py_ssize_t items = PyLong_AsSsize_t(args[24]);
    if (items == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t n = PyLong_AsSsize_t(args[25]);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (n < 0 || items < 0) {
        PyErr_SetString(PyExc_ValueError, "encode_tails_kvh: negative row or item count");
        return NULL;
    }
    column_t k, v, hk, hv;
    list_t l;
    k.has_o = k.has_d = k.has_v = 0;
    v.has_o = v.has_d = v.has_v = 0;
    hk.has_o = hk.has_d = hk.has_v = 0;
    hv.has_o = hv.has_d = hv.has_v = 0;
    l.has_o = l.has_v = 0;
    int has_key = args[0] != Py_None;
    PyObject *offsets = NULL, *data = NULL, *result = NULL;
    if (has_key && get_column(args, n, &k, "keys") < 0)
        goto done;
    if (get_column(args + 5, n, &v, "values") < 0)
        goto done;
    if (get_list(args + 10, n, items, &l) < 0)
        goto done;
    /* only the items of these rows are read (and checked): slicing a big column into many parts stays linear */
    Py_ssize_t item_lo = (Py_ssize_t)off_at(&l.o, l.first), item_hi = (Py_ssize_t)off_at(&l.o, l.first + n);
    if (get_column_span(args + 14, item_lo, item_hi - item_lo, &hk, "header keys") < 0)
        goto done;
    if (get_column_span(args + 19, item_lo, item_hi - item_lo, &hv, "header values") < 0)
        goto done;
    /* without the GIL only when every input buffer is read-only (see encode_tails_kv) */
    int nogil = ro_column(&v) && (!has_key || ro_column(&k)) && ro_column(&hk) && ro_column(&hv)
                && l.ov.readonly && (!l.has_v || l.vv.readonly);
    PyThreadState *released;
    int64_t total = 0;
    int too_long = 0, changed = 0;
    released = nogil ? PyEval_SaveThread() : NULL;
    for (Py_ssize_t i = 0; i < n && !too_long; i++) {
        int64_t kl = has_key ? column_len(&k, i) : -1;
        int64_t vl = column_len(&v, i);
        if (kl > INT32_MAX || vl > INT32_MAX) {
            too_long = 1;
            break;
        }
        total += varint_len(kl) + (kl > 0 ? kl : 0) + varint_len(vl) + (vl > 0 ? vl : 0);
        int64_t lo = 0, hi = 0;
        if (list_valid(&l, i)) {
            lo = off_at(&l.o, l.first + i);
            hi = off_at(&l.o, l.first + i + 1);
            if (lo < item_lo || hi < lo || hi > item_hi) { /* changed since get_list checked them */
                changed = 1;
                break;
            }
        }
        total += varint_len(hi - lo);
        for (int64_t j = lo; j < hi; j++) {
            int64_t hkl = column_len(&hk, (Py_ssize_t)(j - item_lo));
            int64_t hvl = column_len(&hv, (Py_ssize_t)(j - item_lo));
            if (hkl > INT32_MAX || hvl > INT32_MAX) {
                too_long = 1;
                break;
            }
            total += varint_len(hkl) + (hkl > 0 ? hkl : 0) + varint_len(hvl) + (hvl > 0 ? hvl : 0);
        }
    }
    if (released != NULL)
        PyEval_RestoreThread(released);
    if (changed) {
        PyErr_Format(PyExc_ValueError, CHANGED, "encode_tails_kvh");
        goto done;
    }
    if (too_long) {
        PyErr_SetString(PyExc_ValueError, "a key, value or header is longer than 2^31-1 bytes");
        goto done;
    }
    offsets = PyByteArray_FromStringAndSize(NULL, (n + 1) * (Py_ssize_t)sizeof(int64_t));
    data = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(total > 0 ? total : 0));
    if (offsets == NULL || data == NULL)
        goto done;
    int64_t *out_off = (int64_t *)PyByteArray_AS_STRING(offsets);
    char *base = PyByteArray_AS_STRING(data);
    released = nogil ? PyEval_SaveThread() : NULL;
    char *p = base;
    char *const end = base + (total > 0 ? total : 0);
    out_off[0] = 0;
    for (Py_ssize_t i = 0; i < n && !changed; i++) {
        if (has_key) {
            changed = !put_bytes(&p, end, &k, i);
        } else if (p < end) {
            p = put_varint(p, -1);
        } else {
            changed = 1;
        }
        changed = changed || !put_bytes(&p, end, &v, i);
        int64_t lo = 0, hi = 0;
        if (!changed && list_valid(&l, i)) {
            lo = off_at(&l.o, l.first + i);
            hi = off_at(&l.o, l.first + i + 1);
            changed = lo < item_lo || hi < lo || hi > item_hi;
        }
        changed = changed || varint_len(hi - lo) > end - p;
        if (!changed)
            p = put_varint(p, hi - lo);
        for (int64_t j = lo; j < hi && !changed; j++) {
            Py_ssize_t r = (Py_ssize_t)(j - item_lo);
            changed = !put_bytes(&p, end, &hk, r) || !put_bytes(&p, end, &hv, r);
        }
        out_off[i + 1] = (int64_t)(p - base);
    }
    if (released != NULL)
        PyEval_RestoreThread(released);
    if (changed || p != end) {
        PyErr_Format(PyExc_ValueError, CHANGED, "encode_tails_kvh");
        goto done;
    }
    result = PyTuple_Pack(2, offsets, data);
done:
    Py_XDECREF(offsets);
    Py_XDECREF(data);
    release_column(&k);
    release_column(&v);
    release_column(&hk);
    release_column(&hv);
    release_list(&l);
    return result;
}

/* ---- completion ------------------------------------------------------------------------------ */

/* run_success_callbacks(callbacks, metadata_type, topic, partition, base_offset, base_timestamp,
 *                       log_append_time, report)
 * ProducerBatch._run_success_callbacks: ``callbacks`` holds five entries per record (callback, index,
 * timestamp delta, key size, value size); each callback gets ``metadata_type(topic, partition,
 * offset, timestamp, key size, value size)`` (a tuple subclass, built directly) and None, where
 * offset is base_offset + index (-1 when base_offset is -1) and timestamp is base_timestamp + delta,
 * or log_append_time when that is not -1. A callback that raises is passed to ``report(topic,
 * partition, exception)`` and the loop goes on. */
static PyObject *accel_run_success_callbacks(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "run_success_callbacks takes 8 arguments");
        return NULL;
    }
    PyObject *callbacks = args[0], *topic = args[2], *partition = args[3], *report = args[7];
    if (!PyList_CheckExact(callbacks) || !PyType_Check(args[1])
        || !PyType_IsSubtype((PyTypeObject *)args[1], &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "run_success_callbacks: a list and a tuple subclass are required");
        return NULL;
    }
    PyTypeObject *md_type = (PyTypeObject *)args[1];
    long long base = PyLong_AsLongLong(args[4]);
    if (base == -1 && PyErr_Occurred())
        return NULL;
    long long base_ts = PyLong_AsLongLong(args[5]);
    if (base_ts == -1 && PyErr_Occurred())
        return NULL;
    long long log_append_time = PyLong_AsLongLong(args[6]);
    if (log_append_time == -1 && PyErr_Occurred())
        return NULL;
    /* the list is the batch's own and no longer grows; hold it while callbacks run */
    Py_INCREF(callbacks);
    PyObject *result = Py_None;
    PyObject *md = NULL; /* the metadata of the last callback, while nobody else holds it */
    long long md_ts = 0; /* the value of md's timestamp (item 3) once md holds one */
    for (Py_ssize_t i = 0; i + 4 < PyList_GET_SIZE(callbacks); i += 5) {
        PyObject *callback = PyList_GET_ITEM(callbacks, i);
        long long index = PyLong_AsLongLong(PyList_GET_ITEM(callbacks, i + 1));
        long long delta = index == -1 && PyErr_Occurred() ? 0 : PyLong_AsLongLong(PyList_GET_ITEM(callbacks, i + 2));
        if (PyErr_Occurred()) {
            result = NULL;
            break;
        }
        PyObject *offset = PyLong_FromLongLong(base == -1 ? -1 : base + index);
        long long ts_value = log_append_time == -1 ? base_ts + delta : log_append_time;
        PyObject *ts;
        if (md != NULL && md_ts == ts_value) {
            /* the records of a batch mostly share their millisecond: the reused tuple's timestamp
             * (an int, immutable) serves again, one allocation less per record */
            ts = PyTuple_GET_ITEM(md, 3);
            Py_INCREF(ts);
        } else {
            ts = PyLong_FromLongLong(ts_value);
        }
        if (md == NULL && offset != NULL && ts != NULL) {
            md = md_type->tp_alloc(md_type, 6);
            if (md != NULL) {
                Py_INCREF(topic);
                Py_INCREF(partition);
                PyTuple_SET_ITEM(md, 0, topic);
                PyTuple_SET_ITEM(md, 1, partition);
            }
        }
        if (md == NULL || offset == NULL || ts == NULL) {
            Py_XDECREF(offset);
            Py_XDECREF(ts);
            result = NULL;
            break;
        }
        /* A metadata tuple that only this loop holds (the last callback kept no reference: the
         * type has no weak references, being a NamedTuple) is filled again for the next record, as
         * CPython's zip() reuses its result tuple: nobody can see the change. Items 2-5 are replaced;
         * the old ones are released after the new ones are in place. */
        PyObject *key_size = PyList_GET_ITEM(callbacks, i + 3), *value_size = PyList_GET_ITEM(callbacks, i + 4);
        Py_INCREF(key_size);
        Py_INCREF(value_size);
        PyObject *old[4] = {PyTuple_GET_ITEM(md, 2), PyTuple_GET_ITEM(md, 3), PyTuple_GET_ITEM(md, 4),
                            PyTuple_GET_ITEM(md, 5)};
        PyTuple_SET_ITEM(md, 2, offset);
        PyTuple_SET_ITEM(md, 3, ts);
        PyTuple_SET_ITEM(md, 4, key_size);
        PyTuple_SET_ITEM(md, 5, value_size);
        for (int k = 0; k < 4; k++)
            Py_XDECREF(old[k]);
        md_ts = ts_value;
        if (!PyObject_GC_IsTracked(md)) /* the collector untracks tuples of atoms; keep the rule simple */
            PyObject_GC_Track(md);
        Py_INCREF(callback);
        PyObject *call_args[2] = {md, Py_None};
        PyObject *r = PyObject_Vectorcall(callback, call_args, 2, NULL);
        Py_DECREF(callback);
        if (Py_REFCNT(md) != 1 || md_type->tp_weaklistoffset != 0)
            Py_CLEAR(md); /* the callback kept it (or could have, weakly): the next record gets a new one */
        if (r != NULL) {
            Py_DECREF(r);
            continue;
        }
        if (PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) { /* only it propagates (future.py, above _call_done_callback) */
            result = NULL;
            break;
        }
        PyObject *exc_type, *exc, *tb;
        PyErr_Fetch(&exc_type, &exc, &tb);
        PyErr_NormalizeException(&exc_type, &exc, &tb);
        if (tb != NULL && exc != NULL)
            PyException_SetTraceback(exc, tb);
        PyObject *rr = exc != NULL ? PyObject_CallFunctionObjArgs(report, topic, partition, exc, NULL) : NULL;
        Py_XDECREF(exc_type);
        Py_XDECREF(exc);
        Py_XDECREF(tb);
        if (rr == NULL) {
            result = NULL;
            break;
        }
        Py_DECREF(rr);
    }
    Py_XDECREF(md);
    Py_DECREF(callbacks);
    if (result == Py_None)
        Py_INCREF(result);
    return result;
}

/* untracked_list() -> a new empty list the cyclic garbage collector does not track.
 * ProducerBatch keeps its callback entries in one (five slots per record, mostly ints). Tracked, each
 * collection walked every slot of every batch in the generations it collected: with the buffer full,
 * 2M keyed records spent 0.31 s in the GC instead of 0.14 s (gc.callbacks timing), about 5% of the
 * producer's CPU. What the list holds stays alive through it as usual; the only loss is that a
 * reference cycle through the list could not be collected, and none is left once the batch completes:
 * until then the accumulator or the Sender holds the batch, and completion replaces the list. */
static PyObject *accel_untracked_list(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    PyObject *list = PyList_New(0);
    if (list != NULL)
        PyObject_GC_UnTrack(list);
    return list;
}

static PyMethodDef accel_methods[] = {
    {"untracked_list", accel_untracked_list, METH_NOARGS, "A new empty list not tracked by the cyclic GC."},
    {"murmur2", (PyCFunction)accel_murmur2, METH_O, "Kafka's murmur2 hash (signed 32-bit)."},
    {"partition_for_key", (PyCFunction)(void (*)(void))accel_partition_for_key, METH_FASTCALL,
     "(murmur2(key) & 0x7fffffff) % num_partitions"},
    {"write_record", (PyCFunction)(void (*)(void))accel_write_record, METH_FASTCALL,
     "Write one record without headers into a bytearray at a position; returns the end."},
    {"append_tails", (PyCFunction)(void (*)(void))accel_append_tails, METH_FASTCALL,
     "Append records from pre-encoded tails while they fit (RecordBatchBuilder.append_tails)."},
    {"group_tails", (PyCFunction)(void (*)(void))accel_group_tails, METH_FASTCALL,
     "Copy Arrow tails grouped by partition (counting sort): (offsets, data, [(partition, start, stop)])."},
    {"partitions_for_offsets", (PyCFunction)(void (*)(void))accel_partitions_for_offsets, METH_FASTCALL,
     "murmur2 partitions of the byte strings of an Arrow binary or large_binary column."},
    {"run_success_callbacks", (PyCFunction)(void (*)(void))accel_run_success_callbacks, METH_FASTCALL,
     "Run a successful batch's callbacks with their RecordMetadata (ProducerBatch._run_success_callbacks)."},
    {"encode_tails_kv", (PyCFunction)(void (*)(void))accel_encode_tails_kv, METH_FASTCALL,
     "Record tails of a key and a value column without headers (producer/arrow/tails.py encode_tails)."},
    {"encode_tails_kvh", (PyCFunction)(void (*)(void))accel_encode_tails_kvh, METH_FASTCALL,
     "encode_tails_kvh(k x5, v x5, loffsets, lvalid, lfirst, lwide, hk x5, hv x5, items, n) -> (offsets, data)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef accel_module = {
    PyModuleDef_HEAD_INIT, "sparkafka._accel", "Optional C accelerator for sparkafka.", -1, accel_methods,
};

PyMODINIT_FUNC PyInit__accel(void) {
    PyObject *module = PyModule_Create(&accel_module);
    if (module != NULL && (sparkafka_add_append_types(module) < 0 || sparkafka_add_send_lane(module) < 0
                           || sparkafka_add_sender_io_functions(module) < 0
                           || sparkafka_add_send_turn_functions(module) < 0
                           || sparkafka_add_batch_functions(module) < 0
                           || sparkafka_add_produce_response_functions(module) < 0))
        Py_CLEAR(module);
    return module;
}
