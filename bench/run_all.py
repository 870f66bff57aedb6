"""Run every benchmark, one after the other, each writing its JSON into bench/results/ (and printing it).

    .venv/bin/python bench/run_all.py            # full runs (about 45 minutes on the 2-CPU VM, most of it
                                                 # proxy_sync's 10k-Service restores; root for those)
    .venv/bin/python bench/run_all.py --quick    # smaller workloads (about 6 minutes)
    make bench                                   # the same as the first

The numbers, the machine conditions and what they mean are in BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", default=str(HERE / "results"), help="where the JSON results go")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    quick = ["--quick"] if args.quick else []
    runs = [("api_server", ["api_server.py", *quick]),
            ("netprog", ["netprog.py", *quick]),
            ("proxy_sync", ["proxy_sync.py", *(["--sizes", "1000", "--repeat", "2"] if args.quick else [])]),
            ("scheduler", ["scheduler.py", *(["--nodes", "500", "--pods", "1000"] if args.quick else [])]),
            ("scheduler_breakdown", ["scheduler.py", "--apiserver-breakdown", "500" if args.quick else "2000"]),
            ("endpoints_sync", ["endpoints_sync.py", *(["--pods", "200", "--rounds", "5"] if args.quick else [])])]
    failed = []
    for name, argv in runs:
        print(f"== {name}: {' '.join(argv)}", flush=True)
        start = time.monotonic()
        done = subprocess.run([sys.executable, *argv], cwd=HERE, capture_output=True, text=True, check=False)
        (out / f"{name}.txt").write_text(done.stdout + ("\n--- stderr ---\n" + done.stderr[-5000:] if done.stderr else ""))
        print(done.stdout[-4000:], flush=True)
        if done.returncode != 0:
            failed.append(name)
            print(f"!! {name} failed (exit {done.returncode}):\n{done.stderr[-3000:]}", flush=True)
        print(f"== {name}: {time.monotonic() - start:.0f} s", flush=True)
    (out / "summary.json").write_text(json.dumps({"failed": failed, "quick": args.quick}, indent=1) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
