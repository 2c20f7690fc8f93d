"""What each part of the consistent scheme buys: a demo run once per
variant (the symmetric scheme, each part added to it alone, the whole
consistent scheme), its summary.json gathered into one JSON file, written
after every variant.

    python benchmarks/scheme_parts.py --json kovasznay-parts.json -- demos/channel.py \\
        -channel_case kovasznay -channel_cells triangles -channel_levels 4 -dm_mat_type aij

Everything after -- is the demo and its options; each variant adds its own
(plugin.flow.scheme's options).
"""

import argparse
import json

import harness

VARIANTS = {
    "symmetric": ["-flow_scheme", "symmetric"],
    "symmetric + least-squares gradient": ["-flow_scheme", "symmetric", "-flow_gradient", "least-squares"],
    "symmetric + pressure non-orthogonal": ["-flow_scheme", "symmetric", "-flow_gradient", "least-squares",
                                            "-flow_pressure_nonorthogonal"],
    "symmetric + skewness": ["-flow_scheme", "symmetric", "-flow_gradient", "least-squares", "-flow_skewness"],
    "symmetric + convection skewness": ["-flow_scheme", "symmetric", "-flow_gradient", "least-squares",
                                        "-flow_convection_skewness"],
    "symmetric + diffusion non-orthogonal": ["-flow_scheme", "symmetric", "-flow_gradient", "least-squares",
                                             "-flow_nonorthogonal"],
    "consistent": ["-flow_scheme", "consistent"],
    "consistent without skewness": ["-flow_scheme", "consistent", "-flow_skewness", "0"],
    "consistent without convection skewness": ["-flow_scheme", "consistent", "-flow_convection_skewness", "0"],
    "consistent without pressure non-orthogonal": ["-flow_scheme", "consistent", "-flow_pressure_nonorthogonal", "0"],
    "consistent without face memory": ["-flow_scheme", "consistent", "-flow_face_memory", "0"],
    "consistent with face memory": ["-flow_scheme", "consistent", "-flow_face_memory", "1"],
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", required=True)
    parser.add_argument("--variants", nargs="*", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--timeout", type=float, default=None, help="seconds a variant may run")
    args, demo = harness.demo_arguments(parser)
    results = {"meta": harness.metadata(), "command": demo, "variants": {}}
    for name in args.variants:
        results["variants"][name] = harness.demo_summary(demo, VARIANTS[name], args.timeout)
        print(name, json.dumps(results["variants"][name])[:300], flush=True)
        with open(args.json, "w") as stream:
            json.dump(results, stream, indent=1)


if __name__ == "__main__":
    main()
