"""Jobs on the netns lab (`kubelab up --dataplane netns`), driven by the real kubectl: pods that run their
commands in their own namespaces, a Job that completes (`kubectl wait --for=condition=complete`), one whose
pods exit 1 until backoffLimit, an Indexed Job whose pods see their index and hostname, and a Job made
from a CronJob with `kubectl create job --from=cronjob/...`."""

from __future__ import annotations

import json
from typing import Any

from kubelab_cluster import Cluster


def job(name: str, script: str, **spec: Any) -> str:
    return json.dumps({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
                       "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                           {"name": "main", "image": "busybox", "command": ["sh", "-c", script]}]}}, **spec}})


def wait(cluster: Cluster, name: str, condition: str) -> None:
    result = cluster.kubectl("wait", f"--for=condition={condition}", f"job/{name}", "--timeout=50s", check=False)
    assert result.returncode == 0, (result.stderr, cluster.kubectl("describe", "job", name, check=False).stdout)


def test_a_job_completes_and_kubectl_wait_sees_it(cluster: Cluster) -> None:
    cluster.kubectl("create", "job", "hello", "--image=busybox", "--", "sh", "-c", "echo hello from $(hostname)")
    wait(cluster, "hello", "complete")
    row = cluster.kubectl("get", "job", "hello", "--no-headers").stdout.split()
    assert row[:3] == ["hello", "Complete", "1/1"]
    pods = cluster.kubectl_json("get", "pods", "-l", "job-name=hello")["items"]
    assert [p["status"]["phase"] for p in pods] == ["Succeeded"]
    assert not pods[0]["metadata"].get("finalizers")
    logs = cluster.kubectl("logs", "job/hello").stdout
    assert logs == f"hello from {pods[0]['metadata']['name']}\n"


def test_a_job_whose_pods_exit_1_hits_backoff_limit(cluster: Cluster) -> None:
    cluster.kubectl("create", "-f", "-", input=job("crash", "exit 1", backoffLimit=0))
    wait(cluster, "crash", "failed")
    status = cluster.kubectl_json("get", "job", "crash")["status"]
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert (failed["reason"], status["failed"]) == ("BackoffLimitExceeded", 1)
    assert cluster.kubectl("get", "job", "crash", "--no-headers").stdout.split()[1] == "Failed"


def test_an_indexed_job_gets_its_index_and_hostname(cluster: Cluster) -> None:
    script = 'test "$(hostname)" = "idx-$JOB_COMPLETION_INDEX"'
    cluster.kubectl("create", "-f", "-", input=job("idx", script, completions=2, parallelism=2,
                                                     completionMode="Indexed"))
    wait(cluster, "idx", "complete")
    assert cluster.kubectl_json("get", "job", "idx")["status"]["completedIndexes"] == "0,1"


def test_a_job_from_a_cronjob(cluster: Cluster) -> None:
    cluster.kubectl("create", "cronjob", "nightly", "--image=busybox", "--schedule=@daily", "--", "true")
    cluster.kubectl("create", "job", "nightly-now", "--from=cronjob/nightly")
    wait(cluster, "nightly-now", "complete")
    meta = cluster.kubectl_json("get", "job", "nightly-now")["metadata"]
    assert meta["annotations"]["cronjob.kubernetes.io/instantiate"] == "manual"
    assert meta["ownerReferences"][0]["name"] == "nightly"
