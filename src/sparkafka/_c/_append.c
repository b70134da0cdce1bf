/* The open-batch append in C: the state types and the rule that ``_append.h`` declares (read it first).
 *
 * How it works: each state type is a plain struct of object fields (and, for the builder and the batch,
 * C numbers after them) with a member per field, so Python subclasses read and write them like
 * ``__slots__``; the types hold no logic besides the rule:
 * ``BuilderState.try_append_open`` (what ``RecordBatchBuilder.try_append_open`` is with the accelerator)
 * and ``BatchState.try_append_open`` (``ProducerBatch.try_append_open``) plan and commit through the
 * same functions as the send lane. ``FutureState`` and ``StickyState`` take their fields as constructor
 * arguments (what the Python ``__init__`` of the pure-Python bases takes); the others start unset and
 * the Python ``__init__`` sets them.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include "_accel_common.h"
#include "_append.h"

/* ---- the state types ------------------------------------------------------------------------- */

/* The object fields come first after the header (``objects`` of them; C numbers may follow): one
 * traverse, clear and dealloc per type. */
#define STATE_FIELDS(obj) ((PyObject **)((char *)(obj) + sizeof(PyObject)))
#define ALL_OBJECTS(type) ((Py_ssize_t)((sizeof(type) - sizeof(PyObject)) / sizeof(PyObject *)))

#define STATE_GC(type, objects)                                                                          \
    static int type##_traverse(PyObject *self, visitproc visit, void *arg) {                           \
        PyObject **f = STATE_FIELDS(self);                                                              \
        for (Py_ssize_t i = 0; i < (objects); i++)                                                       \
            Py_VISIT(f[i]);                                                                             \
        return 0;                                                                                       \
    }                                                                                                   \
    static int type##_clear(PyObject *self) {                                                           \
        PyObject **f = STATE_FIELDS(self);                                                              \
        for (Py_ssize_t i = 0; i < (objects); i++)                                                       \
            Py_CLEAR(f[i]);                                                                             \
        return 0;                                                                                       \
    }                                                                                                   \
    static void type##_dealloc(PyObject *self) {                                                        \
        PyTypeObject *tp = Py_TYPE(self);                                                               \
        PyObject_GC_UnTrack(self);                                                                      \
        type##_clear(self);                                                                             \
        tp->tp_free(self);                                                                              \
    }

STATE_GC(BuilderState, BUILDER_OBJECTS)
STATE_GC(BatchState, BATCH_OBJECTS)
STATE_GC(FutureState, FUTURE_OBJECTS)
STATE_GC(StickyState, ALL_OBJECTS(StickyState))
STATE_GC(PartitionerState, ALL_OBJECTS(PartitionerState))

#define FIELD(type, name, member, doc) {name, T_OBJECT_EX, offsetof(type, member), 0, doc}
#define NUMBER(type, kind, name, member, doc) {name, kind, offsetof(type, member), 0, doc}

static PyMemberDef builder_members[] = {
    FIELD(BuilderState, "_buf", buf, "The bytearray the records are written to, from byte 61."),
    FIELD(BuilderState, "_buffer", buffer, "The caller's (pooled) buffer: written in place, never resized."),
    FIELD(BuilderState, "_ratio_factor", ratio_factor, "Ratio estimate x 1.05; 0.0 without compression."),
    FIELD(BuilderState, "_appends_closed", appends_closed, "True once appends are refused."),
    NUMBER(BuilderState, T_PYSSIZET, "_pos", pos, "End of the records written so far."),
    NUMBER(BuilderState, T_LONGLONG, "record_count", record_count, "Records appended."),
    NUMBER(BuilderState, T_LONGLONG, "uncompressed_bytes", uncompressed_bytes,
           "Encoded size of the records before compression."),
    NUMBER(BuilderState, T_LONGLONG, "estimated_size_in_bytes", estimated_size, "Java's estimatedSizeInBytes."),
    NUMBER(BuilderState, T_LONGLONG, "_write_limit", write_limit, "The batch's write limit."),
    NUMBER(BuilderState, T_LONGLONG, "_base_timestamp", base_timestamp, "The first record's timestamp."),
    NUMBER(BuilderState, T_LONGLONG, "_max_timestamp", max_timestamp, "The largest record timestamp (-1 if empty)."),
    {NULL, 0, 0, 0, NULL},
};

static PyMemberDef batch_members[] = {
    FIELD(BatchState, "builder", builder, "The batch's RecordBatchBuilder."),
    FIELD(BatchState, "_callbacks", callbacks, "Five entries per record with a callback."),
    FIELD(BatchState, "result", result, "The ProduceRequestResult the records' futures share."),
    NUMBER(BatchState, T_LONGLONG, "record_count", record_count, "Records appended."),
    NUMBER(BatchState, T_LONGLONG, "appended_bytes", appended_bytes, "Growth of the size estimate by the last append."),
    {NULL, 0, 0, 0, NULL},
};

static PyMemberDef future_members[] = {
    FIELD(FutureState, "_produce_result", produce_result, "The batch's ProduceRequestResult."),
    FIELD(FutureState, "relative_offset", relative_offset, "The record's index in its batch."),
    FIELD(FutureState, "serialized_key_size", key_size, "Bytes of the key, -1 for none."),
    FIELD(FutureState, "serialized_value_size", value_size, "Bytes of the value, -1 for none."),
    NUMBER(FutureState, T_LONGLONG, "create_timestamp", create_timestamp, "The record's timestamp."),
    {NULL, 0, 0, 0, NULL},
};

static PyMemberDef sticky_members[] = {
    FIELD(StickyState, "partition", partition, "The sticky partition."),
    FIELD(StickyState, "produced_bytes", produced_bytes, "Bytes appended to it so far."),
    {NULL, 0, 0, 0, NULL},
};

static PyMemberDef partitioner_members[] = {
    FIELD(PartitionerState, "_info", info, "The current StickyPartitionInfo, None before the first."),
    {NULL, 0, 0, 0, NULL},
};

/* FutureState(produce_result, relative_offset, create_timestamp, serialized_key_size, serialized_value_size) */
static PyObject *future_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *names[] = {"produce_result", "relative_offset", "create_timestamp", "serialized_key_size",
                            "serialized_value_size", NULL};
    PyObject *v[5];
    if (kwds == NULL) {
        if (!PyArg_UnpackTuple(args, type->tp_name, 5, 5, &v[0], &v[1], &v[2], &v[3], &v[4]))
            return NULL;
    } else if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOO", names, &v[0], &v[1], &v[2], &v[3], &v[4])) {
        return NULL;
    }
    long long ts = PyLong_AsLongLong(v[2]);
    if (ts == -1 && PyErr_Occurred())
        return NULL;
    Py_INCREF(v[0]);
    Py_INCREF(v[1]);
    Py_INCREF(v[3]);
    Py_INCREF(v[4]);
    return sparkafka_future_new(type, v[0], v[1], v[3], v[4], ts);
}

/* StickyState(partition): produced_bytes starts at 0 */
static PyObject *sticky_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *names[] = {"partition", NULL};
    PyObject *partition;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O", names, &partition))
        return NULL;
    StickyState *self = (StickyState *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    Py_INCREF(partition);
    self->partition = partition;
    self->produced_bytes = PyLong_FromLong(0);
    if (self->produced_bytes == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

/* ---- the rule -------------------------------------------------------------------------------- */

static inline int refuse_bad(append_plan_t *plan, PyObject *owner, const char *field) {
    plan->bad_owner = owner;
    plan->bad = field;
    return -1;
}

/* The two rules (``_append.h``): ``general`` 0 is the open-batch rule (1 takes the record, 0 refuses it);
 * ``general`` 1 is ``RecordBatchBuilder.try_append``'s for a record without headers: the first record of a
 * batch always fits, a later one if the estimate plus its size stays within the write limit, even when it
 * fills the batch. Both: -1 for a field holding a value of the wrong type. Only the general rule returns 2:
 * a record that fits the batch but overflows its short pooled buffer (the Python try_append then sets
 * ``wanted_capacity``), one that would pass the cap of MAX_UNCOMPRESSED_RATIO x the limit of records held
 * uncompressed (the Python try_append compresses them first, or refuses it for gzip and zstd), or sizes no
 * batch has; the caller then takes the Python path. */
static int builder_plan(BuilderState *b, long long ts, Py_ssize_t klen, Py_ssize_t vlen, append_plan_t *p,
                        int general) {
    p->bad = NULL;
    p->bad_owner = NULL;
    if (b->appends_closed == Py_True)
        return 0;
    if (b->appends_closed != Py_False)
        return refuse_bad(p, (PyObject *)b, "_appends_closed");
    p->n = b->record_count;
    if (p->n < 1 && !general)
        return 0; /* the first record of a batch goes through try_append */
    long long pos = b->pos, uncompressed = b->uncompressed_bytes, estimate = b->estimated_size;
    long long limit = b->write_limit, base_ts = p->n < 1 ? ts : b->base_timestamp, max_ts = b->max_timestamp;
    double factor;
    PyObject *f = b->ratio_factor;
    if (f != NULL && PyFloat_CheckExact(f)) {
        factor = PyFloat_AS_DOUBLE(f);
    } else if (f != NULL && PyLong_CheckExact(f)) {
        factor = PyLong_AsDouble(f);
        if (factor == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return refuse_bad(p, (PyObject *)b, "_ratio_factor");
        }
    } else {
        return refuse_bad(p, (PyObject *)b, "_ratio_factor");
    }
    PyObject *buf = b->buf;
    if (buf == NULL || !PyByteArray_CheckExact(buf))
        return refuse_bad(p, (PyObject *)b, "_buf");
    if (b->buffer == NULL)
        return refuse_bad(p, (PyObject *)b, "_buffer");
    if (pos < 0 || pos > PyByteArray_GET_SIZE(buf))
        return refuse_bad(p, (PyObject *)b, "_pos");
    if (uncompressed < 0 || limit < 0 || !(factor >= 0.0 && factor < 1e6) || p->n < 0)
        return general ? 2 : 0; /* sizes no batch has: the general path decides */
    long long ts_delta;
    if (__builtin_sub_overflow(ts, base_ts, &ts_delta))
        return general ? 2 : 0; /* not a varlong: the general path decides */
    p->ts = ts;
    p->ts_delta = ts_delta;
    p->new_max = ts > max_ts;
    p->body = record_body_size(ts_delta, p->n, klen, vlen);
    p->total = varint_len(p->body) + p->body;
    p->uncompressed = uncompressed + p->total;
    /* Python: 61 + int(uncompressed * factor) when compressing (a double product truncated toward zero) */
    p->estimate = RECORD_BATCH_OVERHEAD + (factor != 0.0 ? (long long)((double)p->uncompressed * factor) : p->uncompressed);
    /* when compressing, the records held uncompressed (from byte 61 to _pos) stay within the cap: the one
     * that would pass it goes to the Python try_append, which compresses them first (lz4, snappy:
     * RecordBatchBuilder._spill) or finds the batch full (gzip, zstd) */
    int over_cap = factor != 0.0 && pos - RECORD_BATCH_OVERHEAD + p->total - limit > (MAX_UNCOMPRESSED_RATIO - 1) * limit;
    if (general) {
        if (p->n > 0 && over_cap)
            return 2;
        if (p->n > 0 && estimate + p->total > limit)
            return 0;
    } else if (p->estimate >= limit || over_cap
               || (factor != 0.0 && estimate + p->total > limit /* Java's hasRoomFor */)) {
        return 0;
    }
    p->grown = p->n > 0 ? p->estimate - estimate : p->estimate; /* the first record: the whole estimate */
    p->buf = buf;
    p->pos = (Py_ssize_t)pos;
    p->end = p->pos + p->total;
    p->to_private = p->end > PyByteArray_GET_SIZE(buf) && buf == b->buffer;
    if (p->to_private && p->n > 0 && PyByteArray_GET_SIZE(buf) < limit)
        return general ? 2 : 0; /* a short pooled buffer: the general path grows it or starts a new batch */
    p->private_size = p->end;
    if (p->to_private && factor != 0.0) { /* record/builder.py _moved: room up to the cap at once */
        long long room = RECORD_BATCH_OVERHEAD + MAX_UNCOMPRESSED_RATIO * limit;
        if (room > 2 * (long long)p->end)
            room = 2 * (long long)p->end;
        if (room > p->private_size)
            p->private_size = (Py_ssize_t)room;
    }
    return 1;
}

int sparkafka_builder_plan(BuilderState *b, long long ts, Py_ssize_t klen, Py_ssize_t vlen, append_plan_t *p) {
    return builder_plan(b, ts, klen, vlen, p, 0);
}

static int batch_plan(BatchState *batch, long long ts, Py_ssize_t klen, Py_ssize_t vlen, append_plan_t *p,
                      int general) {
    p->bad = NULL;
    p->bad_owner = NULL;
    if (batch->builder == NULL || !PyObject_TypeCheck(batch->builder, &BuilderStateType))
        return refuse_bad(p, (PyObject *)batch, "builder");
    if (batch->callbacks == NULL || !PyList_CheckExact(batch->callbacks))
        return refuse_bad(p, (PyObject *)batch, "_callbacks");
    if (batch->result == NULL)
        return refuse_bad(p, (PyObject *)batch, "result");
    p->index = batch->record_count;
    if (general && p->index != ((BuilderState *)batch->builder)->record_count)
        return 2; /* a batch whose count and its builder's differ (a split in progress): Python decides */
    return builder_plan((BuilderState *)batch->builder, ts, klen, vlen, p, general);
}

int sparkafka_batch_plan(BatchState *batch, long long ts, Py_ssize_t klen, Py_ssize_t vlen, append_plan_t *p) {
    return batch_plan(batch, ts, klen, vlen, p, 0);
}

/* Room for the record, made before anything changes: a private buffer grows (bytes past _pos are not
 * part of the batch, so a larger one changes nothing visible), records past the pooled buffer move to a
 * new one (*moved, a new reference; else NULL). */
static int builder_prepare(const append_plan_t *p, PyObject **moved) {
    *moved = NULL;
    if (p->to_private) { /* record/builder.py _target: the records so far, in a bytearray of our own */
        *moved = PyByteArray_FromStringAndSize(NULL, p->private_size);
        if (*moved == NULL)
            return -1;
        memcpy(PyByteArray_AS_STRING(*moved), PyByteArray_AS_STRING(p->buf), (size_t)p->pos);
    } else if (p->end > PyByteArray_GET_SIZE(p->buf) && PyByteArray_Resize(p->buf, p->end) < 0) {
        return -1;
    }
    return 0;
}

static void builder_apply(BuilderState *b, const append_plan_t *p, PyObject *moved /* stolen */, const char *key,
                          Py_ssize_t klen, const char *value, Py_ssize_t vlen) {
    PyObject *buf = moved != NULL ? moved : p->buf;
    put_record(PyByteArray_AS_STRING(buf) + p->pos, p->body, p->ts_delta, p->n, key, klen, value, vlen);
    if (moved != NULL) {
        PyObject *old = b->buf;
        b->buf = moved;
        Py_XDECREF(old); /* the pooled bytearray, still held by _buffer: no code runs */
    }
    b->pos = p->end;
    if (p->n == 0) /* the first record (the general rule) sets the base timestamp */
        b->base_timestamp = p->ts;
    b->uncompressed_bytes = p->uncompressed;
    b->estimated_size = p->estimate;
    b->record_count = p->n + 1;
    if (p->new_max)
        b->max_timestamp = p->ts;
}

int sparkafka_builder_commit(BuilderState *b, const append_plan_t *p, const char *key, Py_ssize_t klen,
                             const char *value, Py_ssize_t vlen) {
    PyObject *moved;
    if (builder_prepare(p, &moved) < 0)
        return -1;
    builder_apply(b, p, moved, key, klen, value, vlen);
    return 0;
}

PyObject *sparkafka_batch_commit(BatchState *batch, const append_plan_t *p, const char *key, Py_ssize_t klen,
                                 const char *value, Py_ssize_t vlen, PyObject *callback, PyObject *key_size,
                                 PyObject *value_size) {
    PyObject *moved = NULL;
    PyObject *index = PyLong_FromLongLong(p->index);
    PyObject *delta = callback != Py_None ? PyLong_FromLongLong(p->ts_delta) : NULL;
    if (index == NULL || (callback != Py_None && delta == NULL))
        goto fail;
    if (builder_prepare(p, &moved) < 0)
        goto fail;
    if (callback != Py_None) {
        /* The entry's five slots go into the list in one step: room is made first (half as much again,
         * instead of list.append's eighth: 7 reallocations for a batch of 138 records instead of about
         * 25), then the slots are written in place. The list is exact
         * (sparkafka_batch_plan checks) and untracked by the cyclic GC; its items array is PyMem memory,
         * as list_resize (Objects/listobject.c) keeps it. */
        PyListObject *list = (PyListObject *)batch->callbacks;
        Py_ssize_t size = Py_SIZE(list);
        if (list->allocated - size < 5) {
            Py_ssize_t allocated = list->allocated < 40 ? 64 : list->allocated + list->allocated / 2;
            PyObject **items = allocated > PY_SSIZE_T_MAX / (Py_ssize_t)sizeof(PyObject *)
                                   ? NULL
                                   : PyMem_Realloc(list->ob_item, (size_t)allocated * sizeof(PyObject *));
            if (items == NULL) {
                PyErr_NoMemory();
                goto fail;
            }
            list->ob_item = items;
            list->allocated = allocated;
        }
        PyObject *entry[5] = {callback, index, delta, key_size, value_size};
        for (int i = 0; i < 5; i++) {
            Py_INCREF(entry[i]);
            list->ob_item[size + i] = entry[i];
        }
        Py_SET_SIZE(list, size + 5);
    }
    builder_apply((BuilderState *)batch->builder, p, moved, key, klen, value, vlen);
    batch->record_count = p->index + 1;
    batch->appended_bytes = p->grown;
    Py_XDECREF(delta);
    return index;
fail:
    Py_XDECREF(moved);
    Py_XDECREF(index);
    Py_XDECREF(delta);
    return NULL;
}

/* ---- the Python methods ---------------------------------------------------------------------- */

/* TypeError: a field of ``self`` holds a value the rule cannot use. */
static PyObject *bad_state(PyObject *self, const char *field) {
    PyObject *value = PyObject_GetAttrString(self, field);
    if (value == NULL)
        return NULL;
    PyErr_Format(PyExc_TypeError, "%s.%s holds %R, which the open-batch append cannot use", Py_TYPE(self)->tp_name,
                 field, value);
    Py_DECREF(value);
    return NULL;
}

/* BuilderState.try_append_open(timestamp, key, value) -> the growth of the size estimate, or -1 */
static PyObject *builder_try_append_open(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "try_append_open(timestamp, key, value) takes 3 arguments");
        return NULL;
    }
    long long ts = PyLong_AsLongLong(args[0]);
    if (ts == -1 && PyErr_Occurred())
        return NULL;
    field_t key, value;
    if (get_field(args[1], &key) < 0)
        return NULL;
    if (get_field(args[2], &value) < 0) {
        release_field(&key);
        return NULL;
    }
    PyObject *result = NULL;
    append_plan_t plan;
    int fits = sparkafka_builder_plan((BuilderState *)self, ts, key.len, value.len, &plan);
    if (fits < 0)
        result = bad_state(plan.bad_owner, plan.bad);
    else if (fits == 0)
        result = PyLong_FromLong(-1);
    else if (sparkafka_builder_commit((BuilderState *)self, &plan, key.buf, key.len, value.buf, value.len) == 0)
        result = PyLong_FromLongLong(plan.grown);
    release_field(&key);
    release_field(&value);
    return result;
}

/* The two BatchState methods below: (timestamp, key, value, callback, key_size, value_size) -> the record's
 * index, -1 when the rule (``general``: batch_plan's) does not take the record, -2 when the general rule
 * leaves it to the Python ``try_append``. */
static PyObject *batch_try_append(PyObject *self, PyObject *const *args, Py_ssize_t nargs, int general) {
    if (nargs != 6) {
        PyErr_Format(PyExc_TypeError, "%s(timestamp, key, value, callback, key_size, value_size) takes 6 arguments",
                     general ? "try_append_general" : "try_append_open");
        return NULL;
    }
    long long ts = PyLong_AsLongLong(args[0]);
    if (ts == -1 && PyErr_Occurred())
        return NULL;
    field_t key, value;
    if (get_field(args[1], &key) < 0)
        return NULL;
    if (get_field(args[2], &value) < 0) {
        release_field(&key);
        return NULL;
    }
    PyObject *result = NULL;
    append_plan_t plan;
    int fits = batch_plan((BatchState *)self, ts, key.len, value.len, &plan, general);
    if (fits < 0) {
        result = bad_state(plan.bad_owner, plan.bad);
    } else if (fits != 1) {
        result = PyLong_FromLong(fits == 0 ? -1 : -2);
    } else {
        result = sparkafka_batch_commit((BatchState *)self, &plan, key.buf, key.len, value.buf, value.len, args[3],
                                        args[4], args[5]);
    }
    release_field(&key);
    release_field(&value);
    return result;
}

/* BatchState.try_append_open(timestamp, key, value, callback, key_size, value_size) -> index, or -1 */
static PyObject *batch_try_append_open(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    return batch_try_append(self, args, nargs, 0);
}

/* BatchState.try_append_general(timestamp, key, value, callback, key_size, value_size) -> the record's index,
 * -1 when the batch does not take it (closed for appends, no room: ``RecordBatchBuilder.try_append``'s rule for
 * a record without headers, which also takes a batch's first record and the one that fills it), or -2 when
 * the Python ``try_append`` must decide (a short pooled buffer to grow, a record past the cap of bytes held
 * uncompressed, sizes no batch has). What
 * ``ProducerBatch.try_append`` runs for a record without headers; the Python rule costs ~5,000 instructions
 * per record (callgrind). */
static PyObject *batch_try_append_general(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    return batch_try_append(self, args, nargs, 1);
}

/* The deallocation of a FutureState subclass (FutureRecordMetadata) made by a class statement: what
 * CPython's subtype_dealloc does for such a class, without the checks it makes for a __dict__, weak
 * references, __del__ and deep nesting, none of which the class has (future_init_subclass checks).
 * A record's future is made and dropped once per send(), and subtype_dealloc was about 200 of the 400
 * instructions its deallocation cost (callgrind). A heap type's instance holds a reference to its
 * type, which goes last. */
static void future_subtype_dealloc(PyObject *self) {
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    FutureState_clear(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

/* FutureState.__init_subclass__(): a subclass with no fields, __dict__, weak references or finalizer of
 * its own gets future_subtype_dealloc; any other keeps CPython's. */
static PyObject *future_init_subclass(PyObject *cls, PyObject *args, PyObject *kwds) {
    if (PyTuple_GET_SIZE(args) != 0 || (kwds != NULL && PyDict_GET_SIZE(kwds) != 0)) {
        PyErr_SetString(PyExc_TypeError, "FutureState.__init_subclass__() takes no arguments");
        return NULL;
    }
    PyTypeObject *tp = (PyTypeObject *)cls;
    if ((tp->tp_flags & Py_TPFLAGS_HEAPTYPE) && tp->tp_basicsize == FutureStateType.tp_basicsize
        && tp->tp_itemsize == 0 && tp->tp_dictoffset == 0 && tp->tp_weaklistoffset == 0 && tp->tp_finalize == NULL
        && tp->tp_del == NULL && tp->tp_base != NULL
        && (tp->tp_base == &FutureStateType || tp->tp_base->tp_dealloc == future_subtype_dealloc))
        tp->tp_dealloc = future_subtype_dealloc;
    Py_RETURN_NONE;
}

static PyMethodDef future_methods[] = {
    {"__init_subclass__", (PyCFunction)(void (*)(void))future_init_subclass, METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "Give a subclass without fields, __dict__, weak references or __del__ of its own a lean deallocation."},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef builder_methods[] = {
    {"try_append_open", (PyCFunction)(void (*)(void))builder_try_append_open, METH_FASTCALL,
     "Append a record without headers if the batch stays open (not full) afterwards; returns the growth of "
     "estimated_size_in_bytes, or -1 with nothing appended (the rule: _c/_append.h)."},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef batch_methods[] = {
    {"try_append_open", (PyCFunction)(void (*)(void))batch_try_append_open, METH_FASTCALL,
     "The builder's try_append_open, then the record's index (returned; -1 if not appended), the record "
     "count, appended_bytes and a callback entry when callback is not None."},
    {"try_append_general", (PyCFunction)(void (*)(void))batch_try_append_general, METH_FASTCALL,
     "try_append_open with RecordBatchBuilder.try_append's rule for a record without headers: the index, -1 "
     "if the batch does not take the record, -2 if the Python try_append must decide."},
    {NULL, NULL, 0, NULL},
};

#define STATE_TYPE(type, pyname, members, methods, newfunc, doc)                                          \
    PyTypeObject type##Type = {                                                                          \
        PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sparkafka._accel." pyname,                             \
        .tp_basicsize = sizeof(type),                                                                    \
        .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,                        \
        .tp_doc = doc,                                                                                   \
        .tp_new = newfunc,                                                                               \
        .tp_traverse = type##_traverse,                                                                  \
        .tp_clear = type##_clear,                                                                        \
        .tp_dealloc = type##_dealloc,                                                                    \
        .tp_members = members,                                                                           \
        .tp_methods = methods,                                                                           \
    };

STATE_TYPE(BuilderState, "BuilderState", builder_members, builder_methods, PyType_GenericNew,
           "RecordBatchBuilder's open-batch state and rule (_c/_append.h).")
STATE_TYPE(BatchState, "BatchState", batch_members, batch_methods, PyType_GenericNew,
           "ProducerBatch's open-batch state (_c/_append.h).")
STATE_TYPE(FutureState, "FutureState", future_members, future_methods, future_new,
           "FutureRecordMetadata's fields (_c/_append.h).")
STATE_TYPE(StickyState, "StickyState", sticky_members, NULL, sticky_new,
           "StickyPartitionInfo's fields (_c/_append.h).")
STATE_TYPE(PartitionerState, "PartitionerState", partitioner_members, NULL, PyType_GenericNew,
           "BuiltInPartitioner's current sticky partition (_c/_append.h).")

int sparkafka_add_append_types(PyObject *module) {
    PyTypeObject *types[] = {&BuilderStateType, &BatchStateType, &FutureStateType, &StickyStateType,
                             &PartitionerStateType};
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        if (PyType_Ready(types[i]) < 0)
            return -1;
        const char *name = strrchr(types[i]->tp_name, '.') + 1;
        Py_INCREF(types[i]);
        if (PyModule_AddObject(module, name, (PyObject *)types[i]) < 0) {
            Py_DECREF(types[i]);
            return -1;
        }
    }
    return 0;
}
