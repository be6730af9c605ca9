/*
 * stress: eight threads driving one backend at once, through the library's exported symbols
 * (linked with -lonnxifi_rust against include/onnxifi.h). Every call's status and every
 * output is checked; a watchdog turns a hang into a failure. Run plain, under valgrind and
 * against the AddressSanitizer build of the library by run-c-tests.sh.
 *
 * Phases, each over examples/small_cnn.onnx:
 *   separate   every thread owns a graph and runs the fence protocol on it (the input fence
 *              signalled before or after onnxRunGraph, alternately);
 *   shared     every thread calls onnxSetIOAndRunGraph on one shared graph with its own
 *              buffers;
 *   waiters    one run's output event is waited on, and its state polled, by every thread;
 *   release    a run waits on an input event while one thread releases the graph and
 *              another signals or releases the input event; a second run races
 *              onnxReleaseGraph; the outcome of each is one of the documented ones;
 *   teardown   the backend is released last; the released handles answer INVALID_*.
 *
 * usage: stress MODEL EXPECTED.bin [ITERATIONS [SECONDS]]
 *   ITERATIONS  runs per thread in the separate and shared phases (default 400);
 *   SECONDS     each phase stops early after this long (default 60); the watchdog fires at
 *               six times SECONDS.
 */
#define _POSIX_C_SOURCE 200809L
#include "onnxifi.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define THREADS 8
#define T_INVALID_BACKEND 0x0106
#define T_INVALID_GRAPH 0x0107
#define T_INVALID_EVENT 0x0108
#define T_PROP_NUM_THREADS_RUST 0x525553540001ULL

static const uint64_t in_shape[4] = {1, 3, 16, 16}, out_shape[2] = {1, 10};

/* What every thread shares: read-only after set-up, except the counters. */
static struct {
    onnxBackend backend;
    const void *model;
    size_t model_size;
    const float *input;    /* the deterministic input */
    const float *expected; /* onnxruntime's output for it */
    int iterations;
    double seconds;
    struct timespec phase_start;
    onnxGraph shared_graph;
    onnxEvent published; /* the output event of the waiters phase */
    int waiters_stop;    /* thread 0's decision, read by all after the third barrier */
    pthread_barrier_t barrier;
} S;

static int failures = 0; /* updated atomically */
static long runs_checked = 0;

static void fail(void) { __atomic_fetch_add(&failures, 1, __ATOMIC_SEQ_CST); }

/* Records a failure when `call` does not return `want`. */
#define CHECK_STATUS(call, want)                                                          \
    do {                                                                                  \
        int32_t got_ = (int32_t)(call);                                                   \
        if (got_ != (int32_t)(want)) {                                                    \
            fprintf(stderr, "stress.c:%d: %s returned 0x%04x %s, expected %s\n", __LINE__, \
                    #call, (unsigned)got_, test_status_name(got_),                        \
                    test_status_name((int32_t)(want)));                                   \
            fail();                                                                       \
        }                                                                                 \
    } while (0)

/* Records a failure when `cond` is false. */
#define CHECK(cond, ...)                                                    \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "stress.c:%d: %s: ", __LINE__, #cond);          \
            fprintf(stderr, __VA_ARGS__);                                   \
            fputc('\n', stderr);                                            \
            fail();                                                         \
        }                                                                   \
    } while (0)

static double elapsed(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - S.phase_start.tv_sec) +
           (double)(now.tv_nsec - S.phase_start.tv_nsec) / 1e9;
}

static int out_of_time(void) { return elapsed() > S.seconds; }

/* Checks one output buffer against onnxruntime's. */
static void check_output(const float *output, const char *phase) {
    if (test_compare(output, S.expected, TEST_OUT_ELEMS, 1e-5f, 1e-4f) != 0) {
        fprintf(stderr, "%s: an output differs from onnxruntime's\n", phase);
        fail();
    }
    __atomic_fetch_add(&runs_checked, 1, __ATOMIC_SEQ_CST);
}

static onnxGraph new_graph(void) {
    onnxGraph g = NULL;
    CHECK_STATUS(onnxInitGraph(S.backend, NULL, S.model_size, S.model, 0, NULL, &g), T_SUCCESS);
    return g;
}

/* Per-thread buffers bound as a graph's I/O. */
struct buffers {
    float input[TEST_IN_ELEMS];
    float output[TEST_OUT_ELEMS];
    onnxTensorDescriptorV1 in, out;
};

static void bind(struct buffers *b) {
    test_descriptor(&b->in, "input", 4, in_shape, b->input);
    test_descriptor(&b->out, "probs", 2, out_shape, b->output);
}

static void clear_output(struct buffers *b) {
    int i;
    for (i = 0; i < TEST_OUT_ELEMS; i++) b->output[i] = -1.0f;
}

static void fence(onnxMemoryFenceV1 *f) {
    memset(f, 0, sizeof(*f));
    f->tag = T_TAG_FENCE;
    f->type = T_FENCE_EVENT;
}

/* separate: the fence protocol on a graph of this thread's own. */
static void *phase_separate(void *arg) {
    struct buffers *b = (struct buffers *)calloc(1, sizeof(struct buffers));
    onnxGraph g = new_graph();
    int r;
    (void)arg;
    bind(b);
    CHECK_STATUS(onnxSetGraphIO(g, 1, &b->in, 1, &b->out), T_SUCCESS);
    for (r = 0; r < S.iterations && !out_of_time(); r++) {
        onnxMemoryFenceV1 in_fence, out_fence;
        onnxEventState state = 0;
        int early = r % 2 == 0;
        fence(&in_fence);
        fence(&out_fence);
        clear_output(b);
        memset(b->input, 0, sizeof(b->input));
        CHECK_STATUS(onnxInitEvent(S.backend, &in_fence.event), T_SUCCESS);
        if (early) {
            memcpy(b->input, S.input, sizeof(b->input));
            CHECK_STATUS(onnxSignalEvent(in_fence.event), T_SUCCESS);
        }
        CHECK_STATUS(onnxRunGraph(g, &in_fence, &out_fence), T_SUCCESS);
        if (!early) {
            memcpy(b->input, S.input, sizeof(b->input));
            CHECK_STATUS(onnxSignalEvent(in_fence.event), T_SUCCESS);
        }
        CHECK_STATUS(onnxWaitEvent(out_fence.event), T_SUCCESS);
        CHECK_STATUS(onnxGetEventState(out_fence.event, &state), T_SUCCESS);
        CHECK(state == T_STATE_SIGNALLED, "state 0x%x", (unsigned)state);
        check_output(b->output, "separate");
        CHECK_STATUS(onnxReleaseEvent(out_fence.event), T_SUCCESS);
        CHECK_STATUS(onnxReleaseEvent(in_fence.event), T_SUCCESS);
    }
    CHECK_STATUS(onnxReleaseGraph(g), T_SUCCESS);
    free(b);
    return NULL;
}

/* shared: onnxSetIOAndRunGraph on one graph from every thread. */
static void *phase_shared(void *arg) {
    struct buffers *b = (struct buffers *)calloc(1, sizeof(struct buffers));
    int r;
    (void)arg;
    bind(b);
    memcpy(b->input, S.input, sizeof(b->input));
    for (r = 0; r < S.iterations && !out_of_time(); r++) {
        onnxMemoryFenceV1 out_fence;
        fence(&out_fence);
        clear_output(b);
        CHECK_STATUS(onnxSetIOAndRunGraph(S.shared_graph, 1, &b->in, 1, &b->out, &out_fence),
                     T_SUCCESS);
        CHECK_STATUS(onnxWaitEvent(out_fence.event), T_SUCCESS);
        check_output(b->output, "shared");
        CHECK_STATUS(onnxReleaseEvent(out_fence.event), T_SUCCESS);
    }
    free(b);
    return NULL;
}

/* waiters: thread 0 starts a run; every thread waits on its output event. */
static void *phase_waiters(void *arg) {
    int me = (int)(intptr_t)arg, rounds = S.iterations / 4, r;
    struct buffers *b = me == 0 ? (struct buffers *)calloc(1, sizeof(struct buffers)) : NULL;
    onnxGraph g = NULL;
    if (me == 0) {
        g = new_graph();
        bind(b);
        CHECK_STATUS(onnxSetGraphIO(g, 1, &b->in, 1, &b->out), T_SUCCESS);
    }
    for (r = 0; r < rounds; r++) {
        onnxMemoryFenceV1 in_fence, out_fence;
        onnxEventState state = 0;
        int stop = 0;
        if (me == 0) {
            fence(&in_fence);
            fence(&out_fence);
            clear_output(b);
            CHECK_STATUS(onnxInitEvent(S.backend, &in_fence.event), T_SUCCESS);
            CHECK_STATUS(onnxRunGraph(g, &in_fence, &out_fence), T_SUCCESS);
            S.published = out_fence.event;
        }
        pthread_barrier_wait(&S.barrier); /* the event is published */
        if (me == 0) {
            memcpy(b->input, S.input, sizeof(b->input));
            CHECK_STATUS(onnxSignalEvent(in_fence.event), T_SUCCESS);
        } else {
            CHECK_STATUS(onnxGetEventState(S.published, &state), T_SUCCESS);
            CHECK(state == T_STATE_SIGNALLED || state == T_STATE_NONSIGNALLED, "state 0x%x",
                  (unsigned)state);
        }
        CHECK_STATUS(onnxWaitEvent(S.published), T_SUCCESS);
        CHECK_STATUS(onnxGetEventState(S.published, &state), T_SUCCESS);
        CHECK(state == T_STATE_SIGNALLED, "state 0x%x after the wait", (unsigned)state);
        if (me == 0) stop = out_of_time();
        pthread_barrier_wait(&S.barrier); /* every waiter is done with the event */
        if (me == 0) {
            check_output(b->output, "waiters");
            CHECK_STATUS(onnxReleaseEvent(out_fence.event), T_SUCCESS);
            CHECK_STATUS(onnxReleaseEvent(in_fence.event), T_SUCCESS);
            S.waiters_stop = stop;
        }
        pthread_barrier_wait(&S.barrier); /* the stop decision is visible */
        if (S.waiters_stop) break;
    }
    if (me == 0) {
        CHECK_STATUS(onnxReleaseGraph(g), T_SUCCESS);
        free(b);
    }
    return NULL;
}

/* What a helper thread of the release phase does to a queued run's input event. */
struct input_action {
    onnxEvent event;
    int release; /* release (abandon) the event instead of signalling it */
    struct buffers *b;
};

static void *act_on_input(void *arg) {
    struct input_action *a = (struct input_action *)arg;
    if (a->release) {
        CHECK_STATUS(onnxReleaseEvent(a->event), T_SUCCESS);
    } else {
        memcpy(a->b->input, S.input, sizeof(a->b->input));
        CHECK_STATUS(onnxSignalEvent(a->event), T_SUCCESS);
    }
    return NULL;
}

/* A run with a signalled input fence, racing the release of its graph. */
struct racing_run {
    onnxGraph graph;
    onnxMemoryFenceV1 in_fence, out_fence;
    int32_t status;
};

static void *run_racing_release(void *arg) {
    struct racing_run *rr = (struct racing_run *)arg;
    rr->status = onnxRunGraph(rr->graph, &rr->in_fence, &rr->out_fence);
    return NULL;
}

/* release: graphs and input events released while runs are queued or running. */
static void *phase_release(void *arg) {
    struct buffers *b = (struct buffers *)calloc(1, sizeof(struct buffers));
    int me = (int)(intptr_t)arg, rounds = S.iterations / 8, r;
    for (r = 0; r < rounds && !out_of_time(); r++) {
        onnxGraph g = new_graph();
        onnxMemoryFenceV1 in_fence, out_fence;
        struct input_action action;
        struct racing_run race;
        pthread_t helper;
        int32_t waited;
        bind(b);
        clear_output(b);
        memset(b->input, 0, sizeof(b->input));
        CHECK_STATUS(onnxSetGraphIO(g, 1, &b->in, 1, &b->out), T_SUCCESS);
        fence(&in_fence);
        fence(&out_fence);
        CHECK_STATUS(onnxInitEvent(S.backend, &in_fence.event), T_SUCCESS);
        CHECK_STATUS(onnxRunGraph(g, &in_fence, &out_fence), T_SUCCESS);

        /* The queued run: its input is signalled or released by a helper while this thread
         * releases the graph, which waits for the run. */
        action.event = in_fence.event;
        action.release = (r + me) % 2;
        action.b = b;
        pthread_create(&helper, NULL, act_on_input, &action);
        CHECK_STATUS(onnxReleaseGraph(g), T_SUCCESS);
        pthread_join(helper, NULL);
        waited = onnxWaitEvent(out_fence.event);
        if (action.release) {
            /* The input fence was abandoned: the run fails, it never reads the inputs. */
            CHECK(waited != T_SUCCESS, "a run whose input event was released succeeded");
        } else {
            CHECK_STATUS(waited, T_SUCCESS);
            check_output(b->output, "release");
            CHECK_STATUS(onnxReleaseEvent(in_fence.event), T_SUCCESS);
        }
        CHECK_STATUS(onnxReleaseEvent(out_fence.event), T_SUCCESS);
        CHECK_STATUS(onnxRunGraph(g, &in_fence, &out_fence), T_INVALID_GRAPH);

        /* A run racing onnxReleaseGraph: it is refused, or it has finished when the release
         * returns. */
        g = new_graph();
        clear_output(b);
        memcpy(b->input, S.input, sizeof(b->input));
        CHECK_STATUS(onnxSetGraphIO(g, 1, &b->in, 1, &b->out), T_SUCCESS);
        race.graph = g;
        fence(&race.in_fence);
        fence(&race.out_fence);
        race.out_fence.event = NULL;
        CHECK_STATUS(onnxInitEvent(S.backend, &race.in_fence.event), T_SUCCESS);
        CHECK_STATUS(onnxSignalEvent(race.in_fence.event), T_SUCCESS);
        pthread_create(&helper, NULL, run_racing_release, &race);
        CHECK_STATUS(onnxReleaseGraph(g), T_SUCCESS);
        pthread_join(helper, NULL);
        if (race.status == T_SUCCESS) {
            onnxEventState state = 0;
            CHECK_STATUS(onnxGetEventState(race.out_fence.event, &state), T_SUCCESS);
            CHECK_STATUS(onnxWaitEvent(race.out_fence.event), T_SUCCESS);
            check_output(b->output, "release race");
            CHECK_STATUS(onnxReleaseEvent(race.out_fence.event), T_SUCCESS);
        } else {
            CHECK(race.status == T_INVALID_GRAPH, "a run racing the release returned 0x%04x",
                  (unsigned)race.status);
            CHECK(race.out_fence.event == NULL, "a refused run stored an output event");
        }
        CHECK_STATUS(onnxReleaseEvent(race.in_fence.event), T_SUCCESS);
    }
    free(b);
    return NULL;
}

static void run_phase(const char *name, void *(*body)(void *)) {
    pthread_t threads[THREADS];
    long before = __atomic_load_n(&runs_checked, __ATOMIC_SEQ_CST);
    int i;
    clock_gettime(CLOCK_MONOTONIC, &S.phase_start);
    for (i = 0; i < THREADS; i++) {
        if (pthread_create(&threads[i], NULL, body, (void *)(intptr_t)i) != 0) {
            fprintf(stderr, "cannot start a thread\n");
            exit(2);
        }
    }
    for (i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
    printf("stress: %-8s %6ld runs checked in %.2f s\n", name,
           __atomic_load_n(&runs_checked, __ATOMIC_SEQ_CST) - before, elapsed());
    fflush(stdout);
}

int main(int argc, char **argv) {
    onnxBackendID ids[8];
    size_t n = 8, i;
    uint64_t props[3] = {T_PROP_NUM_THREADS_RUST, 2, 0};
    float *input = (float *)malloc(TEST_IN_ELEMS * sizeof(float));
    float *expected;
    onnxEvent stale = NULL;
    onnxGraph released_graph;
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL EXPECTED.bin [ITERATIONS [SECONDS]]\n", argv[0]);
        return 2;
    }
    S.iterations = argc > 3 ? atoi(argv[3]) : 400;
    S.seconds = argc > 4 ? atof(argv[4]) : 60.0;
    /* A hang fails the test instead of stalling it. */
    alarm((unsigned)(S.seconds * 6 + 10));
    expected = test_read_expected(argv[2]);
    test_fill_input(input, TEST_IN_ELEMS);
    S.input = input;
    S.expected = expected;
    S.model = test_read_file(argv[1], &S.model_size);

    CHECK_STATUS(onnxGetBackendIDs(ids, &n), T_SUCCESS);
    CHECK_STATUS(onnxInitBackend(ids[0], props, &S.backend), T_SUCCESS);
    if (S.backend == NULL) return 1;
    pthread_barrier_init(&S.barrier, NULL, THREADS);

    run_phase("separate", phase_separate);
    S.shared_graph = new_graph();
    run_phase("shared", phase_shared);
    run_phase("waiters", phase_waiters);
    run_phase("release", phase_release);

    /* teardown: an event made on the backend outlives the graph; the backend goes last. */
    CHECK_STATUS(onnxInitEvent(S.backend, &stale), T_SUCCESS);
    released_graph = S.shared_graph;
    CHECK_STATUS(onnxReleaseGraph(S.shared_graph), T_SUCCESS);
    CHECK_STATUS(onnxReleaseGraph(released_graph), T_INVALID_GRAPH);
    CHECK_STATUS(onnxReleaseEvent(stale), T_SUCCESS);
    CHECK_STATUS(onnxReleaseEvent(stale), T_INVALID_EVENT);
    CHECK_STATUS(onnxReleaseBackend(S.backend), T_SUCCESS);
    CHECK_STATUS(onnxReleaseBackend(S.backend), T_INVALID_BACKEND);
    CHECK_STATUS(onnxInitEvent(S.backend, &stale), T_INVALID_BACKEND);
    for (i = 0; i < n && i < 8; i++) CHECK_STATUS(onnxReleaseBackendID(ids[i]), T_SUCCESS);

    pthread_barrier_destroy(&S.barrier);
    free((void *)S.model);
    free(input);
    free(expected);
    if (failures != 0) {
        fprintf(stderr, "stress: %d failure(s)\n", failures);
        return 1;
    }
    printf("stress: OK (%ld runs checked, %d threads)\n", runs_checked, THREADS);
    return 0;
}
