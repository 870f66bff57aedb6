"""The garbage collector setting of long-running components (kubelab/gctune.py), in a process of its
own: it is process-wide, and this test process must keep CPython's defaults."""

from __future__ import annotations

import json
import subprocess
import sys

from kubelab.gctune import YOUNG_THRESHOLD


def test_tuning_freezes_start_up_objects_and_collects_the_young_generation_less_often() -> None:
    script = ("import gc, json; before = gc.get_threshold(); from kubelab.gctune import tune_for_long_running; "
              "tune_for_long_running(); print(json.dumps([before, gc.get_threshold(), gc.get_freeze_count()]))")
    out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True).stdout
    before, after, frozen = json.loads(out)
    assert after == [YOUNG_THRESHOLD, before[1], before[2]]
    assert frozen > 1000  # every object start-up made is out of the collector's sight

