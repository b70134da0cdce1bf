/* Handing the GIL to the Sender thread as soon as its I/O wait ends (see _sender_io.c).
 *
 * ``sparkafka_io_waiters`` counts threads that came back from ``_accel.wait_for_io`` and are waiting to
 * take the GIL again; a sending thread that holds the GIL calls ``sparkafka_hand_over_gil`` at points
 * where giving it up costs nothing (the start of a send), which releases the GIL until they have it. */
#ifndef SPARKAFKA_SENDER_IO_H
#define SPARKAFKA_SENDER_IO_H

#include <Python.h>

extern int sparkafka_io_waiters; /* read and changed with the __atomic builtins only */

void sparkafka_hand_over_gil_slow(void);

/* Cheap when nobody waits: one relaxed atomic load. Call with the GIL held. */
static inline void sparkafka_hand_over_gil(void) {
    if (__atomic_load_n(&sparkafka_io_waiters, __ATOMIC_RELAXED) != 0)
        sparkafka_hand_over_gil_slow();
}

int sparkafka_add_sender_io_functions(PyObject *module);

#endif
