/* sparkafka._accel.SendLane: KafkaProducer.send() for the common record, in one C call.
 *
 * How it works: the producer (producer/send_lane.py, ``install_send_lane``) makes one lane and
 * binds it as the instance attribute ``send``, so ``producer.send(topic, value, key, callback=cb)``
 * calls this vectorcall directly. The lane handles a record when it can do exactly what the Python
 * fast path does (``KafkaProducer.send`` -> ``RecordAccumulator.append_open``): topic a str, key and
 * value bytes or None, no partition, timestamp or headers, the topic's metadata known, the record
 * leaving its partition's open batch still open, the sticky partition not switching, the partition
 * queue's lock free, and the producer not closing nor in a fatal error. Everything else, and every
 * call the lane cannot take, goes unchanged to the Python ``send`` (``slow``), which decides and
 * raises as always; the lane changes nothing before it hands a call over.
 *
 * State is read where the Python code keeps it: fixed ``__slots__`` of the accumulator's classes
 * (offsets taken from their member descriptors when the lane is made, each object's type checked
 * before its slots are read), plus three plain attributes (``Metadata._cluster``,
 * ``RecordAccumulator._closed``, ``TransactionManager.last_error``). The lane counts its own records
 * (``fast_count``); ``RecordAccumulator.records_appended`` counts the Python appends.
 *
 * Locking: Python appends hold the partition queue's lock. The lane checks that the lock (exactly a
 * ``_thread.lock``, the deque exactly a ``collections.deque``: their methods run no Python code) is free
 * and then does the whole append without releasing the GIL and without running Python code or
 * allocating anything the cyclic GC tracks (only ints and list growth), so no other thread can take
 * the lock or see a half-done append: the same exclusion, without two method calls per record. The
 * future is made after the append. A build without the GIL (Py_GIL_DISABLED) has no lane.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <time.h>

#include "_accel_common.h"

#ifndef Py_GIL_DISABLED

#define RECORD_BATCH_OVERHEAD 61 /* record/builder.py */
#define MAX_UNCOMPRESSED_RATIO 2 /* record/builder.py */

/* The classes whose slots the lane reads, in the order of the constructor's ``classes`` tuple. */
enum { C_CLUSTER, C_COW, C_TOPIC_INFO, C_QUEUE, C_PARTITIONER, C_STICKY, C_BATCH, C_BUILDER, C_FUTURE, C_COUNT };

/* The slots, each with its class. */
enum {
    S_COUNTS, S_MAP, S_TI_PARTITIONER, S_TI_QUEUES, S_Q_DEQUE, S_Q_LOCK, S_P_INFO, S_P_DOUBLE,
    S_ST_PARTITION, S_ST_PRODUCED, S_B_BUILDER, S_B_COUNT, S_B_CALLBACKS, S_B_RESULT, S_BU_COUNT,
    S_BU_CLOSED, S_BU_BUF, S_BU_BUFFER, S_BU_POS, S_BU_UNCOMPRESSED, S_BU_FACTOR, S_BU_LIMIT, S_BU_ESTIMATE,
    S_BU_MAX_TS, S_BU_BASE_TS, S_F_RESULT, S_F_OFFSET, S_F_TIMESTAMP, S_F_KEY_SIZE, S_F_VALUE_SIZE, S_COUNT
};

static const struct {
    int cls;
    const char *name;
} SLOTS[S_COUNT] = {
    {C_CLUSTER, "_counts"},
    {C_COW, "_map"},
    {C_TOPIC_INFO, "partitioner"},
    {C_TOPIC_INFO, "queues"},
    {C_QUEUE, "deque"},
    {C_QUEUE, "lock"},
    {C_PARTITIONER, "_info"},
    {C_PARTITIONER, "double_batch_size"},
    {C_STICKY, "partition"},
    {C_STICKY, "produced_bytes"},
    {C_BATCH, "builder"},
    {C_BATCH, "record_count"},
    {C_BATCH, "_callbacks"},
    {C_BATCH, "result"},
    {C_BUILDER, "record_count"},
    {C_BUILDER, "_appends_closed"},
    {C_BUILDER, "_buf"},
    {C_BUILDER, "_buffer"},
    {C_BUILDER, "_pos"},
    {C_BUILDER, "uncompressed_bytes"},
    {C_BUILDER, "_ratio_factor"},
    {C_BUILDER, "_write_limit"},
    {C_BUILDER, "estimated_size_in_bytes"},
    {C_BUILDER, "_max_timestamp"},
    {C_BUILDER, "_base_timestamp"},
    {C_FUTURE, "_produce_result"},
    {C_FUTURE, "relative_offset"},
    {C_FUTURE, "create_timestamp"},
    {C_FUTURE, "serialized_key_size"},
    {C_FUTURE, "serialized_value_size"},
};

/* send()'s parameters, in order */
#define N_PARAMS 7
static const char *PARAM_NAMES[N_PARAMS] = {"topic", "value", "key", "partition", "timestamp", "headers", "callback"};

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    int enabled;
    int ignore_keys;
    long long record_limit;
    unsigned long long fast_count; /* records the lane appended */
    unsigned long long handed_over; /* calls it passed to ``slow`` */
    PyObject *slow;        /* the Python send (a bound method) */
    PyObject *metadata;    /* Metadata: ._cluster */
    PyObject *accumulator; /* RecordAccumulator: ._closed */
    PyObject *topics;      /* the accumulator's CopyOnWriteMap[str, _TopicInfo] */
    PyObject *tm;          /* TransactionManager or None: .last_error */
    /* the instance __dict__ of metadata, accumulator and tm (NULL for None): the plain attributes the
     * lane reads are looked up there, without PyObject_GetAttr's walk of the class (a third of the
     * lane's attribute cost per record) */
    PyObject *metadata_dict, *accumulator_dict, *tm_dict;
    PyTypeObject *types[C_COUNT];
    Py_ssize_t offsets[S_COUNT];
} SendLane;

static PyObject *str_cluster, *str_closed, *str_last_error, *str_locked;
/* the exact types of a queue's deque and lock (anything else could run Python code: hand over) */
static PyTypeObject *deque_type, *lock_type;
/* _thread.lock.locked (METH_NOARGS), called straight for an object of exactly lock_type: no method
 * lookup per record; NULL if this Python's lock has another shape (then the method is looked up) */
static PyCFunction lock_locked_fn;
static PyObject *param_names[N_PARAMS];

static inline PyObject *slot(PyObject *obj, Py_ssize_t offset) { /* borrowed; NULL when unset */
    return *(PyObject **)((char *)obj + offset);
}

static inline void set_slot(PyObject *obj, Py_ssize_t offset, PyObject *value /* stolen */) {
    PyObject **p = (PyObject **)((char *)obj + offset);
    PyObject *old = *p;
    *p = value;
    Py_XDECREF(old);
}

/* An exact int slot as a C long long; 0 when it is not one (the caller then hands the call over). */
static inline int int_slot(PyObject *obj, Py_ssize_t offset, long long *out) {
    PyObject *v = slot(obj, offset);
    if (v == NULL || !PyLong_CheckExact(v))
        return 0;
    int overflow;
    *out = PyLong_AsLongLongAndOverflow(v, &overflow);
    return !overflow && !(*out == -1 && PyErr_Occurred());
}

#define LANE_SLOT(lane, obj, s) slot((obj), (lane)->offsets[(s)])
#define IS(lane, obj, c) ((obj) != NULL && Py_TYPE(obj) == (lane)->types[(c)])

static PyObject *lane_hand_over(SendLane *lane, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    lane->handed_over++;
    return PyObject_Vectorcall(lane->slow, args, nargsf, kwnames);
}

/* The sizes and counters of one append, computed before anything changes. */
typedef struct {
    long long ts, ts_delta, n, pos, end, total, after, estimate, grown;
} plan_t;

/* The append itself (RecordAccumulator.append_open with RecordBatchBuilder._try_append_open_c).
 * Returns the future's ProduceRequestResult and index (new references) in *result / *index, 1 when
 * done, 0 to hand the call over (nothing changed), -1 with an exception set (nothing changed). */
static int lane_append(SendLane *lane, PyObject *topic, long partition, PyObject *key, PyObject *value,
                       PyObject *callback, Py_ssize_t key_len, Py_ssize_t value_len, long long ts,
                       PyObject **result, PyObject **index_out) {
    PyObject *map = IS(lane, lane->topics, C_COW) ? LANE_SLOT(lane, lane->topics, S_MAP) : NULL;
    if (map == NULL || !PyDict_CheckExact(map))
        return 0;
    PyObject *info = PyDict_GetItemWithError(map, topic);
    if (!IS(lane, info, C_TOPIC_INFO))
        return PyErr_Occurred() ? -1 : 0;
    PyObject *partitioner = NULL, *sticky = NULL;
    long long produced = 0, double_size = 0;
    if (partition < 0) {
        partitioner = LANE_SLOT(lane, info, S_TI_PARTITIONER);
        if (!IS(lane, partitioner, C_PARTITIONER))
            return 0;
        sticky = LANE_SLOT(lane, partitioner, S_P_INFO);
        if (!IS(lane, sticky, C_STICKY) || !int_slot(sticky, lane->offsets[S_ST_PRODUCED], &produced)
            || !int_slot(partitioner, lane->offsets[S_P_DOUBLE], &double_size))
            return 0;
        PyObject *p = LANE_SLOT(lane, sticky, S_ST_PARTITION);
        if (p == NULL || !PyLong_CheckExact(p))
            return 0;
        partition = PyLong_AsLong(p);
        if (partition < 0)
            return PyErr_Occurred() ? -1 : 0;
    }
    PyObject *queues = LANE_SLOT(lane, info, S_TI_QUEUES);
    PyObject *qmap = IS(lane, queues, C_COW) ? LANE_SLOT(lane, queues, S_MAP) : NULL;
    if (qmap == NULL || !PyDict_CheckExact(qmap))
        return 0;
    PyObject *pkey = PyLong_FromLong(partition);
    if (pkey == NULL)
        return -1;
    PyObject *pq = PyDict_GetItemWithError(qmap, pkey);
    Py_DECREF(pkey);
    if (!IS(lane, pq, C_QUEUE))
        return PyErr_Occurred() ? -1 : 0;
    PyObject *dq = LANE_SLOT(lane, pq, S_Q_DEQUE);
    PyObject *lock = LANE_SLOT(lane, pq, S_Q_LOCK);
    if (dq == NULL || lock == NULL || Py_TYPE(dq) != deque_type || Py_TYPE(lock) != lock_type)
        return 0;
    /* the lock must be free; from here on nothing releases the GIL until the append is done */
    PyObject *held;
    if (lock_locked_fn != NULL) {
        held = lock_locked_fn(lock, NULL);
    } else {
        PyObject *margs[2] = {NULL, lock};
        held = PyObject_VectorcallMethod(str_locked, margs + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    }
    if (held == NULL)
        return -1;
    Py_DECREF(held);
    if (held != Py_False)
        return 0;
    Py_ssize_t queued = PyObject_Length(dq);
    if (queued < 0)
        return -1;
    if (queued == 0)
        return 0;
    PyObject *closed = PyDict_GetItemWithError(lane->accumulator_dict, str_closed); /* borrowed */
    if (closed == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (closed != Py_False)
        return 0;
    PyObject *batch = PySequence_GetItem(dq, queued - 1); /* new reference; the deque keeps one too */
    if (batch == NULL)
        return -1;
    Py_DECREF(batch);
    if (!IS(lane, batch, C_BATCH))
        return 0;
    PyObject *builder = LANE_SLOT(lane, batch, S_B_BUILDER);
    PyObject *callbacks = LANE_SLOT(lane, batch, S_B_CALLBACKS);
    PyObject *pr = LANE_SLOT(lane, batch, S_B_RESULT);
    long long batch_count;
    if (!IS(lane, builder, C_BUILDER) || callbacks == NULL || !PyList_CheckExact(callbacks) || pr == NULL
        || !int_slot(batch, lane->offsets[S_B_COUNT], &batch_count))
        return 0;
    plan_t a;
    long long uncompressed, limit, old_estimate, max_ts, base_ts;
    PyObject *closed_for_appends = LANE_SLOT(lane, builder, S_BU_CLOSED);
    PyObject *buf = LANE_SLOT(lane, builder, S_BU_BUF);
    PyObject *pooled_buffer = LANE_SLOT(lane, builder, S_BU_BUFFER);
    PyObject *factor_obj = LANE_SLOT(lane, builder, S_BU_FACTOR);
    if (closed_for_appends != Py_False || buf == NULL || !PyByteArray_CheckExact(buf) || factor_obj == NULL
        || !(PyFloat_CheckExact(factor_obj) || PyLong_CheckExact(factor_obj)) || !int_slot(builder, lane->offsets[S_BU_COUNT], &a.n) || a.n < 1
        || !int_slot(builder, lane->offsets[S_BU_POS], &a.pos)
        || !int_slot(builder, lane->offsets[S_BU_UNCOMPRESSED], &uncompressed)
        || !int_slot(builder, lane->offsets[S_BU_LIMIT], &limit)
        || !int_slot(builder, lane->offsets[S_BU_ESTIMATE], &old_estimate)
        || !int_slot(builder, lane->offsets[S_BU_MAX_TS], &max_ts)
        || !int_slot(builder, lane->offsets[S_BU_BASE_TS], &base_ts))
        return 0;
    double factor = PyFloat_AsDouble(factor_obj);
    if (factor == -1.0 && PyErr_Occurred())
        return -1;
    a.ts = ts;
    a.ts_delta = ts - base_ts;
    Py_ssize_t body = record_body_size(a.ts_delta, a.n, key_len, value_len);
    a.total = varint_len(body) + body;
    a.after = uncompressed + a.total;
    /* Python: 61 + int(after * factor) when compressing (a double product truncated toward zero) */
    a.estimate = RECORD_BATCH_OVERHEAD + (factor != 0.0 ? (long long)((double)a.after * factor) : a.after);
    if (a.estimate >= limit
        || (factor != 0.0 && (old_estimate + a.total > limit || a.after > MAX_UNCOMPRESSED_RATIO * limit)))
        return 0; /* it would fill the batch: ``append`` does that */
    a.grown = a.estimate - old_estimate;
    if (sticky != NULL && produced + a.grown >= double_size)
        return 0; /* the sticky partition switches: the Python path calls the partitioner */
    a.end = a.pos + a.total;
    if (a.pos < 0 || a.pos > PyByteArray_GET_SIZE(buf))
        return 0;
    if (a.end > PyByteArray_GET_SIZE(buf) && buf == pooled_buffer)
        return 0; /* past the pooled buffer: the Python version moves the records */

    /* every new object first (ints only: nothing the cyclic GC counts), then the changes, which cannot fail */
    PyObject *o_pos = PyLong_FromLongLong(a.end);
    PyObject *o_uncompressed = PyLong_FromLongLong(a.after);
    PyObject *o_estimate = PyLong_FromLongLong(a.estimate);
    PyObject *o_count = PyLong_FromLongLong(a.n + 1);
    PyObject *o_index = PyLong_FromLongLong(batch_count);
    PyObject *o_batch_count = PyLong_FromLongLong(batch_count + 1);
    PyObject *o_ts = ts > max_ts ? PyLong_FromLongLong(ts) : NULL;
    PyObject *o_produced = sticky != NULL ? PyLong_FromLongLong(produced + a.grown) : NULL;
    PyObject *o_delta = callback != Py_None ? PyLong_FromLongLong(a.ts_delta) : NULL;
    PyObject *o_ksize = callback != Py_None ? PyLong_FromSsize_t(key_len) : NULL;
    PyObject *o_vsize = callback != Py_None ? PyLong_FromSsize_t(value_len) : NULL;
    Py_ssize_t cb_len = PyList_GET_SIZE(callbacks);
    int ok = o_pos && o_uncompressed && o_estimate && o_count && o_index && o_batch_count && (o_ts || ts <= max_ts)
             && (o_produced || sticky == NULL) && (callback == Py_None || (o_delta && o_ksize && o_vsize));
    if (ok && a.end > PyByteArray_GET_SIZE(buf) && PyByteArray_Resize(buf, (Py_ssize_t)a.end) < 0)
        ok = 0;
    if (ok && callback != Py_None) {
        PyObject *entry[5] = {callback, o_index, o_delta, o_ksize, o_vsize};
        for (int i = 0; i < 5 && ok; i++)
            ok = PyList_Append(callbacks, entry[i]) == 0;
        if (!ok) /* undo a partial entry (only after a failed allocation) */
            PyList_SetSlice(callbacks, cb_len, PyList_GET_SIZE(callbacks), NULL);
    }
    if (!ok) {
        Py_XDECREF(o_pos);
        Py_XDECREF(o_uncompressed);
        Py_XDECREF(o_estimate);
        Py_XDECREF(o_count);
        Py_XDECREF(o_index);
        Py_XDECREF(o_batch_count);
        Py_XDECREF(o_ts);
        Py_XDECREF(o_produced);
        Py_XDECREF(o_delta);
        Py_XDECREF(o_ksize);
        Py_XDECREF(o_vsize);
        return -1;
    }
    Py_XDECREF(o_delta);
    Py_XDECREF(o_ksize);
    Py_XDECREF(o_vsize);
    put_record(PyByteArray_AS_STRING(buf) + a.pos, body, a.ts_delta, a.n, key_len > 0 ? PyBytes_AS_STRING(key) : NULL,
               key_len, value_len > 0 ? PyBytes_AS_STRING(value) : NULL, value_len);
    set_slot(builder, lane->offsets[S_BU_POS], o_pos);
    set_slot(builder, lane->offsets[S_BU_UNCOMPRESSED], o_uncompressed);
    set_slot(builder, lane->offsets[S_BU_ESTIMATE], o_estimate);
    set_slot(builder, lane->offsets[S_BU_COUNT], o_count);
    if (o_ts != NULL)
        set_slot(builder, lane->offsets[S_BU_MAX_TS], o_ts);
    set_slot(batch, lane->offsets[S_B_COUNT], o_batch_count);
    if (o_produced != NULL)
        set_slot(sticky, lane->offsets[S_ST_PRODUCED], o_produced);
    Py_INCREF(pr);
    *result = pr;
    *index_out = o_index;
    return 1;
}

static PyObject *lane_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    SendLane *lane = (SendLane *)self;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (!lane->enabled || nargs > N_PARAMS)
        return lane_hand_over(lane, args, nargsf, kwnames);
    PyObject *a[N_PARAMS] = {NULL, Py_None, Py_None, Py_None, Py_None, Py_None, Py_None};
    for (Py_ssize_t i = 0; i < nargs; i++)
        a[i] = args[i];
    if (kwnames != NULL) {
        Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
        for (Py_ssize_t j = 0; j < nkw; j++) {
            PyObject *name = PyTuple_GET_ITEM(kwnames, j);
            int found = -1;
            for (int i = 0; i < N_PARAMS && found < 0; i++)
                if (name == param_names[i])
                    found = i;
            for (int i = 0; i < N_PARAMS && found < 0; i++)
                if (PyUnicode_Compare(name, param_names[i]) == 0)
                    found = i;
            if (PyErr_Occurred())
                return NULL;
            if (found < nargs) /* unknown or given twice: the Python send raises the TypeError */
                return lane_hand_over(lane, args, nargsf, kwnames);
            a[found] = args[nargs + j];
        }
    }
    PyObject *topic = a[0], *value = a[1], *key = a[2], *callback = a[6];
    if (topic == NULL || !PyUnicode_CheckExact(topic) || a[3] != Py_None || a[4] != Py_None || a[5] != Py_None
        || (key != Py_None && !PyBytes_CheckExact(key)) || (value != Py_None && !PyBytes_CheckExact(value))
        || (callback != Py_None && !PyCallable_Check(callback))) /* send() raises for a bad callback */
        return lane_hand_over(lane, args, nargsf, kwnames);
    Py_ssize_t key_len = key == Py_None ? -1 : PyBytes_GET_SIZE(key);
    Py_ssize_t value_len = value == Py_None ? -1 : PyBytes_GET_SIZE(value);
    if ((long long)key_len + value_len + 258 >= lane->record_limit) /* send() checks the size */
        return lane_hand_over(lane, args, nargsf, kwnames);
    if (lane->tm_dict != NULL) {
        PyObject *err = PyDict_GetItemWithError(lane->tm_dict, str_last_error); /* borrowed */
        if (err == NULL && PyErr_Occurred())
            return NULL;
        if (err != Py_None)
            return lane_hand_over(lane, args, nargsf, kwnames);
    }
    PyObject *cluster = PyDict_GetItemWithError(lane->metadata_dict, str_cluster);
    if (cluster == NULL) {
        if (PyErr_Occurred())
            return NULL;
        return lane_hand_over(lane, args, nargsf, kwnames);
    }
    Py_INCREF(cluster);
    long n = -1;
    if (IS(lane, cluster, C_CLUSTER)) {
        PyObject *counts = LANE_SLOT(lane, cluster, S_COUNTS);
        PyObject *count = counts != NULL && PyDict_CheckExact(counts) ? PyDict_GetItemWithError(counts, topic) : NULL;
        if (count != NULL && PyLong_CheckExact(count))
            n = PyLong_AsLong(count);
    }
    Py_DECREF(cluster);
    if (PyErr_Occurred())
        return NULL;
    if (n < 1 || n > 0x7fffffffL) /* unknown topic or no partitions yet: send() waits for metadata */
        return lane_hand_over(lane, args, nargsf, kwnames);
    long partition = -1;
    if (key != Py_None && !lane->ignore_keys)
        partition = (long)((murmur2_u32((const unsigned char *)PyBytes_AS_STRING(key), key_len) & 0x7fffffffu)
                           % (uint32_t)n);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now); /* SystemClock.wall_ms(): the lane only serves the system clock */
    long long ts = (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
    PyObject *result = NULL, *index = NULL;
    int done = lane_append(lane, topic, partition, key, value, callback, key_len, value_len, ts, &result, &index);
    if (done < 0)
        return NULL;
    if (done == 0)
        return lane_hand_over(lane, args, nargsf, kwnames);
    lane->fast_count++;
    PyTypeObject *ft = lane->types[C_FUTURE];
    PyObject *future = ft->tp_alloc(ft, 0);
    PyObject *o_ts = PyLong_FromLongLong(ts);
    PyObject *o_k = PyLong_FromSsize_t(key_len);
    PyObject *o_v = PyLong_FromSsize_t(value_len);
    if (future == NULL || o_ts == NULL || o_k == NULL || o_v == NULL) {
        Py_XDECREF(future);
        Py_XDECREF(o_ts);
        Py_XDECREF(o_k);
        Py_XDECREF(o_v);
        Py_DECREF(result);
        Py_DECREF(index);
        return NULL;
    }
    set_slot(future, lane->offsets[S_F_RESULT], result);
    set_slot(future, lane->offsets[S_F_OFFSET], index);
    set_slot(future, lane->offsets[S_F_TIMESTAMP], o_ts);
    set_slot(future, lane->offsets[S_F_KEY_SIZE], o_k);
    set_slot(future, lane->offsets[S_F_VALUE_SIZE], o_v);
    return future;
}

/* SendLane(slow, metadata, accumulator, topics, tm, record_limit, ignore_keys, classes) */
static PyObject *lane_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *slow, *metadata, *accumulator, *topics, *tm, *classes;
    long long record_limit;
    int ignore_keys;
    if (kwds != NULL && PyDict_GET_SIZE(kwds) != 0) {
        PyErr_SetString(PyExc_TypeError, "SendLane takes positional arguments only");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OOOOOLpO!:SendLane", &slow, &metadata, &accumulator, &topics, &tm, &record_limit,
                          &ignore_keys, &PyTuple_Type, &classes))
        return NULL;
    if (PyTuple_GET_SIZE(classes) != C_COUNT) {
        PyErr_Format(PyExc_TypeError, "SendLane: classes must be a tuple of %d classes", C_COUNT);
        return NULL;
    }
    SendLane *lane = (SendLane *)type->tp_alloc(type, 0);
    if (lane == NULL)
        return NULL;
    lane->vectorcall = lane_vectorcall;
    lane->enabled = 1;
    lane->ignore_keys = ignore_keys;
    lane->record_limit = record_limit;
    for (int c = 0; c < C_COUNT; c++) {
        PyObject *cls = PyTuple_GET_ITEM(classes, c);
        if (!PyType_Check(cls)) {
            PyErr_Format(PyExc_TypeError, "SendLane: classes[%d] is not a class", c);
            Py_DECREF(lane);
            return NULL;
        }
        Py_INCREF(cls);
        lane->types[c] = (PyTypeObject *)cls;
    }
    for (int s = 0; s < S_COUNT; s++) {
        PyObject *cls = (PyObject *)lane->types[SLOTS[s].cls];
        PyObject *descr = PyObject_GetAttrString(cls, SLOTS[s].name);
        if (descr == NULL) {
            Py_DECREF(lane);
            return NULL;
        }
        /* the member must be the class's own or a base's: one borrowed from another class as a plain
         * class attribute has that class's offset, past the end of these objects */
        int is_slot = Py_TYPE(descr) == &PyMemberDescr_Type
                      && ((PyMemberDescrObject *)descr)->d_member->type == T_OBJECT_EX
                      && PyType_IsSubtype((PyTypeObject *)cls, ((PyMemberDescrObject *)descr)->d_common.d_type);
        if (is_slot)
            lane->offsets[s] = ((PyMemberDescrObject *)descr)->d_member->offset;
        Py_DECREF(descr);
        if (!is_slot) {
            PyErr_Format(PyExc_TypeError, "SendLane: %R.%s is not a __slots__ attribute", cls, SLOTS[s].name);
            Py_DECREF(lane);
            return NULL;
        }
    }
    Py_INCREF(slow);
    lane->slow = slow;
    Py_INCREF(metadata);
    lane->metadata = metadata;
    Py_INCREF(accumulator);
    lane->accumulator = accumulator;
    Py_INCREF(topics);
    lane->topics = topics;
    Py_INCREF(tm);
    lane->tm = tm;
    lane->metadata_dict = PyObject_GenericGetDict(metadata, NULL);
    lane->accumulator_dict = PyObject_GenericGetDict(accumulator, NULL);
    lane->tm_dict = tm == Py_None ? NULL : PyObject_GenericGetDict(tm, NULL);
    if (lane->metadata_dict == NULL || lane->accumulator_dict == NULL || (tm != Py_None && lane->tm_dict == NULL)) {
        Py_DECREF(lane);
        return NULL;
    }
    if (!PyDict_CheckExact(lane->metadata_dict) || !PyDict_CheckExact(lane->accumulator_dict)
        || (lane->tm_dict != NULL && !PyDict_CheckExact(lane->tm_dict))) {
        PyErr_SetString(PyExc_TypeError, "SendLane: metadata, accumulator and tm need a plain instance __dict__");
        Py_DECREF(lane);
        return NULL;
    }
    return (PyObject *)lane;
}

static int lane_traverse(SendLane *lane, visitproc visit, void *arg) {
    Py_VISIT(lane->slow);
    Py_VISIT(lane->metadata);
    Py_VISIT(lane->accumulator);
    Py_VISIT(lane->topics);
    Py_VISIT(lane->tm);
    Py_VISIT(lane->metadata_dict);
    Py_VISIT(lane->accumulator_dict);
    Py_VISIT(lane->tm_dict);
    for (int c = 0; c < C_COUNT; c++)
        Py_VISIT(lane->types[c]);
    return 0;
}

static int lane_clear(SendLane *lane) {
    lane->enabled = 0;
    Py_CLEAR(lane->slow);
    Py_CLEAR(lane->metadata);
    Py_CLEAR(lane->accumulator);
    Py_CLEAR(lane->topics);
    Py_CLEAR(lane->tm);
    Py_CLEAR(lane->metadata_dict);
    Py_CLEAR(lane->accumulator_dict);
    Py_CLEAR(lane->tm_dict);
    for (int c = 0; c < C_COUNT; c++)
        Py_CLEAR(lane->types[c]);
    return 0;
}

static void lane_dealloc(SendLane *lane) {
    PyObject_GC_UnTrack(lane);
    lane_clear(lane);
    Py_TYPE(lane)->tp_free((PyObject *)lane);
}

static PyObject *lane_call(PyObject *self, PyObject *args, PyObject *kwargs) {
    return PyVectorcall_Call(self, args, kwargs);
}

static PyObject *lane_disable(SendLane *lane, PyObject *unused) {
    lane->enabled = 0;
    Py_RETURN_NONE;
}

static PyObject *lane_get_enabled(SendLane *lane, void *closure) { return PyBool_FromLong(lane->enabled); }
static PyObject *lane_get_fast_count(SendLane *lane, void *closure) {
    return PyLong_FromUnsignedLongLong(lane->fast_count);
}
static PyObject *lane_get_handed_over(SendLane *lane, void *closure) {
    return PyLong_FromUnsignedLongLong(lane->handed_over);
}

static PyMethodDef lane_methods[] = {
    {"disable", (PyCFunction)lane_disable, METH_NOARGS, "Hand every later call to the Python send."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef lane_getset[] = {
    {"enabled", (getter)lane_get_enabled, NULL, "False once disable() was called.", NULL},
    {"fast_count", (getter)lane_get_fast_count, NULL, "Records the lane appended itself.", NULL},
    {"handed_over", (getter)lane_get_handed_over, NULL, "Calls passed to the Python send.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject SendLaneType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sparkafka._accel.SendLane",
    .tp_basicsize = sizeof(SendLane),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "KafkaProducer.send() for the common record in C; hands every other call to the Python send.",
    .tp_new = lane_new,
    .tp_traverse = (traverseproc)lane_traverse,
    .tp_clear = (inquiry)lane_clear,
    .tp_dealloc = (destructor)lane_dealloc,
    .tp_call = lane_call,
    .tp_vectorcall_offset = offsetof(SendLane, vectorcall),
    .tp_methods = lane_methods,
    .tp_getset = lane_getset,
};

int sparkafka_add_send_lane(PyObject *module) {
    str_cluster = PyUnicode_InternFromString("_cluster");
    str_closed = PyUnicode_InternFromString("_closed");
    str_last_error = PyUnicode_InternFromString("last_error");
    str_locked = PyUnicode_InternFromString("locked");
    if (!str_cluster || !str_closed || !str_last_error || !str_locked)
        return -1;
    for (int i = 0; i < N_PARAMS; i++)
        if ((param_names[i] = PyUnicode_InternFromString(PARAM_NAMES[i])) == NULL)
            return -1;
    PyObject *collections = PyImport_ImportModule("collections");
    PyObject *thread = collections != NULL ? PyImport_ImportModule("_thread") : NULL;
    deque_type = collections != NULL ? (PyTypeObject *)PyObject_GetAttrString(collections, "deque") : NULL;
    lock_type = thread != NULL ? (PyTypeObject *)PyObject_GetAttrString(thread, "LockType") : NULL;
    Py_XDECREF(collections);
    Py_XDECREF(thread);
    if (deque_type == NULL || lock_type == NULL)
        return -1;
    if (!PyType_Check(deque_type) || !PyType_Check(lock_type)) {
        PyErr_SetString(PyExc_ImportError, "sparkafka._accel: collections.deque or _thread.LockType is not a class");
        return -1;
    }
    PyObject *locked = PyObject_GetAttrString((PyObject *)lock_type, "locked");
    if (locked == NULL)
        return -1;
    if (Py_TYPE(locked) == &PyMethodDescr_Type && ((PyMethodDescrObject *)locked)->d_common.d_type == lock_type
        && (((PyMethodDescrObject *)locked)->d_method->ml_flags & ~METH_COEXIST) == METH_NOARGS)
        lock_locked_fn = ((PyMethodDescrObject *)locked)->d_method->ml_meth;
    Py_DECREF(locked);
    if (PyType_Ready(&SendLaneType) < 0)
        return -1;
    Py_INCREF(&SendLaneType);
    if (PyModule_AddObject(module, "SendLane", (PyObject *)&SendLaneType) < 0) {
        Py_DECREF(&SendLaneType);
        return -1;
    }
    return 0;
}

#else /* a build without the GIL: the lane's exclusion argument does not hold, so there is no lane */

int sparkafka_add_send_lane(PyObject *module) { return 0; }

#endif
