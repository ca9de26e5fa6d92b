// The helper threads of the decode kernels.
//
// A decode step is a chain of small products (a few hundred microseconds
// each) with serial work between them. Handing each one to a goroutine costs
// a futex wake-up of an idle Go thread (tens of microseconds, often more than
// the product's other half), so the products split their work here instead:
// helper threads, which spin for a while after each job before they sleep,
// claim parts of it beside the calling thread. Parts are claimed one at a
// time from a shared counter, and the caller claims them too, so it never
// waits for a helper that has not started (one the scheduler has not run, say
// on a machine busy with other work): it runs the unclaimed parts itself and
// waits only for parts already running. One job runs at a time; a second
// caller that finds the pool busy runs its whole job itself.
#define _GNU_SOURCE
#include "pool.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(__x86_64__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

enum { POOL_MAX = 64 };

// A helper spins this long after a job (and after waking) before it sleeps:
// long enough to bridge the serial work between the products of a decode
// step, short enough not to hold a core when nothing follows.
static const long spin_ns = 200 * 1000;

// claim packs the running job's generation (high 32 bits), its number of
// parts (bits 16-31) and the next unclaimed part (bits 0-15): a claim succeeds
// only for the job whose generation the claimer saw, so a helper that wakes
// late never runs a part of a job that has ended, or of the next one.
static inline uint64_t claim_word(uint32_t gen, int nparts, int next) {
	return (uint64_t)gen << 32 | (uint64_t)nparts << 16 | (uint64_t)next;
}

static struct {
	pthread_mutex_t mu;     // held by the caller of the running job
	atomic_uint gen;        // bumped for each job; helpers wait for a change
	_Atomic uint64_t claim; // see claim_word
	atomic_int done;        // parts of the current job finished
	atomic_int sleepers;    // helpers blocked in futex_wait on gen
	rl_job_fn *fn;          // the current job (read by a claimer after its claim)
	void *ctx;
	int helpers;            // helper threads started
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER};

static long now_ns(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000L + t.tv_nsec;
}

static void wait_gen(unsigned seen) {
#if defined(__linux__)
	syscall(SYS_futex, &pool.gen, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
#else
	struct timespec t = {0, 50000};
	nanosleep(&t, NULL);
#endif
}

static void wake_all(void) {
#if defined(__linux__)
	syscall(SYS_futex, &pool.gen, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#endif
}

// run_parts claims and runs parts of job gen until none is left (or the job
// is no longer the current one).
static void run_parts(uint32_t gen) {
	for (;;) {
		uint64_t c = atomic_load(&pool.claim);
		const int nparts = (int)(c >> 16 & 0xffff), next = (int)(c & 0xffff);
		if ((uint32_t)(c >> 32) != gen || next >= nparts) return;
		if (!atomic_compare_exchange_weak(&pool.claim, &c, c + 1)) continue;
		// the job cannot end before this part is done: its fn and ctx stay
		pool.fn(pool.ctx, next, nparts);
		atomic_fetch_add(&pool.done, 1);
	}
}

static void *helper(void *arg) {
	unsigned seen = (unsigned)(uintptr_t)arg; // the gen when this helper was started
	for (;;) {
		unsigned g;
		long until = now_ns() + spin_ns;
		for (int spins = 0; (g = atomic_load(&pool.gen)) == seen; spins++) {
			// yield rather than pause: a thread that shares this core (a goroutine,
			// the caller) runs at once
			sched_yield();
			if ((spins & 7) != 7 || now_ns() < until) continue;
			// Dekker with rl_pool_run: it bumps gen, then reads sleepers.
			atomic_fetch_add(&pool.sleepers, 1);
			if (atomic_load(&pool.gen) == seen) wait_gen(seen);
			atomic_fetch_sub(&pool.sleepers, 1);
			until = now_ns() + spin_ns;
		}
		seen = g;
		run_parts(g);
	}
	return NULL;
}

void rl_pool_run(rl_job_fn *fn, void *ctx, int n) {
	if (n < 1) n = 1;
	if (n > POOL_MAX) n = POOL_MAX;
	if (n == 1 || pthread_mutex_trylock(&pool.mu) != 0) {
		for (int p = 0; p < n; p++) fn(ctx, p, n);
		return;
	}
	while (pool.helpers < n - 1) { // start helpers on demand
		pthread_t t;
		pthread_attr_t attr;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		const unsigned born = atomic_load(&pool.gen);
		const int ok = pthread_create(&t, &attr, helper, (void *)(uintptr_t)born) == 0;
		pthread_attr_destroy(&attr);
		if (!ok) break;
		pool.helpers++;
	}
	if (pool.helpers == 0) {
		pthread_mutex_unlock(&pool.mu);
		for (int p = 0; p < n; p++) fn(ctx, p, n);
		return;
	}
	const uint32_t gen = atomic_load(&pool.gen) + 1;
	pool.fn = fn;
	pool.ctx = ctx;
	atomic_store(&pool.done, 0);
	atomic_store(&pool.claim, claim_word(gen, n, 0));
	atomic_store(&pool.gen, gen);
	if (atomic_load(&pool.sleepers) > 0) wake_all();
	run_parts(gen);
	// wait for the parts the helpers claimed: a short spin, then yield, so that a helper the
	// scheduler put on this thread's core gets to run
	for (int spins = 0; atomic_load(&pool.done) < n; spins++) {
		if (spins < 256)
			cpu_relax();
		else
			sched_yield();
	}
	pthread_mutex_unlock(&pool.mu);
}

// rl_pool_check runs jobs of n parts in which each part adds one to its
// counter: after `jobs` jobs every count[p] must be `jobs` (the tests' check
// that each part runs exactly once per job, whatever thread runs it).
static void count_part(void *ctx, int p, int n) {
	(void)n;
	atomic_fetch_add(&((atomic_int *)ctx)[p], 1);
}

void rl_pool_check(int *count, int n, int jobs) {
	atomic_int c[POOL_MAX] = {0};
	for (int i = 0; i < jobs; i++) rl_pool_run(count_part, c, n);
	for (int p = 0; p < n && p < POOL_MAX; p++) count[p] = atomic_load(&c[p]);
}
