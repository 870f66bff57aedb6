"""Children spawned while the etcd client polls: kubelab's processes fork (processes.spawn's preexec_fn sets
PR_SET_PDEATHSIG), and gRPC core's fork handlers, on by default as grpcio builds it, aborted some children in
the fork before they could exec (exit -6, "Check failed: next_worker->state == KICKED"; 12-17 of 300 on this
machine). Importing the API server turns fork support off first (kubelab/__init__.py), so every child runs.
The check runs in a fresh interpreter whose first import is the API server's storage, as `kubelab apiserver`'s
is, with no GRPC_ENABLE_FORK_SUPPORT in its environment."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from kubelab.etcd import Etcd

CHILDREN = 200

PROGRAM = textwrap.dedent("""
    import asyncio, sys
    import apiserver.storage  # first: the etcd client and gRPC come with it
    import aetcd
    from kubelab import processes

    async def main(host, port):
        client = aetcd.Client(host=host, port=port)
        await client.put(b"/kubelab-spawn-test", b"1")
        done = False

        async def poll():  # gRPC's pollers busy while the children fork
            while not done:
                await client.get(b"/kubelab-spawn-test")

        pollers = [asyncio.create_task(poll()) for _ in range(8)]
        loop = asyncio.get_running_loop()
        codes = []
        for _ in range(int(sys.argv[3])):
            child = await loop.run_in_executor(None, lambda: processes.spawn(["true"]))
            codes.append(await loop.run_in_executor(None, child.wait))
        done = True
        await asyncio.gather(*pollers)
        await client.delete(b"/kubelab-spawn-test")
        print(sorted(set(codes)), sum(1 for code in codes if code != 0))

    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
""")


def test_children_spawned_while_grpc_polls_all_run(etcd: Etcd) -> None:
    host, port = "127.0.0.1", str(etcd.client_port)
    env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}
    result = subprocess.run([sys.executable, "-c", PROGRAM, host, port, str(CHILDREN)], check=False, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split("\n")[-2] == "[0] 0", (result.stdout, result.stderr[-3000:])
