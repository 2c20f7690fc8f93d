// A loop of time steps that the device ends (see __init__.py's loop_start, loop_go and step_verdict): the status
// array's slots BASE, COUNT, LIMIT, GO, KEEP, FINE; its verdict goes, inside a CUDA graph, to the conditional
// handle of the IF or WHILE node that runs the next step.

// As cuda_device_runtime_api.h declares it (CUDA 12.4 and later): a builtin of the compiler (see pcg's loop.cu).
extern "C" __device__ __attribute__((cudart_builtin)) void cudaGraphSetConditional(unsigned long long handle,
                                                                                   unsigned int value);

extern "C" __global__ void loop_start(double* status, double limit, double base)
{
    status[0] = base;
    status[1] = 0.0;
    status[2] = limit;
    status[3] = limit > 0.0 ? 1.0 : 0.0;
    status[4] = 1.0;
    status[5] = 1.0;
}

extern "C" __global__ void loop_go(const double* status, unsigned long long handle)
{
    if (handle) cudaGraphSetConditional(handle, status[3] != 0.0);
}

extern "C" __global__ void step_verdict(double* status, const double* rate, const double* change, double dt,
                                        double cfl, double other_limit, double band, double cfl_max,
                                        double steady_tol, int fixed, unsigned long long handle)
{
    const double r = rate[0];
    const double number = dt * r;
    const double limit = fmin(cfl / r, other_limit);
    const bool keeps_dt = r > 0.0 && (fixed || (dt <= limit && limit < band * dt));
    const bool unsteady = steady_tol == 0.0 || change[0] / dt >= steady_tol;
    const bool keep = status[5] != 0.0 && isfinite(number) && number <= cfl_max && unsteady && keeps_dt;
    status[1] += 1.0;
    status[4] = keep ? 1.0 : 0.0;
    status[3] = (keep && status[1] < status[2]) ? 1.0 : 0.0;
    status[5] = 1.0;
    if (handle) cudaGraphSetConditional(handle, status[3] != 0.0);
}
