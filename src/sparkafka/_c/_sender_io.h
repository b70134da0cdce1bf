/* Handing the GIL to the Sender thread as soon as its I/O wait ends (see _sender_io.c).
 *
 * ``sparkafka_io_waiters`` counts threads that came back from ``_accel.wait_for_io`` and are waiting to
 * take the GIL again; a sending thread that holds the GIL calls ``sparkafka_hand_over_gil`` at points
 * where giving it up costs nothing (the start of a send), which releases the GIL until they have it. */
#ifndef SPARKAFKA_SENDER_IO_H
#define SPARKAFKA_SENDER_IO_H

#include <Python.h>

#include <pthread.h>
#include <time.h>

extern int sparkafka_io_waiters;          /* read and changed with the __atomic builtins only */
extern unsigned long sparkafka_turn_owner; /* the sending thread that has the turn (_send_turns.c) */
extern int sparkafka_turn_requested;      /* a waiting thread asks the owner for the turn */
extern unsigned long sparkafka_turn_sends; /* the owner's sends, for the others to see it is sending */
extern long long sparkafka_turn_last_send; /* the owner's last send, CLOCK_MONOTONIC_COARSE */

static inline long long sparkafka_coarse_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

void sparkafka_hand_over_gil_slow(void);
void sparkafka_take_send_turn(void);

/* Call with the GIL held at the start of a send: it gives the GIL to a Sender back from its socket wait,
 * and waits for this thread's sending turn (_send_turns.c). Cheap for the thread that has the turn
 * while nobody waits: three relaxed atomic loads, a count, and a CLOCK_MONOTONIC_COARSE read (vDSO,
 * ~3 ns). */
static inline void sparkafka_hand_over_gil(void) {
    if (__atomic_load_n(&sparkafka_io_waiters, __ATOMIC_RELAXED) != 0)
        sparkafka_hand_over_gil_slow();
    if (__atomic_load_n(&sparkafka_turn_owner, __ATOMIC_RELAXED) == (unsigned long)pthread_self()
        && __atomic_load_n(&sparkafka_turn_requested, __ATOMIC_RELAXED) == 0)
    {
        __atomic_store_n(&sparkafka_turn_sends, sparkafka_turn_sends + 1, __ATOMIC_RELAXED);
        __atomic_store_n(&sparkafka_turn_last_send, sparkafka_coarse_ns(), __ATOMIC_RELAXED);
    } else
        sparkafka_take_send_turn();
}

int sparkafka_add_sender_io_functions(PyObject *module);
int sparkafka_add_send_turn_functions(PyObject *module);

#endif
