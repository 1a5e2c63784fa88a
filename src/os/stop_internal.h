/*
 * stop_internal.h - the two ways a blocking worker is told to stop, shared by
 * the signal flag of a worker process (proc.c's cr__proc_stop), the
 * connection driver's blocking loop (net/conn.c) and the models that set them
 * (tpc, forking, prefork). Here, in the lowest layer, so that os/ needs
 * nothing above it.
 */
#ifndef CR_STOP_INTERNAL_H
#define CR_STOP_INTERNAL_H

#define CR__STOP_GRACEFUL 1 /* return once nothing is in flight */
#define CR__STOP_NOW      2 /* return at the next wake-up */

#endif /* CR_STOP_INTERNAL_H */
