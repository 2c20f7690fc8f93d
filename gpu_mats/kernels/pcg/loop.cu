// The device-side convergence test of a loop of CG iterations (see __init__.py's loop_test): its verdict
// goes to s[5] and, inside a CUDA graph, to the conditional handle of the WHILE node that repeats the loop.
// Compiled after pcg.cu, in one module with it: dots_test_step is its dots_beta_step or dots_record_step and the
// test at once, update_test_step its update_record_step and the test.

// As cuda_device_runtime_api.h declares it (CUDA 12.4 and later): a builtin of the compiler. Declared here since
// that header needs the toolkit's crt/host_defines.h, which NVRTC installed from pip wheels does not find.
extern "C" __device__ __attribute__((cudart_builtin)) void cudaGraphSetConditional(unsigned long long handle,
                                                                                   unsigned int value);

#define START 0
#define AFTER_ITERATION 1
#define RESUME 2

__device__ void verdict(double* s, const double* history, int column, double rtol, double atol, double dtol,
                        int limit, int mode, unsigned long long handle)
{
    if (mode == RESUME) {
        s[5] = s[3] == 0.0 ? 1.0 : 0.0;
    } else {
        const int row = static_cast<int>(s[4]);
        const double* h = history + 3 * row;
        const double norm = sqrt(fmax(h[column], 0.0));
        if (mode == START) {
            const double reference = s[8] > 0.0 ? sqrt(s[8]) : norm;
            s[6] = fmax(rtol * reference, atol);
            s[7] = dtol * reference;
        }
        const bool finite = isfinite(h[0]) && isfinite(h[1]) && isfinite(h[2]);
        s[5] = (s[3] == 0.0 && finite && s[6] < norm && norm < s[7] && row < limit) ? 1.0 : 0.0;
    }
    if (handle) cudaGraphSetConditional(handle, s[5] != 0.0);
}

extern "C" __global__ void loop_test(double* s, const double* history, int column, double rtol, double atol,
                                     double dtol, int limit, int mode, unsigned long long handle)
{
    verdict(s, history, column, rtol, atol, dtol, limit, mode, handle);
}

// dots_beta_step (BETA) or dots_record_step, then the test after an iteration (AFTER_ITERATION), by the block
// that takes the step; record's one dot product is r . r, so it is given z = r
template <bool BETA>
__global__ void dots_test_step(long long n, const double* r, const double* z, double* partials, unsigned int* arrivals,
                               double* sums, double* s, double* history, int column, double rtol, double atol,
                               double dtol, int limit, unsigned long long handle)
{
    dots_then(n, BETA ? 3 : 1, r, z, r, r, z, z, partials, arrivals, sums, [&] {
        if (BETA)
            beta(s, sums, history, 0);
        else
            record(s, sums, history, 0);
        verdict(s, history, column, rtol, atol, dtol, limit, AFTER_ITERATION, handle);
    });
}

// update_record_step, then the test after an iteration, by the block that takes the record
extern "C" __global__ void update_test_step(long long n, double* s, double* x, double* r, double* p, double* w,
                                            const double* z, const double* az, float* rounded, double* partials,
                                            unsigned int* arrivals, double* sums, double* history, int column,
                                            double rtol, double atol, double dtol, int limit,
                                            unsigned long long handle)
{
    update_then(n, s, x, r, p, w, z, az, rounded, partials, arrivals, sums, [&] {
        record(s, sums, history, 0);
        verdict(s, history, column, rtol, atol, dtol, limit, AFTER_ITERATION, handle);
    });
}
