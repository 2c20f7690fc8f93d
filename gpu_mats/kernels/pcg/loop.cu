// The device-side convergence test of a loop of CG iterations (see __init__.py's loop_test): its verdict
// goes to s[5] and, inside a CUDA graph, to the conditional handle of the WHILE node that repeats the loop.

// As cuda_device_runtime_api.h declares it (CUDA 12.4 and later): a builtin of the compiler. Declared here since
// that header needs the toolkit's crt/host_defines.h, which NVRTC installed from pip wheels does not find.
extern "C" __device__ __attribute__((cudart_builtin)) void cudaGraphSetConditional(unsigned long long handle,
                                                                                   unsigned int value);

#define START 0
#define RESUME 2

extern "C" __global__ void loop_test(double* s, const double* history, int column, double rtol, double atol,
                                     double dtol, int limit, int mode, unsigned long long handle)
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
