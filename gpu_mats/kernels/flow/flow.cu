// The vector updates of the flow driver's fractional step that are no
// Krylov building block.

// out = u + w .* (s - r) for (dim, n) blocks u, s, r, out and one weight per
// cell w (n): the explicit momentum update of a fractional step,
// u + dt Omega^-1 (source - rate). out may alias u.
extern "C" __global__ void explicit_update(long long n, long long total, const double* u, const double* s,
                                           const double* r, const double* w, double* out)
{
    const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (i >= total) return;
    out[i] = fma(w[i % n], s[i] - r[i], u[i]);
}

// out[f] = max(u_s[f], 0) for the faces f listed (outflow faces); the caller copies the others.
extern "C" __global__ void upwind_outflow(long long count, const long long* faces, const double* u_s, double* out)
{
    const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (i >= count) return;
    const long long f = faces[i];
    out[f] = fmax(u_s[f], 0.0);
}

// out[r] = sum_k weight[k] * s_{which[k]}[index[k]], k in starts[r] .. starts[r+1]: one block a row,
// the threads' partial sums added in a fixed order (the same bits every run).
#define FUNCTIONAL_BLOCK 128
extern "C" __global__ void functional(const long long* starts, const int* which, const long long* index,
                                      const double* weight, const double* s0, const double* s1, const double* s2,
                                      const double* s3, double* out)
{
    __shared__ double cache[FUNCTIONAL_BLOCK];
    const double* sources[4] = {s0, s1, s2, s3};
    const int t = threadIdx.x;
    double sum = 0.0;
    for (long long k = starts[blockIdx.x] + t; k < starts[blockIdx.x + 1]; k += FUNCTIONAL_BLOCK)
        sum = fma(weight[k], sources[which[k]][index[k]], sum);
    cache[t] = sum;
    __syncthreads();
    for (int half = FUNCTIONAL_BLOCK / 2; half > 0; half >>= 1) {
        if (t < half) cache[t] += cache[t + half];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = cache[0];
}

// out[offsets[k] + i] = sources[k][i], i < lengths[k]: one block a source; out may be pinned host memory; where
// at is given, out is row at[0] + at[1] of rows of length total.
extern "C" __global__ void gather(const double* const* sources, const long long* lengths, const long long* offsets,
                                  double* out, const double* at, long long total)
{
    const int k = blockIdx.x;
    if (at) out += static_cast<long long>(at[0] + at[1]) * total;
    for (long long i = threadIdx.x; i < lengths[k]; i += blockDim.x)
        out[offsets[k] + i] = sources[k][i];
}

extern "C" __global__ void stamp(long long* out, long long slot)
{
    unsigned long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));  // nanoseconds (PTX ISA)
    out[slot] = (long long)now;
}

extern "C" __global__ void lap(long long* out, long long slot, long long since)
{
    unsigned long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    out[slot] += (long long)now - out[since];
}
