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
