// w = a*x + b*y + c*z in one pass (the three-term recurrences of the s-step
// bases); y and z are not read when their coefficient is 0. w may alias y or z.
// With d non-null, also scaled = d .* w: a Jacobi preconditioner applied to the
// new basis vector in the same pass.
extern "C" __global__ void three_term(long long n, double a, const double* x, double b, const double* y,
                                      double c, const double* z, double* w, const double* d, double* scaled)
{
    const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (i >= n) return;
    double v = a * x[i];
    if (b != 0.0) v = fma(b, y[i], v);
    if (c != 0.0) v = fma(c, z[i], v);
    w[i] = v;
    if (d != nullptr) scaled[i] = d[i] * v;
}
