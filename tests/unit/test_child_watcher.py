"""kubelab's commands reap asyncio's subprocesses through pidfds on the event loop (as Python 3.12+ does by
itself), not with a thread per child blocked in waitpid; exit codes arrive as before, and a later event
loop in the same process still runs subprocesses."""

from __future__ import annotations

import asyncio
import threading

from kubelab.runner import run_until_interrupted


def test_subprocesses_are_reaped_without_a_thread_each() -> None:
    waiting_threads: list[str] = []
    codes: list[int] = []

    async def main() -> None:
        # Children that stay alive until told: while they run, whatever waits for them exists.
        children = [await asyncio.create_subprocess_exec("cat", stdin=asyncio.subprocess.PIPE,
                                                         stdout=asyncio.subprocess.DEVNULL) for _ in range(5)]
        waiting_threads.extend(t.name for t in threading.enumerate() if "waitpid" in t.name)
        for child in children:
            assert child.stdin is not None
            child.stdin.close()
        codes.extend([await child.wait() for child in children])
        failing = await asyncio.create_subprocess_exec("sh", "-c", "exit 3")
        codes.append(await failing.wait())

    assert run_until_interrupted(main) == 0
    assert codes == [0, 0, 0, 0, 0, 3]
    assert waiting_threads == []

    async def later() -> int:
        child = await asyncio.create_subprocess_exec("sh", "-c", "exit 4")
        return await child.wait()

    assert asyncio.run(later()) == 4
