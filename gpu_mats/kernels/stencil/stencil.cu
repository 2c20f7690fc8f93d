// A box's constant-coefficient operator applied from the grid: cell
// (i, j, k), numbered i + nx (j + ny k), has A = diag on the diagonal and
// -c_d towards each neighbour along axis d (across a periodic side, the
// wrapped cell); a wall has no neighbour. Only x (and the diagonal) are
// read per product, no matrix: a third of the bytes of SELL's 7-point
// product. Values V (the diagonal) and vectors T are double or float (a
// float32 cycle: gpu_mats.amg's vector_dtype); sums are double.

struct Grid {
    int nx, ny, nz;
    int periodic;  // bit d: axis d wraps
    double cx, cy, cz;
};

// What a product reads at a cell: x there (Plain), or the first smoothing
// step's d0 = c0 scaling x there, rounded to T as the step that stores it
// rounds it (FirstStep: stencil_chebyshev_first).
template <typename T>
struct Plain {
    const T* __restrict__ x;
    __device__ __forceinline__ double operator()(long long i) const { return static_cast<double>(__ldg(x + i)); }
};

template <typename T>
struct FirstStep {
    const T* __restrict__ x;
    const T* __restrict__ scaling;
    double c0;
    __device__ __forceinline__ double operator()(long long i) const
    {
        return static_cast<double>(static_cast<T>(c0 * static_cast<double>(__ldg(scaling + i)) *
                                                  static_cast<double>(__ldg(x + i))));
    }
};

// sum over the neighbours of c_d x[neighbour] for cell `cell` at (i, j, k), x read through `x`.
template <typename X>
__device__ __forceinline__ double neighbours(const Grid g, long long cell, int i, int j, int k, const X& x)
{
    const long long plane = static_cast<long long>(g.nx) * g.ny;
    double sum = 0.0;
    if (i > 0) sum += g.cx * x(cell - 1);
    else if (g.periodic & 1) sum += g.cx * x(cell + g.nx - 1);
    if (i < g.nx - 1) sum += g.cx * x(cell + 1);
    else if (g.periodic & 1) sum += g.cx * x(cell - (g.nx - 1));
    if (j > 0) sum += g.cy * x(cell - g.nx);
    else if (g.periodic & 2) sum += g.cy * x(cell + plane - g.nx);
    if (j < g.ny - 1) sum += g.cy * x(cell + g.nx);
    else if (g.periodic & 2) sum += g.cy * x(cell - (plane - g.nx));
    if (k > 0) sum += g.cz * x(cell - plane);
    else if (g.periodic & 4) sum += g.cz * x(cell + plane * (g.nz - 1));
    if (k < g.nz - 1) sum += g.cz * x(cell + plane);
    else if (g.periodic & 4) sum += g.cz * x(cell - plane * (g.nz - 1));
    return sum;
}

// (S x)[cell]: the cell's coordinates from its number; x read through `x` (Plain or FirstStep).
template <typename V, typename X>
__device__ __forceinline__ double product(const Grid g, long long cell, const V* __restrict__ diag, const X& x)
{
    const int c = static_cast<int>(cell);  // fewer than 2^31 cells (checked where the matrix is made)
    const int i = c % g.nx, rest = c / g.nx;
    const int j = rest % g.ny, k = rest / g.ny;
    return static_cast<double>(diag[cell]) * x(cell) - neighbours(g, cell, i, j, k, x);
}

// y = alpha S x + beta z; beta == 0 never reads z; z may be y.
template <typename V, typename T>
__global__ void stencil_spmv(long long n, int nx, int ny, int nz, int periodic, double cx, double cy, double cz,
                             const V* __restrict__ diag, const T* __restrict__ x, T* y, const T* z,
                             double alpha, double beta)
{
    const Grid g{nx, ny, nz, periodic, cx, cy, cz};
    const long long cell = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (cell >= n) return;
    double out = alpha * product(g, cell, diag, Plain<T>{x});
    if (beta != 0.0) out = fma(beta, static_cast<double>(z[cell]), out);
    y[cell] = static_cast<T>(out);
}

// r = z - S d, then d_next = a d + c scaling r and x += d_next (as sell.cu's
// sell_chebyshev). d_next is not d; z may be r.
template <typename V, typename T>
__global__ void stencil_chebyshev(long long n, int nx, int ny, int nz, int periodic, double cx, double cy,
                                  double cz, const V* __restrict__ diag, const T* __restrict__ d,
                                  T* __restrict__ d_next, T* r, const T* z,
                                  const T* __restrict__ scaling, T* __restrict__ x, double a, double c)
{
    const Grid g{nx, ny, nz, periodic, cx, cy, cz};
    const long long cell = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (cell >= n) return;
    const double residual = static_cast<double>(z[cell]) - product(g, cell, diag, Plain<T>{d});
    const double step = fma(a, static_cast<double>(d[cell]), c * static_cast<double>(scaling[cell]) * residual);
    r[cell] = static_cast<T>(residual);
    d_next[cell] = static_cast<T>(step);
    x[cell] = static_cast<T>(static_cast<double>(x[cell]) + step);
}

// The first two smoothing steps from x = 0 in one pass, as sell.cu's
// sell_chebyshev_first: d0 = c0 scaling b where read; r = b - S d0;
// d_next = a d0 + c scaling r; x = d0 + d_next.
template <typename V, typename T>
__global__ void stencil_chebyshev_first(long long n, int nx, int ny, int nz, int periodic, double cx, double cy,
                                        double cz, const V* __restrict__ diag, const T* __restrict__ b,
                                        const T* __restrict__ scaling, T* __restrict__ d_next, T* __restrict__ r,
                                        T* __restrict__ x, double c0, double a, double c)
{
    const Grid g{nx, ny, nz, periodic, cx, cy, cz};
    const long long cell = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (cell >= n) return;
    const FirstStep<T> d0_of{b, scaling, c0};
    const double d0 = d0_of(cell);
    const double residual = static_cast<double>(b[cell]) - product(g, cell, diag, d0_of);
    const double step = fma(a, d0, c * static_cast<double>(scaling[cell]) * residual);
    r[cell] = static_cast<T>(residual);
    d_next[cell] = static_cast<T>(step);
    x[cell] = static_cast<T>(d0 + step);
}

// y = alpha T x + beta z for T a tensor product of one operator per axis
// (a box's linear interpolation between grids, or its transpose): output
// cell (i, j, k) of the grid ox x oy x oz takes the sum over a, b, c < W of
// wx[i W + a] wy[j W + b] wz[k W + c] x[cx[i W + a] + ix (cy[j W + b] + iy cz[k W + c])],
// x on the grid ix x iy x iz; zero weights pad the tables to W (2 for an
// interpolation, 4 for its transpose: the loops unroll); vectors T.
template <int W, typename T>
__global__ void tensor_transfer(int n, int ox, int oy, int ix, int iy, const int* __restrict__ cx,
                                const double* __restrict__ wx, const int* __restrict__ cy,
                                const double* __restrict__ wy, const int* __restrict__ cz,
                                const double* __restrict__ wz, const T* __restrict__ x, T* y,
                                const T* z, double alpha, double beta)
{
    const int cell = blockIdx.x * blockDim.x + threadIdx.x;
    if (cell >= n) return;
    const int i = cell % ox, rest = cell / ox;
    const int j = rest % oy, k = rest / oy;
    const int plane = ix * iy;
    double sum = 0.0;
#pragma unroll
    for (int c = 0; c < W; ++c) {
        const double w3 = __ldg(wz + k * W + c);
        const int at3 = plane * __ldg(cz + k * W + c);
#pragma unroll
        for (int b = 0; b < W; ++b) {
            const double w2 = w3 * __ldg(wy + j * W + b);
            const int at2 = at3 + ix * __ldg(cy + j * W + b);
#pragma unroll
            for (int a = 0; a < W; ++a) {
                const double w1 = w2 * __ldg(wx + i * W + a);
                if (w1 != 0.0) sum = fma(w1, static_cast<double>(__ldg(x + at2 + __ldg(cx + i * W + a))), sum);
            }
        }
    }
    double out = alpha * sum;
    if (beta != 0.0) out = fma(beta, static_cast<double>(z[cell]), out);
    y[cell] = static_cast<T>(out);
}
