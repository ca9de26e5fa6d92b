// A pool of helper threads for the decode kernels (see pool.c and the
// threading model in doc.go).
#ifndef RLHOST_POOL_H
#define RLHOST_POOL_H

// rl_job_fn computes part `part` of `nparts` of a job.
typedef void rl_job_fn(void *ctx, int part, int nparts);

// rl_pool_run runs fn(ctx, p, n) for every p < n (n <= 64), part 0 on the
// calling thread and the others on helper threads (started on the first job
// that needs them, never stopped), and returns when all are done. When
// another caller holds the pool, every part runs on this thread.
void rl_pool_run(rl_job_fn *fn, void *ctx, int n);

// rl_pool_check runs `jobs` jobs of n parts that count how often each part
// ran, into count[n] (for the tests).
void rl_pool_check(int *count, int n, int jobs);

#endif
