"""The CPU a pod create's own steps cost inside the API server, without HTTP or etcd: the unknown-field
check (schema.prune), the managedFields comparison of a create (fieldpath.compare against an empty
object), the decode into the model with defaults (Registry.decode), and the whole field tracking of a
create (Registry._track: model dump, compare, FieldsV1). The pod is bench/api_server.py's.

Each `--code LABEL=DIR` (a checkout of kubelab, e.g. `git archive main | tar -x -C /tmp/base`) runs in a
Python process of its own, importing that checkout; the checkouts alternate for `--repeat` rounds. Each
figure is the best of `--rounds` timings of `--calls` calls, in process CPU time (microseconds per call).

    .venv/bin/python bench/create_path.py --code before=/tmp/base --code after=. --repeat 3
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def best_us(fn: Callable[[], Any], calls: int, rounds: int) -> float:
    timings = []
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(calls):
            fn()
        timings.append((time.process_time() - start) / calls * 1e6)
    return round(min(timings), 1)


def worker(root: str, calls: int, rounds: int) -> dict[str, float]:
    sys.path.insert(0, root)
    from apiserver.managedfields import fieldpath
    from apiserver.registry import default_strategies
    from apiserver.registry.store import Registry
    from kubelab import kinds, schema

    # bench/api_server.py's pod, imported after the checkout's packages: its harness puts this
    # directory's checkout first on sys.path.
    sys.path.insert(0, str(HERE))
    from api_server import pod_body

    body = pod_body(1)
    registry = Registry(None, default_strategies())  # type: ignore[arg-type]  # no storage: decoding only
    decoded = registry.decode(kinds.PODS, body, "bench")
    tracked = decoded.to_dict()
    empty: dict[str, Any] = {"metadata": {}, "spec": {}, "status": {}}
    return {
        "prune_us": best_us(lambda: schema.prune("v1", "Pod", body), calls, rounds),
        "compare_create_us": best_us(lambda: fieldpath.compare(empty, tracked, "Pod"), calls, rounds),
        "decode_us": best_us(lambda: registry.decode(kinds.PODS, body, "bench"), calls, rounds),
        "track_create_us": best_us(lambda: Registry._track(kinds.PODS, None, registry.decode(kinds.PODS, body, "bench"),
                                                           "kubelab-bench", None), calls, rounds),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--code", action="append", metavar="LABEL=DIR", help="a checkout to measure (default: .)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds, each running every --code once")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--worker", metavar="DIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.calls, args.rounds)))
        return
    import os
    codes = [c.split("=", 1) for c in (args.code or [f"this={HERE.parent}"])]
    runs: list[dict[str, Any]] = []
    for round_ in range(args.repeat):
        for label, root in codes:
            out = subprocess.run([sys.executable, __file__, "--worker", str(Path(root).resolve()),
                                  "--calls", str(args.calls), "--rounds", str(args.rounds)],
                                 capture_output=True, text=True, check=True, cwd=root)
            runs.append({"code": label, "round": round_ + 1, "load": round(os.getloadavg()[0], 2),
                         **json.loads(out.stdout)})
    print(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
