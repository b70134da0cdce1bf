/* The open-batch append in C: the state it reads and changes, and the rule. This header is the one
 * interface between the producer's Python classes and the C code (``_append.c`` implements it, the
 * send lane in ``_send_lane.c`` uses it).
 *
 * How it works: the state lives in the C types below, and the Python classes are built on them:
 *
 *   BuilderState      base of record/builder.py RecordBatchBuilder   (the batch's records and sizes)
 *   BatchState        base of producer/producer_batch.py ProducerBatch (record count, callback entries)
 *   FutureState       base of producer/future.py FutureRecordMetadata (a record's future)
 *   StickyState       base of producer/partitioner.py StickyPartitionInfo (sticky partition, bytes)
 *   PartitionerState  base of producer/partitioner.py BuiltInPartitioner (its current StickyPartitionInfo)
 *
 * Python reads and writes the fields as attributes (the name is given with each field), C as struct
 * members: nothing is looked up by name or offset at run time. The object fields come first (members of
 * type T_OBJECT_EX, which is what a ``__slots__`` entry is); the C code checks the type of every one it
 * reads and refuses (changing nothing) when one is not what it expects. The sizes, counts and timestamps
 * the rule reads and changes for every record are C numbers after them (members of type T_PYSSIZET and
 * T_LONGLONG: Python reads get an int, a write of anything but an int that fits raises TypeError or
 * OverflowError), so an append makes no int objects for them (callgrind, keyed records with callbacks:
 * boxing them cost ~440 instructions per record). Without the accelerator each Python class has a
 * pure-Python base with the same attribute names (``tests/record/test_append_state.py`` checks that they
 * agree).
 *
 * The rule (Java's ``MemoryRecordsBuilder``: ``hasRoomFor`` and ``isFull``), in Python
 * ``RecordBatchBuilder._try_append_open_py``: a record without headers is appended to a batch that has
 * records and is open for appends only if the batch is still not full afterwards (estimate 61 +
 * uncompressed bytes, times the compression ratio estimate x 1.05 when compressing, below the write
 * limit) and, when compressing, Java's ``hasRoomFor`` (estimate so far + the record uncompressed <= the
 * limit) and the cap of MAX_UNCOMPRESSED_RATIO x the limit of bytes held uncompressed (``_pos`` - 61:
 * records past it are compressed first, by the Python ``try_append``) hold. So after an open
 * append the batch is never full: whoever appends the record that fills a batch (or opens one) goes
 * through the general ``try_append``, which tells the caller to wake the Sender. A record that would run
 * past the end of the pooled buffer moves the records to a private bytearray when that buffer is at least
 * as long as the write limit (only when compressing), and is refused when it is shorter (a "short"
 * buffer, given under memory pressure: producer/buffer_pool.py): the general path then moves the batch
 * into a longer pooled buffer or starts a new batch, so no record of a short-buffered batch lies in
 * memory ``buffer.memory`` does not count. The check runs only for a record that overflows the buffer.
 *
 * ``BatchState.try_append_general`` (what ``ProducerBatch.try_append`` runs for a record without headers)
 * plans and commits with ``RecordBatchBuilder.try_append``'s rule instead: a batch's first record always
 * fits, a later one while the estimate plus its size stays within the write limit, including the one that
 * fills the batch; a record that would overflow a short pooled buffer (the Python ``try_append`` sets
 * ``wanted_capacity``) or pass the cap of bytes held uncompressed (it compresses them first) is left to the
 * Python ``try_append``.
 *
 * An append is planned first (``sparkafka_batch_plan``: every check, no change), then committed
 * (``sparkafka_batch_commit``): every new object is made first, then the changes, which cannot fail.
 * Neither step runs Python code, releases the GIL or makes an object the cyclic GC tracks (the send
 * lane relies on it; see _send_lane.c).
 */
#ifndef SPARKAFKA_APPEND_H
#define SPARKAFKA_APPEND_H

#include <Python.h>

#define RECORD_BATCH_OVERHEAD 61 /* record/layout.py */
#define MAX_UNCOMPRESSED_RATIO 2 /* record/builder.py */

typedef struct {
    PyObject_HEAD
    PyObject *buf;                /* _buf: the bytearray the records are written to, from byte 61 */
    PyObject *buffer;             /* _buffer: the pooled bytearray (never resized) or None */
    PyObject *ratio_factor;       /* _ratio_factor: float, ratio estimate x 1.05; 0.0 without compression */
    PyObject *appends_closed;     /* _appends_closed: bool */
    /* C numbers from here on (BUILDER_OBJECTS object fields above) */
    Py_ssize_t pos;               /* _pos: end of the records written so far */
    long long record_count;       /* record_count */
    long long uncompressed_bytes; /* uncompressed_bytes: the records' encoded size */
    long long estimated_size;     /* estimated_size_in_bytes: Java's estimatedSizeInBytes */
    long long write_limit;        /* _write_limit */
    long long base_timestamp;     /* _base_timestamp: the first record's timestamp */
    long long max_timestamp;      /* _max_timestamp */
} BuilderState;
#define BUILDER_OBJECTS 4

typedef struct {
    PyObject_HEAD
    PyObject *builder;        /* builder: a RecordBatchBuilder (BuilderState) */
    PyObject *callbacks;      /* _callbacks: list, five entries per record with a callback:
                               * callback, index, timestamp - base timestamp, key size, value size */
    PyObject *result;         /* result: the ProduceRequestResult the records' futures share */
    /* C numbers from here on (BATCH_OBJECTS object fields above) */
    long long record_count;   /* record_count */
    long long appended_bytes; /* appended_bytes: growth of the estimate by the last append */
} BatchState;
#define BATCH_OBJECTS 3

typedef struct {
    PyObject_HEAD
    PyObject *produce_result;   /* _produce_result: the batch's ProduceRequestResult */
    PyObject *relative_offset;  /* relative_offset: int, the record's index in the batch */
    PyObject *key_size;         /* serialized_key_size: int, -1 for no key */
    PyObject *value_size;       /* serialized_value_size: int, -1 for no value */
    /* a C number after the FUTURE_OBJECTS object fields: a record's timestamp is rarely a cached small
     * int, so an object here would cost an allocation and a free per record */
    long long create_timestamp; /* create_timestamp */
} FutureState;
#define FUTURE_OBJECTS 4

/* A new future of ``type`` (FutureState or a subclass without fields of its own) holding the four objects,
 * whose references it takes (released if the allocation fails), and the timestamp; FutureState's
 * constructor and the send lane make futures only through it. */
static inline PyObject *sparkafka_future_new(PyTypeObject *type, PyObject *produce_result, PyObject *relative_offset,
                                             PyObject *key_size, PyObject *value_size, long long create_timestamp) {
    FutureState *f = (FutureState *)type->tp_alloc(type, 0);
    if (f == NULL) {
        Py_DECREF(produce_result);
        Py_DECREF(relative_offset);
        Py_DECREF(key_size);
        Py_DECREF(value_size);
        return NULL;
    }
    f->produce_result = produce_result;
    f->relative_offset = relative_offset;
    f->key_size = key_size;
    f->value_size = value_size;
    f->create_timestamp = create_timestamp;
    return (PyObject *)f;
}

typedef struct {
    PyObject_HEAD
    PyObject *partition;      /* partition: int */
    PyObject *produced_bytes; /* produced_bytes: int, bytes appended to it so far */
} StickyState;

typedef struct {
    PyObject_HEAD
    PyObject *info; /* _info: the current StickyPartitionInfo (StickyState), None before the first */
} PartitionerState;

extern PyTypeObject BuilderStateType, BatchStateType, FutureStateType, StickyStateType, PartitionerStateType;

/* One planned append (filled by the plan functions; nothing changed yet). */
typedef struct {
    long long n;        /* records in the batch: the new record's offset delta */
    long long ts, ts_delta;
    int new_max;        /* ts > the builder's max_timestamp */
    Py_ssize_t body;    /* the record's body size (its leading varint) */
    Py_ssize_t pos, total, end; /* where it goes, its encoded size, pos + total */
    long long uncompressed, estimate, grown; /* the builder's sizes after it, and the estimate's growth */
    int to_private;     /* it runs past the pooled buffer (not a short one, which refuses the record): the
                         * records move to a private bytearray first ... */
    Py_ssize_t private_size; /* ... of this size (compressing: room up to the cap at once) */
    PyObject *buf;      /* the builder's _buf (borrowed) */
    long long index;    /* (batch plans) the record's index in the batch */
    PyObject *bad_owner; /* after -1: the object (borrowed) ... */
    const char *bad;     /* ... and its attribute whose value has the wrong type */
} append_plan_t;

/* Plan a record of klen/vlen bytes (-1: None) with timestamp ts: 1 when the rule takes it (*plan
 * filled), 0 when it does not (closed, empty, it would fill the batch or overflow a short pooled buffer),
 * -1 when a field holds a value of
 * the wrong type (plan->bad names it). No exception is set either way. */
int sparkafka_builder_plan(BuilderState *builder, long long ts, Py_ssize_t klen, Py_ssize_t vlen,
                           append_plan_t *plan);
int sparkafka_batch_plan(BatchState *batch, long long ts, Py_ssize_t klen, Py_ssize_t vlen, append_plan_t *plan);

/* Commit a planned append to the builder (the key and value bytes as planned; NULL for None): returns
 * 0, or -1 with an exception set (MemoryError, BufferError) and nothing changed. */
int sparkafka_builder_commit(BuilderState *builder, const append_plan_t *plan, const char *key, Py_ssize_t klen,
                             const char *value, Py_ssize_t vlen);

/* Commit a planned append to the batch and its builder, with a callback entry when ``callback`` is not
 * None (``key_size`` and ``value_size`` are the ints it holds): returns the record's index (a new
 * reference), or NULL with an exception set and nothing changed. */
PyObject *sparkafka_batch_commit(BatchState *batch, const append_plan_t *plan, const char *key, Py_ssize_t klen,
                                 const char *value, Py_ssize_t vlen, PyObject *callback, PyObject *key_size,
                                 PyObject *value_size);

/* Adds the five types to the module (PyInit__accel). */
int sparkafka_add_append_types(PyObject *module);

#endif
