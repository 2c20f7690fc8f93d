"""What the GPU does in a flow step: kernels launched per step (from
graphs or from the host), their summed GPU time against the step's wall
time, and the copies between host and device, over --steps steps of a demo
after --warmup, recorded by PyTorch's profiler (CUPTI: every kernel of the
process, those replayed from CUDA graphs included).

    python benchmarks/step_anatomy.py --warmup 300 --steps 200 --json anatomy.json -- \\
        demos/cylinder.py -cyl_case 2d1 -flow_mesh cylinder2d-2.msh -flow_max_steps 600

Everything after -- is the demo and its options; it must run at least
--warmup + --steps + 1 steps. The wall time here includes the profiler's
own host cost: the demo's "steps of" line without the profiler is the
step's time; the kernel time is what the step would take were the host
never the one waited for.
"""

import argparse
import collections
import json
import time

import harness


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--top", type=int, default=12, help="kernels listed by GPU time")
    parser.add_argument("--json")
    args, demo = harness.demo_arguments(parser, in_process=True)
    import cupy
    import torch.profiler

    window = {}

    def enter(_stepper):
        cupy.cuda.runtime.deviceSynchronize()
        window["profiler"] = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA])
        window["profiler"].__enter__()
        window["start"] = time.perf_counter()

    def leave(_stepper):
        cupy.cuda.runtime.deviceSynchronize()
        window["seconds"] = time.perf_counter() - window["start"]
        window["profiler"].__exit__(None, None, None)

    harness.demo_window(demo, args.warmup, args.steps, enter, leave)

    kernels, copies = collections.Counter(), collections.Counter()
    kernel_us = collections.Counter()
    for event in window["profiler"].events():
        if event.device_type != torch.autograd.DeviceType.CUDA:
            continue
        name = event.name
        if name.startswith(("Memcpy", "Memset")):
            copies[name.split(" (")[0]] += 1
        else:
            kernels[name] += 1
            kernel_us[name] += event.time_range.elapsed_us()
    steps = args.steps
    result = {**harness.metadata(), "command": demo, "steps": steps,
              "wall_ms_per_step_profiled": window["seconds"] / steps * 1e3,
              "kernels_per_step": sum(kernels.values()) / steps,
              "kernel_ms_per_step": sum(kernel_us.values()) / steps / 1e3,
              "copies_per_step": {name: count / steps for name, count in copies.items()},
              "top_kernels": [{"name": name, "per_step": kernels[name] / steps, "us_per_step": us / steps}
                              for name, us in kernel_us.most_common(args.top)]}
    print(f"{result['device']}: {steps} steps of {' '.join(demo)}")
    print(f"  kernels per step {result['kernels_per_step']:.1f}, their GPU time {result['kernel_ms_per_step']:.3f} ms "
          f"a step; wall {result['wall_ms_per_step_profiled']:.3f} ms a step under the profiler")
    print("  copies per step: " + ", ".join(f"{k} {v:.2f}" for k, v in result["copies_per_step"].items()))
    for row in result["top_kernels"]:
        print(f"  {row['us_per_step']:8.1f} us {row['per_step']:6.1f}x  {row['name'][:90]}")
    if args.json:
        with open(args.json, "w") as stream:
            json.dump(result, stream, indent=1)


if __name__ == "__main__":
    main()
