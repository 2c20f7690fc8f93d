// The flow's face operators on a box of equal cells on one rank, from the
// grid instead of matrices. Cells are numbered x fastest on a grid of
// nx x ny x nz (nz = 1 in 2D); the faces axis by axis (axis d's from
// off[d]), each cell's face on its high side along d where it has one (a
// periodic axis wraps, a walled one has none at its high end), in cell
// order: a face's first cell is its low one, its normal +e_d. A cell lacks
// a face at each wall. Every kernel is one thread a cell (writing its high
// faces where it makes faces), and adds nothing where a face is missing;
// the coefficients are the box's constants per axis.

struct Grid {
    int size[3];
    int periodic;  // bit d: axis d wraps
    long long off[3];

    __device__ bool wraps(int d) const { return (periodic >> d) & 1; }

    // cells along ``axis`` of the block of faces along d
    __device__ int extent(int axis, int d) const { return size[axis] - (axis == d && !wraps(d) ? 1 : 0); }

    __device__ long long cell(const int (&c)[3]) const
    {
        return c[0] + static_cast<long long>(size[0]) * (c[1] + static_cast<long long>(size[1]) * c[2]);
    }

    // the neighbour of cell c (number i) one step (+1 or -1) along d, -1 past a wall
    __device__ long long neighbour(const int (&c)[3], long long i, int d, int step) const
    {
        const long long stride = d == 0 ? 1 : (d == 1 ? size[0] : static_cast<long long>(size[0]) * size[1]);
        if (step > 0 && c[d] == size[d] - 1) return wraps(d) ? i - (size[d] - 1) * stride : -1;
        if (step < 0 && c[d] == 0) return wraps(d) ? i + (size[d] - 1) * stride : -1;
        return i + step * stride;
    }

    // the face on the high side of cell c along d, -1 at a wall
    __device__ long long high_face(const int (&c)[3], int d) const
    {
        if (!wraps(d) && c[d] == size[d] - 1) return -1;
        return off[d] + c[0] + static_cast<long long>(extent(0, d)) * (c[1] + static_cast<long long>(extent(1, d)) * c[2]);
    }

    // the face on the low side of cell c along d (its low neighbour's high face), -1 at a wall
    __device__ long long low_face(const int (&c)[3], int d) const
    {
        if (c[d] == 0 && !wraps(d)) return -1;
        const int low = c[d] == 0 ? size[d] - 1 : c[d] - 1;
        const int m[3] = {d == 0 ? low : c[0], d == 1 ? low : c[1], d == 2 ? low : c[2]};
        return high_face(m, d);
    }
};

// Each kernel runs on a grid of blocks of blockDim.x x blockDim.y cells of one x-y plane: a thread's
// cell is (blockIdx.x blockDim.x + threadIdx.x, blockIdx.y blockDim.y + threadIdx.y, blockIdx.z), no
// division; DIM, the box's
// dimension, unrolls every loop over axes, so that the per-axis arrays stay in registers.
#define GRID_PARAMETERS long long n, int nx, int ny, int nz, int periodic, long long off1, long long off2
#define CELL                                                                            \
    const Grid g = {{nx, ny, nz}, periodic, {0, off1, off2}};                           \
    const int c[3] = {static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x),          \
                      static_cast<int>(blockIdx.y * blockDim.y + threadIdx.y), static_cast<int>(blockIdx.z)}; \
    if (c[0] >= nx || c[1] >= ny) return;                                               \
    const long long i = g.cell(c);

// w_f = (u_d of its two cells) / 2 on each cell's high faces: Gamma on the face velocities' normal component
template <int DIM>
__global__ void interpolate(GRID_PARAMETERS, const double* __restrict__ u,
                                       double* __restrict__ w)
{
    CELL
#pragma unroll
    for (int d = 0; d < DIM; ++d) {
        const long long f = g.high_face(c, d);
        if (f >= 0) w[f] = 0.5 * u[d * n + i] + 0.5 * u[d * n + g.neighbour(c, i, d, 1)];
    }
}

// w_f = (p of its high cell - p of its low cell) inverse[d] (+ z_f where ``add``) on each cell's high
// faces: Gs
template <int DIM>
__global__ void face_gradient(GRID_PARAMETERS, const double* __restrict__ p, const double* z,
                                         int add, double* w, double ix, double iy, double iz)
{
    CELL
    const double inverse[3] = {ix, iy, iz};
#pragma unroll
    for (int d = 0; d < DIM; ++d) {
        const long long f = g.high_face(c, d);
        if (f < 0) continue;
        const double difference = inverse[d] * p[g.neighbour(c, i, d, 1)] - inverse[d] * p[i];
        w[f] = add ? difference + z[f] : difference;
    }
}

// out = sum over a cell's faces of scale[d] (w_high - w_low) (+ z where ``add``): Ms, scale the areas;
// with ``speeds`` sum scale[d] (|w_high| + |w_low|): the convective rate of the CFL number (scale A_d / (2 Omega))
template <int DIM>
__global__ void face_sum(GRID_PARAMETERS, int speeds, const double* __restrict__ w, const double* z,
                                    int add, double* out, double sx, double sy, double sz)
{
    CELL
    const double scale[3] = {sx, sy, sz};
    double sum = 0.0;
#pragma unroll
    for (int d = 0; d < DIM; ++d) {
        const long long high = g.high_face(c, d), low = g.low_face(c, d);
        if (high >= 0) sum += scale[d] * (speeds ? fabs(w[high]) : w[high]);
        if (low >= 0) sum += speeds ? scale[d] * fabs(w[low]) : -scale[d] * w[low];
    }
    out[i] = add ? sum + z[i] : sum;
}

// out[0] = max over cells of sum over a cell's faces of scale[d] |w_f| (NaN where any is): the CFL
// number's convective rate and its maximum in one pass. A thread takes a column of PLANES cells along z,
// unrolled so that their loads are in flight together: it finds its first cell's faces, the next cells'
// by one plane of faces more each, and reads a cell's low z face as the high one of the cell below. The
// rates are non-negative, so their bits order as they do (a NaN made positive orders above every number):
// each block's largest goes to out by atomicMax on the bits; out holds 0 before.
template <int DIM, int PLANES>
__global__ void largest_face_sum(GRID_PARAMETERS, const double* __restrict__ w, unsigned long long* out,
                                 double sx, double sy, double sz)
{
    __shared__ unsigned long long warps[32];
    const Grid g = {{nx, ny, nz}, periodic, {0, off1, off2}};
    const int first[3] = {static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x),
                          static_cast<int>(blockIdx.y * blockDim.y + threadIdx.y),
                          static_cast<int>(blockIdx.z) * PLANES};
    unsigned long long bits = 0;
    if (first[0] < nx && first[1] < ny) {
        const double scale[3] = {sx, sy, sz};
        long long high[DIM], low[DIM], plane[DIM];
#pragma unroll
        for (int d = 0; d < DIM; ++d) {
            high[d] = g.high_face(first, d);
            low[d] = g.low_face(first, d);
            plane[d] = static_cast<long long>(g.extent(0, d)) * g.extent(1, d);
        }
        double below = 0.0;  // |w| of the low z face, where the cell below read it
#pragma unroll
        for (int k = 0; k < PLANES; ++k) {
            if (first[2] + k >= nz) break;
            double sum = 0.0;
#pragma unroll
            for (int d = 0; d < DIM; ++d) {
                // along x and y a column's cells all have their faces or all lack them; along z only a wall's
                const bool has_high = d < 2 ? high[d] >= 0 : (g.wraps(2) || first[2] + k < nz - 1);
                const double top = has_high ? fabs(w[high[d] + k * plane[d]]) : 0.0;
                const double bottom = d == 2 && k > 0 ? below : (low[d] >= 0 ? fabs(w[low[d] + k * plane[d]]) : 0.0);
                if (d == 2) below = top;
                sum += scale[d] * top + scale[d] * bottom;
            }
            const unsigned long long mine =
                isnan(sum) ? 0x7ff8000000000000ULL : static_cast<unsigned long long>(__double_as_longlong(sum));
            bits = max(bits, mine);
        }
    }
    for (int offset = 16; offset > 0; offset >>= 1) bits = max(bits, __shfl_down_sync(0xffffffffu, bits, offset));
    const int lane = (threadIdx.y * blockDim.x + threadIdx.x) % 32, warp = (threadIdx.y * blockDim.x + threadIdx.x) / 32;
    if (lane == 0) warps[warp] = bits;
    __syncthreads();
    if (warp == 0) {
        const int count = (blockDim.x * blockDim.y + 31) / 32;
        bits = lane < count ? warps[lane] : 0;
        for (int offset = 16; offset > 0; offset >>= 1) bits = max(bits, __shfl_down_sync(0xffffffffu, bits, offset));
        // most blocks find the largest already there: a read spares them the atomic on one address
        if (lane == 0 && bits > *reinterpret_cast<volatile unsigned long long*>(out)) atomicMax(out, bits);
    }
}

// out_d = scale[d] ((p_high - p) + (p - p_low)), each term where the face is: G (scale A_d / (2 Omega))
template <int DIM>
__global__ void cell_gradient(GRID_PARAMETERS, const double* __restrict__ p,
                                         double* __restrict__ out, double sx, double sy, double sz)
{
    CELL
    const double scale[3] = {sx, sy, sz};
#pragma unroll
    for (int d = 0; d < DIM; ++d) {
        const long long up = g.neighbour(c, i, d, 1), down = g.neighbour(c, i, d, -1);
        double sum = 0.0;
        if (up >= 0) sum += scale[d] * (p[up] - p[i]);
        if (down >= 0) sum -= scale[d] * (p[down] - p[i]);
        out[d * n + i] = sum;
    }
}

// A cell's neighbours and faces, high and low along each axis in turn (entry 2 d and 2 d + 1), -1 past
// a wall.
template <int DIM>
struct Around {
    long long cell[2 * DIM];
    long long face[2 * DIM];

    __device__ Around(const Grid& g, const int (&c)[3], long long i)
    {
#pragma unroll
        for (int d = 0; d < DIM; ++d) {
            cell[2 * d] = g.neighbour(c, i, d, 1);
            cell[2 * d + 1] = g.neighbour(c, i, d, -1);
            face[2 * d] = g.high_face(c, d);
            face[2 * d + 1] = g.low_face(c, d);
        }
    }

    // s half[d] w_f on each face (s = +1 on the high face, -1 on the low one), 0 where there is none
    __device__ void fluxes(const double* w, const double (&half)[3], double (&flux)[2 * DIM]) const
    {
#pragma unroll
        for (int k = 0; k < 2 * DIM; ++k)
            flux[k] = face[k] >= 0 ? (k % 2 ? -half[k / 2] : half[k / 2]) * w[face[k]] : 0.0;
    }

    // [C(w) u]_i for one component u, from the faces' fluxes (Oyarzun 2015, eq. 2.13's values of C)
    __device__ double convected(const double (&flux)[2 * DIM], const double* u, long long i) const
    {
        const double here = u[i];
        double sum = 0.0;
#pragma unroll
        for (int k = 0; k < 2 * DIM; ++k) sum += flux[k] * ((cell[k] >= 0 ? u[cell[k]] : here) + here);
        return sum;
    }

    // [D v]_i for one component v: conductance[d] (v - v of the other cell), 2 conductance[d] v at a wall
    // (the held face half a cell away)
    __device__ double diffused(const double (&conductance)[3], const double* v, long long i) const
    {
        const double here = v[i];
        double sum = 0.0;
#pragma unroll
        for (int k = 0; k < 2 * DIM; ++k)
            sum += cell[k] >= 0 ? conductance[k / 2] * (here - v[cell[k]]) : 2.0 * conductance[k / 2] * here;
        return sum;
    }
};

// out_e = C(w) u_e for every component e
template <int DIM>
__global__ void convection(GRID_PARAMETERS, const double* __restrict__ w, const double* __restrict__ u,
                           double* __restrict__ out, double hx, double hy, double hz)
{
    CELL
    const double half[3] = {hx, hy, hz};
    const Around<DIM> around(g, c, i);
    double flux[2 * DIM];
    around.fluxes(w, half, flux);
#pragma unroll
    for (int e = 0; e < DIM; ++e) out[e * n + i] = around.convected(flux, u + e * n, i);
}

// out_e = D u_e (+ z_e where ``add``) for every component (conductance nu A_d / h_d, times 1/2 for D's
// explicit half under Crank-Nicolson)
template <int DIM>
__global__ void diffusion(GRID_PARAMETERS, const double* __restrict__ u, const double* z, int add, double* out,
                          double kx, double ky, double kz)
{
    CELL
    const double conductance[3] = {kx, ky, kz};
    const Around<DIM> around(g, c, i);
#pragma unroll
    for (int e = 0; e < DIM; ++e) {
        const double sum = around.diffused(conductance, u + e * n, i);
        out[e * n + i] = add ? sum + z[e * n + i] : sum;
    }
}

// out_e = C(w) u_e + D v_e for every component: the explicit rate's two products in one pass
template <int DIM>
__global__ void transport(GRID_PARAMETERS, const double* __restrict__ w, const double* u, const double* v,
                          double* __restrict__ out, double hx, double hy, double hz, double kx, double ky, double kz)
{
    CELL
    const double half[3] = {hx, hy, hz}, conductance[3] = {kx, ky, kz};
    const Around<DIM> around(g, c, i);
    double flux[2 * DIM];
    around.fluxes(w, half, flux);
#pragma unroll
    for (int e = 0; e < DIM; ++e)
        out[e * n + i] = around.convected(flux, u + e * n, i) + around.diffused(conductance, v + e * n, i);
}
