/* sparkafka._accel.decode_produce_response: the C twin of protocol/produce.py's hand-written Produce
 * response decoder (``_decode_produce_response_py``).
 *
 * How it works: one pass over the response body (v3-v13) that builds the same dicts, with the same keys in
 * the same order, as the Python decoder and the generic ``PRODUCE.decode_response``: a ``responses`` list
 * of ``{"name", "topic_id", "partition_responses"}`` and per partition ``index, error_code, base_offset,
 * log_append_time_ms, log_start_offset, record_errors, error_message, current_leader``. It returns None
 * (the caller then uses the generic codec, so results and error messages stay the generic ones) for
 * everything the Python decoder leaves to that codec (tagged fields, a null where none is allowed,
 * invalid UTF-8, a version outside 3-13) and for any input it cannot read whole; it is stricter than the
 * Python decoder only where the input is malformed anyway (an array count larger than the bytes left).
 * The Sender decodes one response per request: a callgrind replay of one-partition responses through
 * KafkaProtocol.receive_data took 53.8k instructions per response with the Python decoder, 32.8k with this.
 * tests/protocol/test_produce_response.py checks both decoders against the generic codec.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "_accel_common.h"

enum { FIRST_FLEXIBLE = 9, FIRST_TOPIC_ID = 13, FIRST_RECORD_ERRORS = 8, FIRST_START_OFFSET = 5 };

static PyObject *k_responses, *k_throttle, *k_endpoints, *k_name, *k_topic_id, *k_partitions, *k_index,
    *k_error_code, *k_base_offset, *k_append_time, *k_start_offset, *k_record_errors, *k_error_message,
    *k_current_leader, *k_leader_id, *k_leader_epoch, *k_batch_index, *k_batch_message, *no_topic_id,
    *minus_one;

/* The reader: ``ok`` turns 0 at the first read past the end or unusual input (the result is then None). */
typedef struct {
    const unsigned char *p;
    Py_ssize_t pos, size;
    int flexible, ok;
} Reader;

static unsigned char byte_at(Reader *r) {
    if (r->pos >= r->size) {
        r->ok = 0;
        return 0;
    }
    return r->p[r->pos++];
}

static uint64_t read_be(Reader *r, int width) {
    if (r->size - r->pos < width) {
        r->ok = 0;
        return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < width; i++)
        v = (v << 8) | r->p[r->pos + i];
    r->pos += width;
    return v;
}

/* A compact length (unsigned varint, at most 5 bytes) minus one: -1 is null. */
static int64_t compact_length(Reader *r) {
    uint64_t result = 0;
    for (int shift = 0; shift <= 28; shift += 7) {
        unsigned char b = byte_at(r);
        if (!r->ok)
            return 0;
        if (shift == 28) {
            if (b & 0x80) {
                r->ok = 0;
                return 0;
            }
            return (int64_t)((result | ((uint64_t)b << 28)) & 0xFFFFFFFFu) - 1;
        }
        result |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80))
            break;
    }
    return (int64_t)result - 1;
}

/* An array count (``width`` 4) or string length (2); null or negative is unusual, and so is a count of
 * more items than bytes left (every item takes at least one). */
static Py_ssize_t length(Reader *r, int width) {
    int64_t n;
    if (r->flexible)
        n = compact_length(r);
    else
        n = width == 4 ? (int64_t)(int32_t)read_be(r, 4) : (int64_t)(int16_t)read_be(r, 2);
    if (!r->ok || n < 0 || n > r->size - r->pos) {
        r->ok = 0;
        return 0;
    }
    return (Py_ssize_t)n;
}

/* A nullable string: a new reference to a str or None; NULL with ``ok`` 0 on unusual input, NULL with ``ok``
 * 1 on a Python error. */
static PyObject *nullable_string(Reader *r) {
    int64_t n;
    if (r->flexible) {
        n = compact_length(r);
    } else {
        n = (int64_t)(int16_t)read_be(r, 2);
        if (n < -1)
            r->ok = 0;
    }
    if (!r->ok)
        return NULL;
    if (n < 0)
        Py_RETURN_NONE;
    if (n > r->size - r->pos) {
        r->ok = 0;
        return NULL;
    }
    PyObject *s = PyUnicode_DecodeUTF8((const char *)r->p + r->pos, (Py_ssize_t)n, NULL);
    if (s == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
            return NULL;
        PyErr_Clear();
        r->ok = 0;
        return NULL;
    }
    r->pos += (Py_ssize_t)n;
    return s;
}

/* An empty tagged-field section (one zero byte) where the usual response has one; anything else is unusual. */
static void no_tagged_fields(Reader *r) {
    if (r->flexible && byte_at(r) != 0)
        r->ok = 0;
}

/* Set ``key`` of ``dict`` to ``value`` and drop the reference to ``value``; -1 on error. */
static int put(PyObject *dict, PyObject *key, PyObject *value) {
    if (value == NULL)
        return -1;
    int rc = PyDict_SetItem(dict, key, value);
    Py_DECREF(value);
    return rc;
}

/* An array: its count, then ``count`` items read by ``item``, as a new list; NULL on unusual input (``ok``
 * 0) or a Python error. */
static PyObject *decode_array(Reader *r, int version, PyObject *(*item)(Reader *, int)) {
    Py_ssize_t count = length(r, 4);
    if (!r->ok)
        return NULL;
    PyObject *list = PyList_New(0);
    for (Py_ssize_t i = 0; list != NULL && i < count; i++) {
        PyObject *one = item(r, version);
        if (one == NULL || PyList_Append(list, one) < 0)
            Py_CLEAR(list);
        Py_XDECREF(one);
    }
    return list;
}

static PyObject *decode_partition(Reader *r, int version) {
    int64_t index = (int32_t)read_be(r, 4);
    int64_t code = (int16_t)read_be(r, 2);
    int64_t base_offset = (int64_t)read_be(r, 8);
    int64_t append_time = (int64_t)read_be(r, 8);
    int64_t start_offset = version >= FIRST_START_OFFSET ? (int64_t)read_be(r, 8) : -1;
    if (!r->ok)
        return NULL;
    PyObject *record_errors = PyList_New(0);
    if (record_errors == NULL)
        return NULL;
    PyObject *message = Py_None;
    Py_INCREF(message);
    if (r->flexible && r->size - r->pos >= 3 && r->p[r->pos] == 1 && r->p[r->pos + 1] == 0
        && r->p[r->pos + 2] == 0) {
        r->pos += 3; /* the usual partition: no record errors, no error message, no tagged fields */
    } else {
        if (version >= FIRST_RECORD_ERRORS) {
            Py_ssize_t listed = length(r, 4);
            for (Py_ssize_t i = 0; r->ok && i < listed; i++) {
                int64_t batch_index = (int32_t)read_be(r, 4);
                if (!r->ok)
                    break;
                PyObject *text = nullable_string(r);
                if (text == NULL)
                    goto fail;
                no_tagged_fields(r);
                PyObject *entry = PyDict_New();
                if (entry == NULL || put(entry, k_batch_index, PyLong_FromLongLong(batch_index)) < 0) {
                    Py_DECREF(text);
                    Py_XDECREF(entry);
                    goto fail;
                }
                if (put(entry, k_batch_message, text) < 0) { /* put dropped text */
                    Py_DECREF(entry);
                    goto fail;
                }
                int rc = PyList_Append(record_errors, entry);
                Py_DECREF(entry);
                if (rc < 0)
                    goto fail;
            }
            if (r->ok) {
                Py_DECREF(message);
                message = nullable_string(r);
                if (message == NULL)
                    goto fail;
            }
        }
        no_tagged_fields(r);
    }
    if (!r->ok)
        goto fail;
    PyObject *leader = PyDict_New();
    if (leader == NULL)
        goto fail;
    if (PyDict_SetItem(leader, k_leader_id, minus_one) < 0 || PyDict_SetItem(leader, k_leader_epoch, minus_one) < 0) {
        Py_DECREF(leader);
        goto fail;
    }
    PyObject *part = PyDict_New();
    if (part == NULL || put(part, k_index, PyLong_FromLongLong(index)) < 0
        || put(part, k_error_code, PyLong_FromLongLong(code)) < 0
        || put(part, k_base_offset, PyLong_FromLongLong(base_offset)) < 0
        || put(part, k_append_time, PyLong_FromLongLong(append_time)) < 0
        || put(part, k_start_offset, PyLong_FromLongLong(start_offset)) < 0
        || PyDict_SetItem(part, k_record_errors, record_errors) < 0
        || PyDict_SetItem(part, k_error_message, message) < 0 || PyDict_SetItem(part, k_current_leader, leader) < 0) {
        Py_XDECREF(part);
        Py_DECREF(leader);
        goto fail;
    }
    Py_DECREF(leader);
    Py_DECREF(record_errors);
    Py_DECREF(message);
    return part;
fail:
    Py_DECREF(record_errors);
    Py_XDECREF(message);
    return NULL;
}

static PyObject *decode_topic(Reader *r, int version) {
    PyObject *name, *topic_id;
    if (version >= FIRST_TOPIC_ID) {
        if (r->size - r->pos < 16) {
            r->ok = 0;
            return NULL;
        }
        name = PyUnicode_FromStringAndSize("", 0);
        topic_id = PyBytes_FromStringAndSize((const char *)r->p + r->pos, 16);
        r->pos += 16;
    } else {
        Py_ssize_t n = length(r, 2);
        if (!r->ok)
            return NULL;
        name = PyUnicode_DecodeUTF8((const char *)r->p + r->pos, n, NULL);
        if (name == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear();
            r->ok = 0;
            return NULL;
        }
        r->pos += n;
        topic_id = no_topic_id;
        Py_INCREF(topic_id);
    }
    PyObject *partitions = NULL, *topic = NULL;
    if (name == NULL || topic_id == NULL)
        goto done;
    partitions = decode_array(r, version, decode_partition);
    if (partitions == NULL)
        goto done;
    no_tagged_fields(r);
    if (!r->ok)
        goto done;
    topic = PyDict_New();
    if (topic != NULL && (PyDict_SetItem(topic, k_name, name) < 0 || PyDict_SetItem(topic, k_topic_id, topic_id) < 0
                          || PyDict_SetItem(topic, k_partitions, partitions) < 0))
        Py_CLEAR(topic);
done:
    Py_XDECREF(name);
    Py_XDECREF(topic_id);
    Py_XDECREF(partitions);
    return topic;
}

static PyObject *decode(const unsigned char *p, Py_ssize_t size, int version) {
    Reader r = {p, 0, size, version >= FIRST_FLEXIBLE, 1};
    PyObject *result = NULL;
    PyObject *responses = decode_array(&r, version, decode_topic);
    if (responses == NULL)
        goto done;
    int64_t throttle = (int32_t)read_be(&r, 4);
    no_tagged_fields(&r);
    if (!r.ok)
        goto done;
    result = PyDict_New();
    if (result != NULL && (PyDict_SetItem(result, k_responses, responses) < 0
                           || put(result, k_throttle, PyLong_FromLongLong(throttle)) < 0
                           || put(result, k_endpoints, PyList_New(0)) < 0))
        Py_CLEAR(result);
done:
    Py_XDECREF(responses);
    if (result == NULL && !PyErr_Occurred())
        Py_RETURN_NONE; /* unusual input: the generic codec decides */
    return result;
}

static PyObject *accel_decode_produce_response(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "decode_produce_response(version, data) takes 2 arguments");
        return NULL;
    }
    long version = PyLong_AsLong(args[0]);
    if (version == -1 && PyErr_Occurred())
        return NULL;
    if (version < 3 || version > 13)
        Py_RETURN_NONE;
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *result = decode((const unsigned char *)view.buf, view.len, (int)version);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef produce_response_methods[] = {
    {"decode_produce_response", (PyCFunction)(void (*)(void))accel_decode_produce_response, METH_FASTCALL,
     "The Produce response body as a dict, or None to leave it to the generic codec (protocol/produce.py)."},
    {NULL, NULL, 0, NULL},
};

static int intern_key(PyObject **slot, const char *text) {
    *slot = PyUnicode_InternFromString(text);
    return *slot == NULL ? -1 : 0;
}

int sparkafka_add_produce_response_functions(PyObject *module) {
    if (intern_key(&k_responses, "responses") < 0 || intern_key(&k_throttle, "throttle_time_ms") < 0
        || intern_key(&k_endpoints, "node_endpoints") < 0 || intern_key(&k_name, "name") < 0
        || intern_key(&k_topic_id, "topic_id") < 0 || intern_key(&k_partitions, "partition_responses") < 0
        || intern_key(&k_index, "index") < 0 || intern_key(&k_error_code, "error_code") < 0
        || intern_key(&k_base_offset, "base_offset") < 0 || intern_key(&k_append_time, "log_append_time_ms") < 0
        || intern_key(&k_start_offset, "log_start_offset") < 0 || intern_key(&k_record_errors, "record_errors") < 0
        || intern_key(&k_error_message, "error_message") < 0 || intern_key(&k_current_leader, "current_leader") < 0
        || intern_key(&k_leader_id, "leader_id") < 0 || intern_key(&k_leader_epoch, "leader_epoch") < 0
        || intern_key(&k_batch_index, "batch_index") < 0
        || intern_key(&k_batch_message, "batch_index_error_message") < 0)
        return -1;
    no_topic_id = PyBytes_FromStringAndSize(NULL, 16);
    if (no_topic_id == NULL)
        return -1;
    memset(PyBytes_AS_STRING(no_topic_id), 0, 16);
    minus_one = PyLong_FromLong(-1);
    if (minus_one == NULL)
        return -1;
    return PyModule_AddFunctions(module, produce_response_methods);
}
