/* Sending turns: with several threads sending, one of them at a time has the turn to run; the others
 * wait for it without the GIL. sparkafka._accel.send_turn_stats and io_thread.
 *
 * Why: CPython hands the GIL to the thread that has waited longest for it. With eight threads calling
 * ``send()`` in a loop, seven of them always wait for the GIL, so a Sender thread back from its socket
 * wait (``_sender_io.c``) comes after every one of them, each running up to its next send first: the
 * Sender waited ~21 us instead of ~8 us for the GIL, the buffer filled up and stayed full (p50 latency
 * 170 ms instead of 30 ms), and every wait and wake-up of the seven cost context switches (30,000 to
 * 39,000 instead of ~11,000 for 3 million records, +15% CPU per record): eight threads sent 0.85x one
 * thread's records/s on Apache Kafka. With turns the threads that wait for theirs sleep on their own
 * condition variable, not in the GIL's queue, so the Sender finds nobody ahead of it there.
 *
 * How it works: ``sparkafka_hand_over_gil`` (the start of every send: the C send lane, the Python
 * ``send`` and ``send_arrow`` paths) lets the thread that has the turn (``sparkafka_turn_owner``) go on
 * after counting the send and noting its time (``CLOCK_MONOTONIC_COARSE``, a few ns); any other thread
 * calls ``sparkafka_take_send_turn``. It takes the turn at once when nobody waits for one, unless it
 * is a busy sender whose turn was just taken (it had sent less than ``TURN_BUSY_NS`` before); then,
 * or when others already wait, it queues (FIFO) and sleeps on its own condition variable without
 * the GIL. The head of the queue sleeps until the owner has had the turn for ``TURN_SLICE_NS`` and
 * then asks for it (``sparkafka_turn_requested``); the owner gives it at its next send and queues
 * itself. So busy threads take turns of about a millisecond, and the GIL moves between two of them
 * once per turn. The head also takes the turn when the owner has not sent for ``TURN_IDLE_NS`` (its
 * count of sends did not move: it is sleeping, reading its input, blocked, gone), so nobody waits
 * long for a thread that does something else, and a thread that sends now and then never waits.
 *
 * I/O threads never wait for a turn (a Sender's callback may call ``send()``): the Sender marks itself
 * with ``io_thread()``. A child process starts with no owner and an empty queue (pthread_atfork).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <time.h>

#include "_sender_io.h"

/* How long a thread keeps the turn while others wait for one. */
#define TURN_SLICE_NS 1000000LL
/* How long the owner's count of sends may stand still before it counts as not sending. Longer than the
 * Sender holds the GIL for one response (its batches' callbacks: 100-300 us with a callback per record),
 * during which the owner waits for the GIL and sends nothing: at 100 us the queued thread took the turn
 * from such an owner about 350 times per 1.5 million keyed records with two threads on Apache Kafka,
 * each take costing GIL hand-offs and context switches (+11% CPU per record against one thread;
 * 1 ms: ~35 takes, the same CPU per record as one thread). */
#define TURN_IDLE_NS 1000000LL
/* A thread whose turn was taken counts as still sending if it had sent this shortly before (two ticks
 * of CLOCK_MONOTONIC_COARSE, 4 ms each at HZ=250). */
#define TURN_BUSY_NS 8000000LL
/* How long a thread that is not the head of the queue sleeps before it looks again (it is woken when
 * it becomes the head; this is only a safety net). */
#define TURN_QUEUED_CHECK_NS 20000000LL

unsigned long sparkafka_turn_owner = 0; /* changed under turn_mutex, read anywhere with __atomic */
int sparkafka_turn_requested = 0;       /* changed under turn_mutex, read anywhere with __atomic */
unsigned long sparkafka_turn_sends = 0; /* counted by the owner at each send, read by the others */
long long sparkafka_turn_last_send = 0; /* the owner's last send (CLOCK_MONOTONIC_COARSE ns) */

static __thread int is_io_thread = 0;
/* A number per thread, never reused (a pthread_t is reused by the next thread): who lost the turn. */
static __thread unsigned long long thread_serial = 0;
static unsigned long long last_serial = 0;

static unsigned long long my_serial(void) {
    if (thread_serial == 0)
        thread_serial = __atomic_add_fetch(&last_serial, 1, __ATOMIC_RELAXED);
    return thread_serial;
}

typedef struct TurnWaiter {
    struct TurnWaiter *next;
    unsigned long ident;
    unsigned long long serial;
    int granted;
    pthread_cond_t cond;
} TurnWaiter;

/* All under turn_mutex. */
static pthread_mutex_t turn_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_condattr_t monotonic_condattr;
static TurnWaiter *queue_head = NULL, *queue_tail = NULL;
static int queued = 0;
static long long turn_since_ns = 0;   /* when the owner got the turn */
static unsigned long seen_sends = 0;  /* sparkafka_turn_sends when a thread last looked ... */
static long long seen_at_ns = 0;      /* ... and when it changed last */
static unsigned long long owner_serial = 0;
static unsigned long long displaced = 0;     /* the last thread whose turn was taken ... */
static long long displaced_last_send = 0;    /* ... and its last send then */
static unsigned long long turns_given = 0, turns_taken = 0, waits = 0;

static long long monotonic_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* Whether the owner has not sent for TURN_IDLE_NS (it is doing something else: sleeping, reading its
 * input, gone), judged by its count of sends since a thread last looked. */
static int owner_idle(long long now) {
    unsigned long sends = __atomic_load_n(&sparkafka_turn_sends, __ATOMIC_RELAXED);
    if (sends != seen_sends) {
        seen_sends = sends;
        seen_at_ns = now;
        return 0;
    }
    return now - seen_at_ns >= TURN_IDLE_NS;
}

static void set_owner(unsigned long ident, unsigned long long serial, long long now) {
    displaced = owner_serial;
    owner_serial = serial;
    displaced_last_send = __atomic_load_n(&sparkafka_turn_last_send, __ATOMIC_RELAXED);
    __atomic_store_n(&sparkafka_turn_last_send, sparkafka_coarse_ns(), __ATOMIC_RELAXED);
    __atomic_store_n(&sparkafka_turn_owner, ident, __ATOMIC_RELAXED);
    __atomic_store_n(&sparkafka_turn_requested, 0, __ATOMIC_RELAXED);
    turn_since_ns = now;
    seen_sends = __atomic_load_n(&sparkafka_turn_sends, __ATOMIC_RELAXED);
    seen_at_ns = now;
}

/* Remove the head of the queue; wake the next one so that it starts watching the owner's time. */
static TurnWaiter *pop_head(void) {
    TurnWaiter *head = queue_head;
    queue_head = head->next;
    if (queue_head == NULL)
        queue_tail = NULL;
    else
        pthread_cond_signal(&queue_head->cond);
    queued--;
    return head;
}

/* Queue this thread and wait, without the GIL, until it has the turn. Called with turn_mutex and the
 * GIL held; returns with the GIL and without turn_mutex. The head of the queue asks the owner for the
 * turn once the owner's slice is over (the owner sees ``sparkafka_turn_requested`` at its next send)
 * and takes it itself if the owner has not sent for TURN_IDLE_NS. */
static void wait_for_turn(unsigned long me) {
    TurnWaiter self = {NULL, me, my_serial(), 0};
    pthread_cond_init(&self.cond, &monotonic_condattr);
    if (queue_tail != NULL)
        queue_tail->next = &self;
    else
        queue_head = &self;
    queue_tail = &self;
    queued++;
    waits++;
    pthread_mutex_unlock(&turn_mutex);
    PyThreadState *ts = PyEval_SaveThread();
    pthread_mutex_lock(&turn_mutex);
    while (!self.granted) {
        long long now = monotonic_ns(), until;
        if (queue_head != &self) {
            until = now + TURN_QUEUED_CHECK_NS;
        } else if (owner_idle(now)) {
            pop_head();
            self.granted = 1;
            set_owner(me, self.serial, now);
            turns_taken++;
            break;
        } else if (!__atomic_load_n(&sparkafka_turn_requested, __ATOMIC_RELAXED)) {
            until = turn_since_ns + TURN_SLICE_NS;
            if (now >= until) {
                __atomic_store_n(&sparkafka_turn_requested, 1, __ATOMIC_RELAXED);
                until = now + TURN_IDLE_NS;
            }
        } else {
            until = seen_at_ns + TURN_IDLE_NS;
        }
        struct timespec deadline = {(time_t)(until / 1000000000LL), (long)(until % 1000000000LL)};
        pthread_cond_timedwait(&self.cond, &turn_mutex, &deadline);
    }
    pthread_mutex_unlock(&turn_mutex);
    pthread_cond_destroy(&self.cond);
    PyEval_RestoreThread(ts);
}

void sparkafka_take_send_turn(void) {
    unsigned long me = (unsigned long)pthread_self();
    if (is_io_thread
        || (__atomic_load_n(&sparkafka_turn_owner, __ATOMIC_RELAXED) == me
            && !__atomic_load_n(&sparkafka_turn_requested, __ATOMIC_RELAXED)))
        return;
    long long now = monotonic_ns();
    pthread_mutex_lock(&turn_mutex);
    unsigned long owner = sparkafka_turn_owner;
    if (owner == me) {
        if (queue_head == NULL) { /* asked by a waiter that has taken the turn and given it back since */
            __atomic_store_n(&sparkafka_turn_requested, 0, __ATOMIC_RELAXED);
            pthread_mutex_unlock(&turn_mutex);
            return;
        }
        TurnWaiter *next = pop_head(); /* the slice is over: the longest waiter's turn */
        next->granted = 1;
        set_owner(next->ident, next->serial, now);
        turns_given++;
        pthread_cond_signal(&next->cond);
        wait_for_turn(me);
        return;
    }
    /* a thread that sent just before its turn was taken waits for the next one (a busy sender); any other
     * takes the turn when nobody waits for one */
    int busy = owner != 0 && my_serial() == displaced && sparkafka_coarse_ns() - displaced_last_send < TURN_BUSY_NS;
    if (queue_head == NULL && (!busy || owner_idle(now))) {
        set_owner(me, my_serial(), now);
        turns_taken++;
        pthread_mutex_unlock(&turn_mutex);
        return;
    }
    wait_for_turn(me);
}

static PyObject *accel_io_thread(PyObject *self, PyObject *unused) {
    is_io_thread = 1;
    Py_RETURN_NONE;
}

static PyObject *accel_send_turn_stats(PyObject *self, PyObject *unused) {
    pthread_mutex_lock(&turn_mutex);
    unsigned long long given = turns_given, taken = turns_taken, waited = waits;
    int now_queued = queued;
    pthread_mutex_unlock(&turn_mutex);
    return Py_BuildValue("{sKsKsKsi}", "given", given, "taken", taken, "waits", waited, "queued", now_queued);
}

static PyMethodDef send_turn_methods[] = {
    {"io_thread", accel_io_thread, METH_NOARGS,
     "Mark the calling thread as an I/O thread (the Sender): it never waits for a sending turn."},
    {"send_turn_stats", accel_send_turn_stats, METH_NOARGS,
     "Counts of the sending turns: given by an owner whose slice was over, taken by a thread that found "
     "nobody sending, waits for a turn, threads queued now."},
    {NULL, NULL, 0, NULL},
};

/* The queue's waiters are threads of the parent: the child has none of them. */
static void reset_in_child(void) {
    pthread_mutex_init(&turn_mutex, NULL); /* another thread may have held it at the fork */
    queue_head = queue_tail = NULL;
    queued = 0;
    owner_serial = displaced = 0;
    __atomic_store_n(&sparkafka_turn_owner, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&sparkafka_turn_requested, 0, __ATOMIC_RELAXED);
}

int sparkafka_add_send_turn_functions(PyObject *module) {
    static int initialized = 0;
    if (!initialized) {
        if (pthread_condattr_init(&monotonic_condattr) != 0
            || pthread_condattr_setclock(&monotonic_condattr, CLOCK_MONOTONIC) != 0
            || pthread_atfork(NULL, NULL, reset_in_child) != 0) {
            PyErr_SetString(PyExc_RuntimeError, "cannot set up the sending turns (pthread)");
            return -1;
        }
        initialized = 1;
    }
    return PyModule_AddFunctions(module, send_turn_methods);
}
