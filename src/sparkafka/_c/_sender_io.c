/* The Sender thread's I/O for plaintext connections: sparkafka._accel.wait_for_io, hand_over_gil,
 * send_nowait and recv_nowait. The Sender gets the GIL back as soon as the I/O it waited for is
 * ready, instead of up to one switch interval later, and then does not give it up again per socket call.
 *
 * How it works: CPython gives the GIL to a thread that asks for it only when the holder blocks or, if
 * the holder keeps running, after ``sys.getswitchinterval()`` (5 ms by default). The sending thread of a
 * busy producer never blocks, so each time the Sender thread comes back from waiting on its sockets it
 * could wait up to 5 ms before it may read the answer or write the next request: with
 * ``max.in.flight.requests.per.connection`` requests per broker that wait, not the broker, caps the
 * rate (a keyed run on Apache Kafka: p50 latency 270-400 ms with the buffer full, and 1.1-1.5x the
 * records/s with a 0.5 ms switch interval).
 *
 * ``wait_for_io(epoll_fd, timeout_ms, max_events, hand_over)`` is the Sender's wait (``NetworkClient.poll``
 * on an epoll selector): ``epoll_wait`` without the GIL, and, when ``hand_over`` is true, before taking the
 * GIL back it adds one to ``sparkafka_io_waiters``; once it has the GIL it takes the one away. The Sender
 * asks for the hand-over only while full batches wait for it (``RecordAccumulator.has_full_backlog``):
 * then every moment it waits is throughput lost. Otherwise a prompt Sender only sends smaller batches
 * sooner: with 600 partitions on 3 Apache Kafka nodes, a Sender always handed the GIL sent batches of 5.5
 * records and the rate fell from ~590k to 184k records/s (each batch costs the Sender ~20 us of Python).
 * So without a backlog it takes the GIL back when CPython gives it, and its socket calls give it up too
 * (``IoMode`` in net/connection.py): the records then wait for it in fuller batches. A thread that holds the GIL and
 * calls ``sparkafka_hand_over_gil`` (the C send lane does at each send) sees the count, releases the
 * GIL and sleeps on a condition variable until the count is zero (the Sender wakes one sleeper once it
 * has the GIL: ``io_wait_over``) or ``HANDOFF_MAX_NS`` has passed; then it asks for the GIL as usual, and the Sender, which now has
 * it, keeps it until its own next wait (the same inline check then waits for the thread's sending turn,
 * ``_send_turns.c``). ``hand_over_gil()`` is the same for Python callers. Nothing
 * changes for a thread that never calls it: it just does not give the GIL up early. ``wait_for_io``
 * returns a list of (fd, events) pairs as ``select.epoll.poll`` does (an EINTR returns an empty list;
 * the caller polls again).
 *
 * A child process starts with the counts at zero and a fresh mutex and condition (pthread_atfork).
 *
 * ``send_nowait(fd, pieces)`` and ``recv_nowait(fd, size)`` are ``socket.sendmsg`` and ``socket.recv`` on a
 * non-blocking plaintext socket that keep the GIL: the calls never block, and every release would be one
 * more chance for a busy sending thread to take the GIL for a switch interval. The exception is a write
 * of at least ``SEND_RELEASE_MIN`` bytes (a Produce request of whole batches): on loopback the kernel's
 * copy and TCP work for it takes long enough that ``send_nowait`` releases the GIL around ``sendmsg``, so
 * the sending thread encodes the next records meanwhile, and takes it back as ``wait_for_io`` does, with
 * the hand-over (the bulk Arrow path on Apache Kafka, A/B in one run: 2.54M against 2.09M rows/s median;
 * keyed records about +4%). ``send_nowait`` writes up
 * to 64 buffers with one ``sendmsg`` (MSG_NOSIGNAL) and returns the bytes written, 0 when the socket
 * takes nothing now (EAGAIN); ``recv_nowait`` returns the bytes read (b"" at end of stream) and raises
 * ``BlockingIOError`` when there are none. Other errors raise ``OSError`` with the errno, as the socket
 * methods do; EINTR is retried.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

#include "_sender_io.h"

#ifdef __linux__
#include <sys/epoll.h>
#define HAVE_WAIT_FOR_IO 1
#endif

int sparkafka_io_waiters = 0;

/* How long a sending thread waits for an I/O thread to take the GIL before it asks for it again. */
#define HANDOFF_MAX_NS 1000000LL

/* Sending threads that gave the GIL up sleep on ``handoff_cond`` (not a spin: the thread the GIL goes to
 * needs the CPU) until the count is zero; the last waiter to get the GIL wakes them if any sleep. */
static pthread_mutex_t handoff_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t handoff_cond;
static int handoff_sleepers = 0; /* changed under handoff_mutex, read by the I/O thread with __atomic */

static int init_handoff_cond(void) {
    pthread_condattr_t attr;
    if (pthread_condattr_init(&attr) != 0)
        return -1;
    int failed = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) != 0 || pthread_cond_init(&handoff_cond, &attr) != 0;
    pthread_condattr_destroy(&attr);
    return failed ? -1 : 0;
}

void sparkafka_hand_over_gil_slow(void) {
    Py_BEGIN_ALLOW_THREADS
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_nsec += HANDOFF_MAX_NS;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec += 1;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&handoff_mutex);
    __atomic_add_fetch(&handoff_sleepers, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&sparkafka_io_waiters, __ATOMIC_SEQ_CST) != 0)
        if (pthread_cond_timedwait(&handoff_cond, &handoff_mutex, &deadline) == ETIMEDOUT)
            break;
    __atomic_sub_fetch(&handoff_sleepers, 1, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&handoff_mutex);
    Py_END_ALLOW_THREADS
}

/* Called by an I/O thread once it has the GIL again. The sleeper counts itself before it looks at the
 * waiters, and this thread uncounts itself before it looks at the sleepers (both sequentially
 * consistent), so either the sleeper sees zero waiters or this thread sees the sleeper and wakes it.
 * It wakes one sleeper, not all: only one thread can use the GIL next, and every sending thread that
 * waits for the GIL is one more that takes it before the I/O thread's next hand-over (CPython gives the
 * GIL to its waiters about in the order they came, so the I/O thread, the latest, comes last). The
 * others sleep out their HANDOFF_MAX_NS. With 8 sending threads on Apache Kafka the Sender then waited
 * 21 us instead of 31 us on average for the GIL after its socket wait, 55 us instead of 90 us after a
 * large write, and 8 threads sent 0.84x one thread's records/s instead of 0.78x. */
static void io_wait_over(void) {
    if (__atomic_sub_fetch(&sparkafka_io_waiters, 1, __ATOMIC_SEQ_CST) == 0
        && __atomic_load_n(&handoff_sleepers, __ATOMIC_SEQ_CST) != 0) {
        pthread_mutex_lock(&handoff_mutex);
        pthread_cond_signal(&handoff_cond);
        pthread_mutex_unlock(&handoff_mutex);
    }
}

/* Take the GIL back after an I/O wait or call, announced to ``hand_over_gil`` so that a sending thread
 * gives it up at its next send instead of after a switch interval. */
static void restore_with_hand_over(PyThreadState *ts) {
    __atomic_add_fetch(&sparkafka_io_waiters, 1, __ATOMIC_SEQ_CST);
    PyEval_RestoreThread(ts);
    io_wait_over();
}

static PyObject *accel_hand_over_gil(PyObject *self, PyObject *unused) {
    sparkafka_hand_over_gil();
    Py_RETURN_NONE;
}

#ifdef HAVE_WAIT_FOR_IO
static PyObject *accel_wait_for_io(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError,
                        "wait_for_io(epoll_fd, timeout_ms, max_events, hand_over) takes 4 arguments");
        return NULL;
    }
    long values[3];
    for (int i = 0; i < 3; i++) {
        values[i] = PyLong_AsLong(args[i]);
        if (values[i] == -1 && PyErr_Occurred())
            return NULL;
    }
    int hand_over = PyObject_IsTrue(args[3]);
    if (hand_over < 0)
        return NULL;
    if (values[0] < 0 || values[0] > INT_MAX) {
        PyErr_Format(PyExc_ValueError, "epoll_fd must be a file descriptor, got %ld", values[0]);
        return NULL;
    }
    int epfd = (int)values[0];
    int timeout = values[1] < 0 ? -1 : values[1] > INT_MAX ? INT_MAX : (int)values[1];
    int max_events = values[2] > 1024 ? 1024 : (int)values[2];
    if (max_events < 1)
        max_events = 1;
    struct epoll_event events[1024];
    int n, err;
    PyThreadState *ts = PyEval_SaveThread();
    n = epoll_wait(epfd, events, max_events, timeout);
    err = errno;
    if (hand_over)
        restore_with_hand_over(ts);
    else
        PyEval_RestoreThread(ts);
    if (n < 0) {
        if (err == EINTR) {
            if (PyErr_CheckSignals() < 0)
                return NULL;
            return PyList_New(0);
        }
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    PyObject *out = PyList_New(n);
    if (out == NULL)
        return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *pair = Py_BuildValue("(iI)", events[i].data.fd, (unsigned int)events[i].events);
        if (pair == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, pair);
    }
    return out;
}
#endif

#define SEND_MAX_PIECES 64
/* writes of at least this many bytes release the GIL around sendmsg (see the top of the file) */
#define SEND_RELEASE_MIN 16384

static int fd_argument(PyObject *arg, int *fd) {
    long value = PyLong_AsLong(arg);
    if (value == -1 && PyErr_Occurred())
        return -1;
    if (value < 0 || value > INT_MAX) {
        PyErr_Format(PyExc_ValueError, "fd must be a file descriptor, got %ld", value);
        return -1;
    }
    *fd = (int)value;
    return 0;
}

static PyObject *accel_send_nowait(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyList_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "send_nowait(fd, pieces) takes a descriptor and a list of buffers");
        return NULL;
    }
    int fd;
    if (fd_argument(args[0], &fd) < 0)
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(args[1]);
    if (count > SEND_MAX_PIECES)
        count = SEND_MAX_PIECES;
    Py_buffer views[SEND_MAX_PIECES];
    struct iovec iov[SEND_MAX_PIECES];
    Py_ssize_t got = 0;
    PyObject *result = NULL;
    for (; got < count; got++) {
        if (PyObject_GetBuffer(PyList_GET_ITEM(args[1], got), &views[got], PyBUF_SIMPLE) < 0)
            goto done;
        iov[got].iov_base = views[got].buf;
        iov[got].iov_len = (size_t)views[got].len;
    }
    struct msghdr msg;
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov = iov;
    msg.msg_iovlen = (size_t)count;
    size_t total = 0;
    for (Py_ssize_t i = 0; i < count; i++)
        total += iov[i].iov_len;
    PyThreadState *ts = total >= SEND_RELEASE_MIN ? PyEval_SaveThread() : NULL;
    ssize_t sent;
    do
        sent = sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    while (sent < 0 && errno == EINTR);
    if (ts != NULL) {
        int err = errno;
        restore_with_hand_over(ts);
        errno = err;
    }
    if (sent >= 0)
        result = PyLong_FromSsize_t(sent);
    else if (errno == EAGAIN || errno == EWOULDBLOCK)
        result = PyLong_FromLong(0);
    else
        PyErr_SetFromErrno(PyExc_OSError);
done:
    for (Py_ssize_t i = 0; i < got; i++)
        PyBuffer_Release(&views[i]);
    return result;
}

static PyObject *accel_recv_nowait(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "recv_nowait(fd, size) takes 2 arguments");
        return NULL;
    }
    int fd;
    if (fd_argument(args[0], &fd) < 0)
        return NULL;
    Py_ssize_t size = PyLong_AsSsize_t(args[1]);
    if (size == -1 && PyErr_Occurred())
        return NULL;
    if (size < 1) {
        PyErr_Format(PyExc_ValueError, "size must be >= 1, got %zd", size);
        return NULL;
    }
    PyObject *data = PyBytes_FromStringAndSize(NULL, size);
    if (data == NULL)
        return NULL;
    ssize_t n;
    do
        n = recv(fd, PyBytes_AS_STRING(data), (size_t)size, MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    if (n < 0) {
        Py_DECREF(data);
        return PyErr_SetFromErrno(errno == EAGAIN || errno == EWOULDBLOCK ? PyExc_BlockingIOError : PyExc_OSError);
    }
    if (n != size && _PyBytes_Resize(&data, n) < 0)
        return NULL;
    return data;
}

static PyMethodDef sender_io_methods[] = {
    {"hand_over_gil", accel_hand_over_gil, METH_NOARGS,
     "Release the GIL until every thread back from wait_for_io has taken it (at most 1 ms)."},
#ifdef HAVE_WAIT_FOR_IO
    {"wait_for_io", (PyCFunction)(void (*)(void))accel_wait_for_io, METH_FASTCALL,
     "epoll_wait(epoll_fd, timeout_ms, max_events, hand_over) without the GIL; if hand_over, announces "
     "itself to hand_over_gil while it takes the GIL back. Returns [(fd, events)]."},
#endif
    {"send_nowait", (PyCFunction)(void (*)(void))accel_send_nowait, METH_FASTCALL,
     "sendmsg(fd, up to 64 buffers, MSG_DONTWAIT) keeping the GIL below 16 KiB; the bytes written, 0 on EAGAIN."},
    {"recv_nowait", (PyCFunction)(void (*)(void))accel_recv_nowait, METH_FASTCALL,
     "recv(fd, size, MSG_DONTWAIT) keeping the GIL; b'' at end of stream, BlockingIOError if none."},
    {NULL, NULL, 0, NULL},
};

/* A child forked while a thread was between its wait and the GIL must not inherit that thread's count
 * (no thread of the child would ever take it away, and every send would wait HANDOFF_MAX_NS). */
static void reset_in_child(void) {
    __atomic_store_n(&sparkafka_io_waiters, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&handoff_sleepers, 0, __ATOMIC_RELAXED);
    pthread_mutex_init(&handoff_mutex, NULL); /* another thread may have held it at the fork */
    init_handoff_cond();
}

int sparkafka_add_sender_io_functions(PyObject *module) {
    static int initialized = 0;
    if (!initialized) {
        if (init_handoff_cond() < 0 || pthread_atfork(NULL, NULL, reset_in_child) != 0) {
            PyErr_SetString(PyExc_RuntimeError, "cannot set up the GIL hand-over (pthread)");
            return -1;
        }
        initialized = 1;
    }
    return PyModule_AddFunctions(module, sender_io_methods);
}
