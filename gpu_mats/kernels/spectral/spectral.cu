// The Thomas algorithm along the middle axis of a (outer, m, inner) array,
// one thread per column, the threads of consecutive columns reading
// consecutive addresses. Complex rows come as float64 pairs (components 2):
// the real and imaginary parts are solved alike, by two threads.

extern "C" __global__ void tridiagonal_sweeps(long long outer, int m, long long inner, int components,
                                              const double* __restrict__ couplings,
                                              const double* __restrict__ inverse_pivots, double scale,
                                              double* __restrict__ rows)
{
    const long long width = inner * components;
    const long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (t >= outer * width) return;
    const long long o = t / width, i = t % width;
    double* r = rows + o * m * width + i;
    const double* w = inverse_pivots + o * m * inner + i / components;
    double y = scale * r[0];  // forward: y_j = s r_j + c_{j-1} y_{j-1} / w_{j-1}
    r[0] = y;
    for (int j = 1; j < m; ++j) {
        y = scale * r[j * width] + couplings[j - 1] * y * w[(j - 1) * inner];
        r[j * width] = y;
    }
    double p = y * w[(m - 1) * inner];  // backward: p_j = (y_j + c_j p_{j+1}) / w_j
    r[(m - 1) * width] = p;
    for (int j = m - 2; j >= 0; --j) {
        p = (r[j * width] + couplings[j] * p) * w[j * inner];
        r[j * width] = p;
    }
    if (o == 0 && i < components) {  // the constants' mode: its mean removed
        double sum = 0.0;
        for (int j = 0; j < m; ++j) sum += r[j * width];
        const double mean = sum / m;
        for (int j = 0; j < m; ++j) r[j * width] -= mean;
    }
}
