// Subgrid-scale eddy viscosities, one thread a cell. The gradient g (g[i][j]
// = du_i/dx_j) is read into a 3 x 3 array, zero where a 2D flow has no
// entry. Each model is nu_t = (C width)^2 D(g) with D an operator of g:
//   Smagorinsky (1963): D = |S| = sqrt(2 S_ij S_ij), S the symmetric part;
//   WALE (Nicoud and Ducros, "Subgrid-scale stress modelling based on the
//     square of the velocity gradient tensor", 1999, eq. 13):
//     D = (Sd_ij Sd_ij)^(3/2) / ((S_ij S_ij)^(5/2) + (Sd_ij Sd_ij)^(5/4)),
//     Sd the traceless symmetric part of g^2, 0 where g = 0;
//   Sigma (Nicoud, Baya Toda, Cabrit, Bose and Lee, "Using singular values
//     to build a subgrid-scale model for large eddy simulations", 2011,
//     eq. 13): D = s3 (s1 - s2) (s2 - s3) / s1^2, s1 >= s2 >= s3 the
//     singular values of g: s1 and s2 from the eigenvalues of g^T g (the
//     closed form for a symmetric 3 x 3 matrix, Smith 1961), s3 from
//     s1 s2 s3 = |det g|; 0 where g has rank 0 or 1.

#define SMAGORINSKY 0
#define WALE 1
#define SIGMA 2

__device__ void load_gradient(long long cell, long long n, int dim, const double* gradient, double (&g)[3][3])
{
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) g[i][j] = (i < dim && j < dim) ? gradient[(i * dim + j) * n + cell] : 0.0;
}

__device__ double strain_squared(const double (&g)[3][3])  // S_ij S_ij
{
    double sum = 0.0;
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) {
            const double s = 0.5 * (g[i][j] + g[j][i]);
            sum += s * s;
        }
    return sum;
}

__device__ double wale(const double (&g)[3][3])
{
    double g2[3][3];
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) g2[i][j] = g[i][0] * g[0][j] + g[i][1] * g[1][j] + g[i][2] * g[2][j];
    const double trace = (g2[0][0] + g2[1][1] + g2[2][2]) / 3.0;
    double sd2 = 0.0;
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) {
            const double sd = 0.5 * (g2[i][j] + g2[j][i]) - (i == j ? trace : 0.0);
            sd2 += sd * sd;
        }
    const double ss = strain_squared(g);
    const double denominator = pow(ss, 2.5) + pow(sd2, 1.25);
    return denominator > 0.0 ? pow(sd2, 1.5) / denominator : 0.0;
}

__device__ double sigma(const double (&g)[3][3])
{
    double G[3][3];  // g^T g, symmetric positive semi-definite
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) G[i][j] = g[0][i] * g[0][j] + g[1][i] * g[1][j] + g[2][i] * g[2][j];
    const double q = (G[0][0] + G[1][1] + G[2][2]) / 3.0;
    const double off = G[0][1] * G[0][1] + G[0][2] * G[0][2] + G[1][2] * G[1][2];
    const double a = G[0][0] - q, b = G[1][1] - q, c = G[2][2] - q;
    const double p = sqrt((a * a + b * b + c * c + 2.0 * off) / 6.0);
    double l1 = q, l2 = q;  // G = q I: every eigenvalue q
    if (p > 0.0) {
        // det((G - q I) / p) / 2, in [-1, 1] up to rounding
        const double det = (a * (b * c - G[1][2] * G[1][2]) - G[0][1] * (G[0][1] * c - G[1][2] * G[0][2]) +
                            G[0][2] * (G[0][1] * G[1][2] - b * G[0][2])) / (p * p * p);
        const double phi = acos(fmin(fmax(0.5 * det, -1.0), 1.0)) / 3.0;
        l1 = q + 2.0 * p * cos(phi);
        l2 = 3.0 * q - l1 - (q + 2.0 * p * cos(phi + 2.0 * 3.14159265358979323846 / 3.0));
    }
    const double s1 = sqrt(fmax(l1, 0.0)), s2 = sqrt(fmax(l2, 0.0));
    if (!(s2 > 0.0)) return 0.0;  // rank 1 or 0: s3 = 0
    // s3 from s1 s2 s3 = |det g|, not from the smallest eigenvalue: exactly 0 where det g is
    // (2D flows, solid-body rotation)
    const double det_g = g[0][0] * (g[1][1] * g[2][2] - g[1][2] * g[2][1]) -
                         g[0][1] * (g[1][0] * g[2][2] - g[1][2] * g[2][0]) +
                         g[0][2] * (g[1][0] * g[2][1] - g[1][1] * g[2][0]);
    const double s3 = fabs(det_g) / (s1 * s2);
    return fmax(s3 * (s1 - s2) * (s2 - s3) / (s1 * s1), 0.0);
}

extern "C" __global__ void eddy_viscosity(long long n, int dim, int model, const double* gradient,
                                          const double* width, double constant, double* out)
{
    const long long cell = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (cell >= n) return;
    double g[3][3];
    load_gradient(cell, n, dim, gradient, g);
    double d;
    if (model == SMAGORINSKY) d = sqrt(2.0 * strain_squared(g));
    else if (model == WALE) d = wale(g);
    else d = sigma(g);
    const double scale = constant * width[cell];
    out[cell] = scale * scale * d;
}
