/* sparkafka._accel.SendLane: KafkaProducer.send() for the common record, in one C call.
 *
 * How it works: the producer (producer/send_lane.py, ``install_send_lane``) makes one lane and
 * binds it as the instance attribute ``send``, so ``producer.send(topic, value, key, callback=cb)``
 * calls this vectorcall directly. The lane handles a record when it can do exactly what the Python
 * fast path does (``KafkaProducer.send`` -> ``RecordAccumulator.append_open``): topic a str, key and
 * value bytes or None, no partition, timestamp or headers, the topic's metadata known, the record
 * leaving its partition's open batch still open, the sticky partition not switching, the partition
 * queue's lock free, the producer not closing nor in a fatal error, and with a transactional id the
 * transaction manager in IN_TRANSACTION and the record's partition already in the transaction
 * (``_txn_partitions``: the Python send adds a partition, once per transaction). A record that passed
 * the checks but that the open batch cannot take that way (it opens or fills a batch, the sticky
 * partition switches, the lock is held, its partition is not in the transaction yet) goes with its
 * partition and timestamp to ``append`` (``KafkaProducer._append_from_lane``: the rest of the Python
 * send, from ``RecordAccumulator.append`` on; a transactional producer's lane has no ``append``).
 * Everything else goes unchanged to the Python ``send`` (``slow``), which decides and raises as always;
 * the lane changes nothing before it hands a call over.
 *
 * What the lane reads of the producer is the interface of ``_append.h``: the batch, its builder, the
 * partitioner's sticky partition and the future are the C types declared there (the append itself is
 * ``sparkafka_batch_plan`` and ``sparkafka_batch_commit``, as for ``ProducerBatch.try_append_open``).
 * Besides, the lane asks the accumulator once per topic and partition for what never changes
 * (``RecordAccumulator.lane_topic``: the partitioner and ``double_batch_size``; ``lane_queue``: the
 * queue's deque and lock) and keeps the answers (``topics``), and reads three plain attributes from
 * the instance ``__dict__``: ``Metadata._cluster`` (the current snapshot; the lane keeps the last
 * one's partition counts, ``Cluster._counts``, since a snapshot never changes, and the last topic's
 * count and entry, found again by the topic object's identity),
 * ``RecordAccumulator._closed`` and ``TransactionManager.last_error`` (each kept while its dict is unchanged,
 * ``attribute``). The lane counts its own records
 * (``fast_count``); ``RecordAccumulator.records_appended`` counts the Python appends.
 *
 * Locking: Python appends hold the partition queue's lock. The lane checks that the lock (exactly a
 * ``_thread.lock``, the deque exactly a ``collections.deque``: their methods run no Python code) is free
 * and then does the whole append without releasing the GIL and without running Python code or
 * allocating anything the cyclic GC tracks (only ints and list growth), so no other thread can take
 * the lock or see a half-done append: the same exclusion, without two method calls per record. Asking
 * the accumulator runs Python code, so after it the lane hands the call over. The future is made after
 * the append. A build without the GIL (Py_GIL_DISABLED) has no lane.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <time.h>

#include "_accel_common.h"
#include "_append.h"
#include "_sender_io.h"

#ifndef Py_GIL_DISABLED

/* send()'s parameters, in order */
#define N_PARAMS 7
static const char *PARAM_NAMES[N_PARAMS] = {"topic", "value", "key", "partition", "timestamp", "headers", "callback"};

/* One plain attribute read from an instance __dict__, kept while the dict is unchanged: on CPython before
 * 3.12 every change of a dict gives it a new ``ma_version_tag`` (PEP 509), so an equal tag means the
 * borrowed value is still the dict's (the dict holds it). Later versions deprecate the tag: there the
 * lane looks the attribute up every time. */
typedef struct {
    unsigned long long tag; /* 0: nothing kept */
    PyObject *value;        /* borrowed from the dict */
} dict_read_t;

/* ``dict[name]`` (borrowed; NULL with or without an exception, as PyDict_GetItemWithError). Three of these
 * per record were ~400 instructions of ~6,700 (callgrind, keyed records with a callback); the instance
 * dicts change about once per batch or Sender loop. */
static inline PyObject *attribute(PyObject *dict, PyObject *name, dict_read_t *kept) {
#if PY_VERSION_HEX < 0x030C0000
    unsigned long long tag = (unsigned long long)((PyDictObject *)dict)->ma_version_tag;
    if (kept->tag == tag && tag != 0)
        return kept->value;
    PyObject *value = PyDict_GetItemWithError(dict, name);
    kept->tag = value != NULL ? tag : 0;
    kept->value = value;
    return value;
#else
    (void)kept;
    return PyDict_GetItemWithError(dict, name);
#endif
}

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    int enabled;
    int ignore_keys;
    long long record_limit;
    unsigned long long fast_count; /* records the lane appended */
    unsigned long long handed_over; /* calls it passed to ``slow`` or ``append`` */
    PyObject *slow;        /* the Python send (a bound method) */
    PyObject *append;      /* KafkaProducer._append_from_lane (bound) or NULL: the rest of send for a record the
                            * lane checked and placed but could not append to the open batch */
    PyObject *metadata;    /* Metadata: ._cluster */
    PyObject *accumulator; /* RecordAccumulator: ._closed, lane_topic(), lane_queue() */
    PyObject *tm;          /* TransactionManager or None: .last_error */
    /* the instance __dict__ of metadata, accumulator and tm (NULL for None): the plain attributes the
     * lane reads are looked up there, without PyObject_GetAttr's walk of the class */
    PyObject *metadata_dict, *accumulator_dict, *tm_dict;
    /* the last value read from each of them and the dict's version then (``attribute``) */
    dict_read_t cluster_read, closed_read, last_error_read, state_read, txn_partitions_read;
    /* a transactional producer's TransactionManager state for "in a transaction" (TxnState.IN_TRANSACTION),
     * NULL for other producers: the lane then also needs that state and the record's partition among the
     * transaction's (``_txn_partitions``; a partition is added by the Python path, once per transaction) */
    PyObject *in_transaction;
    PyTypeObject *future_type; /* FutureRecordMetadata: FutureState without further fields */
    /* topic -> [partitioner, double_batch_size, (deque, lock) or None for partition 0, 1, ...] */
    PyObject *topics;
    PyObject *cluster; /* the last metadata snapshot seen (held, so that its identity stays its own) */
    PyObject *counts;  /* its partition counts: dict topic -> int */
    /* the last topic object sent to (compared by identity: a caller sends the same str again and again),
     * its partition count in ``cluster`` (0 once a new snapshot comes) and its entry of ``topics`` (NULL
     * until looked up; an entry is never replaced): two dict lookups fewer per record */
    PyObject *last_topic, *last_entry;
    long last_count;
} SendLane;

static PyObject *str_state, *str_txn_partitions;
static PyObject *str_cluster, *str_closed, *str_last_error, *str_locked, *str_counts, *str_lane_topic,
    *str_lane_queue;
/* the exact types of a queue's deque and lock (anything else could run Python code) */
static PyTypeObject *deque_type, *lock_type;
/* _thread.lock.locked (METH_NOARGS), called straight for an object of exactly lock_type: no method
 * lookup per record; NULL if this Python's lock has another shape (then the method is looked up) */
static PyCFunction lock_locked_fn;
static PyObject *param_names[N_PARAMS];

static PyObject *lane_hand_over(SendLane *lane, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    lane->handed_over++;
    return PyObject_Vectorcall(lane->slow, args, nargsf, kwnames);
}

/* A record the lane checked (types, size, metadata known) and placed (``partition``: murmur2, or -1 for the
 * sticky partitioner; ``ts``) but lane_append did not take: ``append(topic, partition, ts, key, value,
 * callback)``, which goes on where the Python send would be after the same checks. Without ``append``, the
 * Python send from the start. Through the whole Python send, the checks made again cost a keyed record with
 * a callback ~160 instructions on average, ~22k per 16 KB batch (callgrind, Apache Kafka). */
static PyObject *lane_hand_on(SendLane *lane, PyObject *const *args, size_t nargsf, PyObject *kwnames,
                              PyObject *topic, long partition, long long ts, PyObject *key, PyObject *value,
                              PyObject *callback) {
    if (lane->append == NULL)
        return lane_hand_over(lane, args, nargsf, kwnames);
    lane->handed_over++;
    PyObject *o_partition = PyLong_FromLong(partition);
    PyObject *o_ts = o_partition != NULL ? PyLong_FromLongLong(ts) : NULL;
    PyObject *result = NULL;
    if (o_ts != NULL) {
        PyObject *call_args[6] = {topic, o_partition, o_ts, key, value, callback};
        result = PyObject_Vectorcall(lane->append, call_args, 6, NULL);
    }
    Py_XDECREF(o_partition);
    Py_XDECREF(o_ts);
    return result;
}

/* An exact int that fits a long long (no exception either way). */
static inline int as_ll(PyObject *v, long long *out) {
    if (v == NULL || !PyLong_CheckExact(v))
        return 0;
    int overflow;
    *out = PyLong_AsLongLongAndOverflow(v, &overflow);
    return !overflow;
}

/* The partition count of ``topic`` in the current metadata snapshot: >= 1, 0 when unknown, -1 on error. */
static long partition_count(SendLane *lane, PyObject *topic) {
    PyObject *cluster = attribute(lane->metadata_dict, str_cluster, &lane->cluster_read); /* borrowed */
    if (cluster == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (cluster != lane->cluster) { /* a new snapshot: keep it and its counts */
        PyObject *counts = PyObject_GetAttr(cluster, str_counts);
        if (counts == NULL) {
            PyErr_Clear();
            return 0;
        }
        if (!PyDict_CheckExact(counts)) {
            Py_DECREF(counts);
            return 0;
        }
        Py_INCREF(cluster);
        Py_XSETREF(lane->cluster, cluster);
        Py_XSETREF(lane->counts, counts);
        lane->last_count = 0;
    }
    if (topic == lane->last_topic && lane->last_count > 0)
        return lane->last_count;
    long long n;
    PyObject *count = PyDict_GetItemWithError(lane->counts, topic);
    if (count == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (!as_ll(count, &n) || n < 1 || n > 0x7fffffffL)
        return 0;
    if (topic != lane->last_topic) { /* lane_append, which runs next, keeps the new topic's entry */
        Py_INCREF(topic);
        Py_XSETREF(lane->last_topic, topic);
        Py_CLEAR(lane->last_entry);
    }
    lane->last_count = (long)n;
    return (long)n;
}

/* Ask the accumulator for what the lane keeps of a topic (``partition`` < 0) or of one of its
 * partitions' queues; 0 when it has nothing yet, -1 with an exception set. Runs Python code. */
static int learn(SendLane *lane, PyObject *topic, long partition) {
    PyObject *got = partition < 0 ? PyObject_CallMethodOneArg(lane->accumulator, str_lane_topic, topic)
                                  : PyObject_CallMethod(lane->accumulator, "lane_queue", "Ol", topic, partition);
    if (got == NULL)
        return -1;
    int rc = 0;
    if (got == Py_None)
        goto done;
    rc = -1;
    if (!PyTuple_CheckExact(got) || PyTuple_GET_SIZE(got) != (partition < 0 ? 2 : 3)) {
        PyErr_Format(PyExc_TypeError, "SendLane: RecordAccumulator.%U returned %R, not a pair or triple",
                     partition < 0 ? str_lane_topic : str_lane_queue, got);
        goto done;
    }
    PyObject *first = PyTuple_GET_ITEM(got, 0), *second = PyTuple_GET_ITEM(got, 1);
    if (partition < 0) {
        long long double_size;
        if (!PyObject_TypeCheck(first, &PartitionerStateType) || !as_ll(second, &double_size)) {
            PyErr_Format(PyExc_TypeError, "SendLane: RecordAccumulator.lane_topic returned %R", got);
            goto done;
        }
        PyObject *entry = PyList_New(2);
        if (entry == NULL)
            goto done;
        Py_INCREF(first);
        Py_INCREF(second);
        PyList_SET_ITEM(entry, 0, first);
        PyList_SET_ITEM(entry, 1, second);
        PyObject *kept = PyDict_SetDefault(lane->topics, topic, entry); /* another thread may have been first */
        Py_DECREF(entry);
        rc = kept == NULL ? -1 : 0;
        goto done;
    }
    if (Py_TYPE(first) != deque_type || Py_TYPE(second) != lock_type || !PyTuple_CheckExact(PyTuple_GET_ITEM(got, 2))) {
        PyErr_Format(PyExc_TypeError, "SendLane: RecordAccumulator.lane_queue returned %R", got);
        goto done;
    }
    PyObject *entry = PyDict_GetItemWithError(lane->topics, topic);
    if (entry == NULL) { /* cannot happen: the topic is learnt first and never forgotten */
        rc = PyErr_Occurred() ? -1 : 0;
        goto done;
    }
    Py_INCREF(entry);
    Py_ssize_t slot = 2 + (Py_ssize_t)partition;
    rc = 0;
    while (rc == 0 && PyList_GET_SIZE(entry) <= slot)
        rc = PyList_Append(entry, Py_None);
    if (rc == 0) {
        Py_INCREF(got);
        rc = PyList_SetItem(entry, slot, got);
    }
    Py_DECREF(entry);
done:
    Py_DECREF(got);
    return rc;
}

/* The append (RecordAccumulator.append_open): 1 when done, with the future's ProduceRequestResult,
 * index and key and value sizes (new references) in out[0..3]; 0 to hand the call over (nothing
 * changed); -1 with an exception set (nothing changed). */
static int lane_append(SendLane *lane, PyObject *topic, long n, long partition, PyObject *key, PyObject *value,
                       PyObject *callback, Py_ssize_t key_len, Py_ssize_t value_len, long long ts, PyObject **out) {
    /* partition_count made ``topic`` the last topic */
    PyObject *entry = lane->last_entry; /* borrowed either way */
    if (entry == NULL) {
        entry = PyDict_GetItemWithError(lane->topics, topic);
        if (entry == NULL)
            return PyErr_Occurred() || learn(lane, topic, -1) < 0 ? -1 : 0;
        Py_INCREF(entry);
        lane->last_entry = entry;
    }
    StickyState *sticky = NULL;
    long long produced = 0, double_size = 0;
    if (partition < 0) {
        PyObject *info = ((PartitionerState *)PyList_GET_ITEM(entry, 0))->info;
        long long p;
        if (info == NULL || !PyObject_TypeCheck(info, &StickyStateType))
            return 0; /* no sticky partition yet: the Python path picks the first */
        sticky = (StickyState *)info;
        if (!as_ll(sticky->partition, &p) || p < 0 || p >= n || !as_ll(sticky->produced_bytes, &produced)
            || !as_ll(PyList_GET_ITEM(entry, 1), &double_size))
            return 0;
        partition = (long)p;
    }
    Py_ssize_t slot = 2 + (Py_ssize_t)partition;
    PyObject *queue = slot < PyList_GET_SIZE(entry) ? PyList_GET_ITEM(entry, slot) : Py_None;
    if (queue == Py_None)
        return learn(lane, topic, partition) < 0 ? -1 : 0;
    PyObject *dq = PyTuple_GET_ITEM(queue, 0), *lock = PyTuple_GET_ITEM(queue, 1);
    if (lane->in_transaction != NULL) { /* the partition must be in the transaction already */
        PyObject *parts = attribute(lane->tm_dict, str_txn_partitions, &lane->txn_partitions_read); /* borrowed */
        if (parts == NULL)
            return PyErr_Occurred() ? -1 : 0;
        if (!PySet_CheckExact(parts))
            return 0;
        int added = PySet_Contains(parts, PyTuple_GET_ITEM(queue, 2)); /* a (str, int) tuple: no Python code */
        if (added <= 0)
            return added;
    }
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
    PyObject *closed = attribute(lane->accumulator_dict, str_closed, &lane->closed_read); /* borrowed */
    if (closed == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (closed != Py_False)
        return 0;
    PyObject *batch = PySequence_GetItem(dq, queued - 1); /* new reference; the deque keeps one too */
    if (batch == NULL)
        return -1;
    Py_DECREF(batch);
    if (!PyObject_TypeCheck(batch, &BatchStateType))
        return 0;
    append_plan_t plan;
    if (sparkafka_batch_plan((BatchState *)batch, ts, key_len, value_len, &plan) != 1)
        return 0;
    long long produced_after = 0;
    if (sticky != NULL && (__builtin_add_overflow(produced, plan.grown, &produced_after) || produced_after >= double_size))
        return 0; /* the sticky partition switches: the Python path calls the partitioner */
    /* every new object first (ints only: nothing the cyclic GC counts), then the changes */
    PyObject *o_produced = sticky != NULL ? PyLong_FromLongLong(produced_after) : NULL;
    PyObject *o_k = PyLong_FromSsize_t(key_len);
    PyObject *o_v = PyLong_FromSsize_t(value_len);
    PyObject *index = NULL;
    if ((sticky == NULL || o_produced != NULL) && o_k != NULL && o_v != NULL)
        index = sparkafka_batch_commit((BatchState *)batch, &plan, key_len > 0 ? PyBytes_AS_STRING(key) : NULL,
                                       key_len, value_len > 0 ? PyBytes_AS_STRING(value) : NULL, value_len,
                                       callback, o_k, o_v);
    if (index == NULL) {
        Py_XDECREF(o_produced);
        Py_XDECREF(o_k);
        Py_XDECREF(o_v);
        return -1;
    }
    if (sticky != NULL)
        Py_SETREF(sticky->produced_bytes, o_produced); /* the old one is an int: no code runs */
    PyObject *result = ((BatchState *)batch)->result;
    Py_INCREF(result);
    out[0] = result;
    out[1] = index;
    out[2] = o_k;
    out[3] = o_v;
    return 1;
}

static PyObject *lane_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    SendLane *lane = (SendLane *)self;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    sparkafka_hand_over_gil(); /* the Sender is back from its socket wait: let it run first (_sender_io.c) */
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
        PyObject *err = attribute(lane->tm_dict, str_last_error, &lane->last_error_read); /* borrowed */
        if (err == NULL && PyErr_Occurred())
            return NULL;
        if (err != Py_None)
            return lane_hand_over(lane, args, nargsf, kwnames);
        if (lane->in_transaction != NULL) { /* send() raises outside a transaction */
            PyObject *state = attribute(lane->tm_dict, str_state, &lane->state_read); /* borrowed */
            if (state == NULL && PyErr_Occurred())
                return NULL;
            if (state != lane->in_transaction)
                return lane_hand_over(lane, args, nargsf, kwnames);
        }
    }
    long n = partition_count(lane, topic);
    if (n < 0)
        return NULL;
    if (n == 0) /* unknown topic or no partitions yet: send() waits for metadata */
        return lane_hand_over(lane, args, nargsf, kwnames);
    long partition = -1;
    if (key != Py_None && !lane->ignore_keys)
        partition = (long)((murmur2_u32((const unsigned char *)PyBytes_AS_STRING(key), key_len) & 0x7fffffffu)
                           % (uint32_t)n);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now); /* SystemClock.wall_ms(): the lane only serves the system clock */
    long long ts = (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
    PyObject *got[4]; /* result, index, key size, value size */
    int done = lane_append(lane, topic, n, partition, key, value, callback, key_len, value_len, ts, got);
    if (done < 0)
        return NULL;
    if (done == 0)
        return lane_hand_on(lane, args, nargsf, kwnames, topic, partition, ts, key, value, callback);
    lane->fast_count++;
    return sparkafka_future_new(lane->future_type, got[0], got[1], got[2], got[3], ts);
}

/* SendLane(slow, metadata, accumulator, tm, record_limit, ignore_keys, future_type[, append[, in_transaction]]) */
static PyObject *lane_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *slow, *metadata, *accumulator, *tm, *append = Py_None, *in_transaction = Py_None;
    PyTypeObject *future_type;
    long long record_limit;
    int ignore_keys;
    if (kwds != NULL && PyDict_GET_SIZE(kwds) != 0) {
        PyErr_SetString(PyExc_TypeError, "SendLane takes positional arguments only");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OOOOLpO!|OO:SendLane", &slow, &metadata, &accumulator, &tm, &record_limit,
                          &ignore_keys, &PyType_Type, &future_type, &append, &in_transaction))
        return NULL;
    if (in_transaction != Py_None && tm == Py_None) {
        PyErr_SetString(PyExc_TypeError, "SendLane: in_transaction needs a transaction manager");
        return NULL;
    }
    if (append != Py_None && !PyCallable_Check(append)) {
        PyErr_Format(PyExc_TypeError, "SendLane: append must be callable or None, got %R", append);
        return NULL;
    }
    /* the lane fills the fields of FutureState; a subclass with fields of its own would keep them unset */
    if (!PyType_IsSubtype(future_type, &FutureStateType) || future_type->tp_basicsize != FutureStateType.tp_basicsize
        || future_type->tp_dictoffset != 0 || future_type->tp_itemsize != 0) {
        PyErr_Format(PyExc_TypeError,
                     "SendLane: future_type must be a subclass of FutureState without fields of its own, got %R",
                     future_type);
        return NULL;
    }
    SendLane *lane = (SendLane *)type->tp_alloc(type, 0);
    if (lane == NULL)
        return NULL;
    lane->vectorcall = lane_vectorcall;
    lane->enabled = 1;
    lane->ignore_keys = ignore_keys;
    lane->record_limit = record_limit;
    Py_INCREF(slow);
    lane->slow = slow;
    if (append != Py_None) {
        Py_INCREF(append);
        lane->append = append;
    }
    if (in_transaction != Py_None) {
        Py_INCREF(in_transaction);
        lane->in_transaction = in_transaction;
    }
    Py_INCREF(metadata);
    lane->metadata = metadata;
    Py_INCREF(accumulator);
    lane->accumulator = accumulator;
    Py_INCREF(tm);
    lane->tm = tm;
    Py_INCREF(future_type);
    lane->future_type = future_type;
    lane->topics = PyDict_New();
    lane->metadata_dict = PyObject_GenericGetDict(metadata, NULL);
    lane->accumulator_dict = PyObject_GenericGetDict(accumulator, NULL);
    lane->tm_dict = tm == Py_None ? NULL : PyObject_GenericGetDict(tm, NULL);
    if (lane->topics == NULL || lane->metadata_dict == NULL || lane->accumulator_dict == NULL
        || (tm != Py_None && lane->tm_dict == NULL)) {
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
    Py_VISIT(lane->append);
    Py_VISIT(lane->in_transaction);
    Py_VISIT(lane->metadata);
    Py_VISIT(lane->accumulator);
    Py_VISIT(lane->tm);
    Py_VISIT(lane->metadata_dict);
    Py_VISIT(lane->accumulator_dict);
    Py_VISIT(lane->tm_dict);
    Py_VISIT(lane->future_type);
    Py_VISIT(lane->topics);
    Py_VISIT(lane->cluster);
    Py_VISIT(lane->counts);
    Py_VISIT(lane->last_topic);
    Py_VISIT(lane->last_entry);
    return 0;
}

static int lane_clear(SendLane *lane) {
    lane->enabled = 0;
    Py_CLEAR(lane->slow);
    Py_CLEAR(lane->append);
    Py_CLEAR(lane->in_transaction);
    Py_CLEAR(lane->metadata);
    Py_CLEAR(lane->accumulator);
    Py_CLEAR(lane->tm);
    Py_CLEAR(lane->metadata_dict);
    Py_CLEAR(lane->accumulator_dict);
    Py_CLEAR(lane->tm_dict);
    lane->cluster_read.tag = lane->closed_read.tag = lane->last_error_read.tag = 0;
    lane->state_read.tag = lane->txn_partitions_read.tag = 0;
    Py_CLEAR(lane->future_type);
    Py_CLEAR(lane->topics);
    Py_CLEAR(lane->cluster);
    Py_CLEAR(lane->counts);
    Py_CLEAR(lane->last_topic);
    Py_CLEAR(lane->last_entry);
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
    {"handed_over", (getter)lane_get_handed_over, NULL, "Calls passed to Python (send, or append after the checks).",
     NULL},
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
    str_state = PyUnicode_InternFromString("state");
    str_txn_partitions = PyUnicode_InternFromString("_txn_partitions");
    if (!str_state || !str_txn_partitions)
        return -1;
    str_locked = PyUnicode_InternFromString("locked");
    str_counts = PyUnicode_InternFromString("_counts");
    str_lane_topic = PyUnicode_InternFromString("lane_topic");
    str_lane_queue = PyUnicode_InternFromString("lane_queue");
    if (!str_cluster || !str_closed || !str_last_error || !str_locked || !str_counts || !str_lane_topic
        || !str_lane_queue)
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
