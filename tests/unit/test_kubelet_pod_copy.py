"""The kubelet's copy of its pods takes the newest version whichever comes first: the informer's event or
its own status write's answer (kubeletstub.pods.remember_newest)."""

from __future__ import annotations

from kubelab.models import Pod
from kubeletstub.pods import remember_newest


def _pod(rv: str, uid: str = "u-1", phase: str = "Pending") -> Pod:
    return Pod.model_validate({"metadata": {"name": "web", "namespace": "default", "uid": uid, "resourceVersion": rv},
                               "spec": {"containers": [{"name": "c", "image": "busybox"}]},
                               "status": {"phase": phase}})


def test_a_write_answered_after_a_newer_event_does_not_undo_it() -> None:
    cache: dict[str, Pod] = {}
    remember_newest(cache, _pod("10"))
    remember_newest(cache, _pod("12", phase="Running"))  # the watch: someone else's change, after our write
    remember_newest(cache, _pod("11", phase="Running"))  # our write's answer, arriving last
    assert cache["default/web"].metadata.resource_version == "12"


def test_a_late_event_does_not_undo_a_writes_answer() -> None:
    cache: dict[str, Pod] = {}
    remember_newest(cache, _pod("11", phase="Running"))  # our write's answer
    remember_newest(cache, _pod("10"))  # the watch, still delivering what came before it
    assert cache["default/web"].metadata.resource_version == "11"


def test_newer_versions_and_a_recreated_pod_are_taken() -> None:
    cache: dict[str, Pod] = {}
    remember_newest(cache, _pod("10"))
    remember_newest(cache, _pod("13"))
    assert cache["default/web"].metadata.resource_version == "13"
    remember_newest(cache, _pod("5", uid="u-2"))  # deleted and made again under the same name
    assert cache["default/web"].metadata.uid == "u-2"
