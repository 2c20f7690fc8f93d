// A box's constant-coefficient operator applied from the grid: cell
// (i, j, k), numbered i + nx (j + ny k), has A = diag on the diagonal and
// -c_d towards each neighbour along axis d (across a periodic side, the
// wrapped cell); a wall has no neighbour. Only x (and the diagonal) are
// read per product, no matrix: a third of the bytes of SELL's 7-point
// product. Values V (the diagonal) and vectors T are double or float (a
// float32 cycle: gpu_mats.amg's vector_dtype); sums are double.
//
// Every kernel marches along z: a block of threads covers a tile of (i, j)
// columns and each thread walks `kz` cells up its column, the cell number
// advanced by a plane (no division to find i, j, k; a thread per cell spent
// more on those than on its loads: BENCHMARKS.md, gpuamg's sixth part), and
// the products keep x below, at and above the cell in registers, so that
// one value of x is loaded per cell along z.

struct Grid {
    int nx, ny, nz;
    int periodic;  // bit d: axis d wraps
    double cx, cy, cz;
};

// The first cell of this thread's piece of column (i, j) and the piece's end
// along z; false for a thread past the grid.
__device__ __forceinline__ bool column(int nx, int ny, int nz, int kz, int& i, int& j, int& k0, int& k1)
{
    i = blockIdx.x * blockDim.x + threadIdx.x;
    j = blockIdx.y * blockDim.y + threadIdx.y;
    k0 = blockIdx.z * kz;
    k1 = min(k0 + kz, nz);
    return i < nx && j < ny;
}

// sum over the neighbours of cell `cell` at (i, j) in its xy plane of c_d x[neighbour].
template <typename T>
__device__ __forceinline__ double in_plane(const Grid g, long long cell, int i, int j, const T* __restrict__ x)
{
    const long long plane = static_cast<long long>(g.nx) * g.ny;
    double sum = 0.0;
    if (i > 0) sum += g.cx * static_cast<double>(__ldg(x + cell - 1));
    else if (g.periodic & 1) sum += g.cx * static_cast<double>(__ldg(x + cell + g.nx - 1));
    if (i < g.nx - 1) sum += g.cx * static_cast<double>(__ldg(x + cell + 1));
    else if (g.periodic & 1) sum += g.cx * static_cast<double>(__ldg(x + cell - (g.nx - 1)));
    if (j > 0) sum += g.cy * static_cast<double>(__ldg(x + cell - g.nx));
    else if (g.periodic & 2) sum += g.cy * static_cast<double>(__ldg(x + cell + plane - g.nx));
    if (j < g.ny - 1) sum += g.cy * static_cast<double>(__ldg(x + cell + g.nx));
    else if (g.periodic & 2) sum += g.cy * static_cast<double>(__ldg(x + cell - (plane - g.nx)));
    return sum;
}

// x at cell k + step (step = -1 or 1) of the column whose cell k is `cell`: across a
// periodic z side the wrapped cell, 0 past a wall (no neighbour, no coupling).
template <typename T>
__device__ __forceinline__ double along_z(const Grid g, long long cell, int k, int step, const T* __restrict__ x)
{
    const long long plane = static_cast<long long>(g.nx) * g.ny;
    const int next = k + step;
    if (next >= 0 && next < g.nz) return static_cast<double>(__ldg(x + cell + step * plane));
    if (!(g.periodic & 4)) return 0.0;
    return static_cast<double>(__ldg(x + cell - step * plane * (g.nz - 1)));
}

// Calls out(cell, (S x)[cell]) for each cell of this thread's piece of column.
template <typename V, typename T, typename Out>
__device__ __forceinline__ void march(const Grid g, int kz, const V* __restrict__ diag, const T* __restrict__ x,
                                      Out out)
{
    int i, j, k0, k1;
    if (!column(g.nx, g.ny, g.nz, kz, i, j, k0, k1)) return;
    const long long plane = static_cast<long long>(g.nx) * g.ny;
    long long cell = i + g.nx * (j + static_cast<long long>(g.ny) * k0);
    double below = k0 < k1 ? along_z(g, cell, k0, -1, x) : 0.0;
    double here = k0 < k1 ? static_cast<double>(__ldg(x + cell)) : 0.0;
    for (int k = k0; k < k1; ++k, cell += plane) {
        const double above = along_z(g, cell, k, 1, x);
        out(cell, static_cast<double>(diag[cell]) * here - in_plane(g, cell, i, j, x) - g.cz * (below + above));
        below = here;
        here = above;
    }
}

// y = alpha S x + beta z; beta == 0 never reads z; z may be y.
template <typename T>
struct ScaledSum {
    T* y;
    const T* z;
    double alpha, beta;
    __device__ void operator()(long long cell, double product) const
    {
        double value = alpha * product;
        if (beta != 0.0) value = fma(beta, static_cast<double>(z[cell]), value);
        y[cell] = static_cast<T>(value);
    }
};

template <typename V, typename T>
__global__ void stencil_spmv(int kz, int nx, int ny, int nz, int periodic, double cx, double cy, double cz,
                             const V* __restrict__ diag, const T* __restrict__ x, T* y, const T* z,
                             double alpha, double beta)
{
    march(Grid{nx, ny, nz, periodic, cx, cy, cz}, kz, diag, x, ScaledSum<T>{y, z, alpha, beta});
}

// r = z - S d, then d_next = a d + c scaling r and x += d_next (as sell.cu's
// sell_chebyshev). d_next is not d; z may be r.
template <typename T>
struct SmoothingStep {
    const T* d;
    T* d_next;
    T* r;
    const T* z;
    const T* scaling;
    T* x;
    double a, c;
    __device__ void operator()(long long cell, double product) const
    {
        const double residual = static_cast<double>(z[cell]) - product;
        const double step = fma(a, static_cast<double>(d[cell]), c * static_cast<double>(scaling[cell]) * residual);
        r[cell] = static_cast<T>(residual);
        d_next[cell] = static_cast<T>(step);
        x[cell] = static_cast<T>(static_cast<double>(x[cell]) + step);
    }
};

template <typename V, typename T>
__global__ void stencil_chebyshev(int kz, int nx, int ny, int nz, int periodic, double cx, double cy,
                                  double cz, const V* __restrict__ diag, const T* __restrict__ d,
                                  T* __restrict__ d_next, T* r, const T* z,
                                  const T* __restrict__ scaling, T* __restrict__ x, double a, double c)
{
    march(Grid{nx, ny, nz, periodic, cx, cy, cz}, kz, diag, d, SmoothingStep<T>{d, d_next, r, z, scaling, x, a, c});
}

// y = alpha T x + beta z for T a tensor product of one operator per axis
// (a box's linear interpolation between grids, or its transpose): output
// cell (i, j, k) of the grid ox x oy x oz takes the sum over a, b, c < W of
// wx[i W + a] wy[j W + b] wz[k W + c] x[cx[i W + a] + ix (cy[j W + b] + iy cz[k W + c])],
// x on the grid ix x iy x iz; zero weights pad the tables to W (2 for an
// interpolation, 4 for its transpose: the loops unroll); vectors T. A
// thread keeps its column's x and y table entries in registers.
template <int W, typename T>
__global__ void tensor_transfer(int kz, int ox, int oy, int oz, int ix, int iy, const int* __restrict__ cx,
                                const double* __restrict__ wx, const int* __restrict__ cy,
                                const double* __restrict__ wy, const int* __restrict__ cz,
                                const double* __restrict__ wz, const T* __restrict__ x, T* y,
                                const T* z, double alpha, double beta)
{
    int i, j, k0, k1;
    if (!column(ox, oy, oz, kz, i, j, k0, k1)) return;
    int at_x[W];
    long long at_y[W];
    double w_x[W], w_y[W];
#pragma unroll
    for (int a = 0; a < W; ++a) {
        at_x[a] = __ldg(cx + i * W + a);
        w_x[a] = __ldg(wx + i * W + a);
        at_y[a] = static_cast<long long>(ix) * __ldg(cy + j * W + a);
        w_y[a] = __ldg(wy + j * W + a);
    }
    const long long in_plane_cells = static_cast<long long>(ix) * iy, out_plane = static_cast<long long>(ox) * oy;
    long long cell = i + ox * (j + static_cast<long long>(oy) * k0);
    for (int k = k0; k < k1; ++k, cell += out_plane) {
        double sum = 0.0;
#pragma unroll
        for (int c = 0; c < W; ++c) {
            const double w3 = __ldg(wz + k * W + c);
            if (w3 == 0.0) continue;
            const long long at3 = in_plane_cells * __ldg(cz + k * W + c);
#pragma unroll
            for (int b = 0; b < W; ++b) {
                const double w2 = w3 * w_y[b];
                if (w2 == 0.0) continue;
#pragma unroll
                for (int a = 0; a < W; ++a)
                    if (w_x[a] != 0.0) sum = fma(w2 * w_x[a], static_cast<double>(__ldg(x + at3 + at_y[b] + at_x[a])), sum);
            }
        }
        double out = alpha * sum;
        if (beta != 0.0) out = fma(beta, static_cast<double>(z[cell]), out);
        y[cell] = static_cast<T>(out);
    }
}
