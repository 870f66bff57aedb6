"""The Job and CronJob controllers against a real API server and etcd.

Jobs run on `kubelab up --dataplane render` (its containers' commands are plain processes, so exit codes
are real) and are driven and watched with the real kubectl: `kubectl wait --for=condition=complete`,
backoffLimit, Indexed completion, podFailurePolicy, ttlSecondsAfterFinished. The CronJob controller runs
in-process on a clock the test sets, so a schedule is due without waiting for it.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from apitools import unique_name
from kubectltools import RenderCluster, render_cluster, table, wait_for

from controllers.cronjob import CronJobController
from controllers.informers import SharedInformers
from kubelab import timeutil
from kubelab.client import ApiClient


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RenderCluster]:
    yield from render_cluster(tmp_path_factory.mktemp("batch") / "data", nodes=1)


def kubectl(cluster: RenderCluster, *args: str, check: bool = True, stdin: str | None = None
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kubectl", "--kubeconfig", str(cluster.kubeconfig), *args], input=stdin,
                          capture_output=True, text=True, check=check, timeout=240)


def get(cluster: RenderCluster, *args: str) -> Any:
    return json.loads(kubectl(cluster, "get", *args, "-o", "json").stdout)


def create_job(cluster: RenderCluster, name: str, command: str, **spec: Any) -> None:
    template = spec.pop("template_spec", {})
    body = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"template": {"spec": {"restartPolicy": "Never", **template,
                                           "containers": [{"name": "main", "image": "busybox",
                                                           "command": ["sh", "-c", command]}]}}, **spec}}
    kubectl(cluster, "create", "-f", "-", stdin=json.dumps(body))


def wait_condition(cluster: RenderCluster, name: str, condition: str) -> None:
    result = kubectl(cluster, "wait", f"--for=condition={condition}", f"job/{name}", "--timeout=180s", check=False)
    assert result.returncode == 0, (result.stdout, result.stderr, get(cluster, "job", name),
                                    get(cluster, "pods", "-l", f"job-name={name}"))


def test_a_job_whose_pods_exit_0_completes(cluster: RenderCluster) -> None:
    name = unique_name("ok")
    create_job(cluster, name, "exit 0", completions=3, parallelism=2)
    wait_condition(cluster, name, "complete")

    job = get(cluster, "job", name)
    status = job["status"]
    assert (status["succeeded"], status.get("failed"), status.get("active"), status["ready"]) == (3, None, None, 0)
    assert status["uncountedTerminatedPods"] == {}
    assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]] == [
        ("SuccessCriteriaMet", "True", "CompletionsReached"), ("Complete", "True", "CompletionsReached")]
    assert status["completionTime"] >= status["startTime"]
    pods = get(cluster, "pods", "-l", f"batch.kubernetes.io/job-name={name}")["items"]
    assert len(pods) == 3
    assert all(p["status"]["phase"] == "Succeeded" and not p["metadata"].get("finalizers") for p in pods)
    row = table(kubectl(cluster, "get", "job", name).stdout)[0]
    assert (row["STATUS"], row["COMPLETIONS"]) == ("Complete", "3/3")


def test_a_job_whose_pods_exit_1_hits_its_backoff_limit(cluster: RenderCluster) -> None:
    name = unique_name("fail")
    create_job(cluster, name, "exit 1", backoffLimit=1)
    wait_condition(cluster, name, "failed")

    status = get(cluster, "job", name)["status"]
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert (failed["reason"], failed["message"]) == ("BackoffLimitExceeded",
                                                     "Job has reached the specified backoff limit")
    assert status["failed"] == 2  # backoffLimit 1: the second failure is one too many
    pods = get(cluster, "pods", "-l", f"job-name={name}")["items"]
    assert sorted(p["status"]["phase"] for p in pods) == ["Failed", "Failed"]
    # The replacement waited out kube's 10 s back-off after the first failure.
    finished = sorted(timeutil.parse(p["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"])
                      for p in pods)
    created = sorted(timeutil.parse(p["metadata"]["creationTimestamp"]) for p in pods)
    assert (created[1] - finished[0]).total_seconds() >= 9  # whole-second timestamps
    assert table(kubectl(cluster, "get", "job", name).stdout)[0]["STATUS"] == "Failed"
    events = kubectl(cluster, "get", "events", "--field-selector", f"involvedObject.name={name}").stdout
    assert "BackoffLimitExceeded" in events


def test_an_indexed_job_runs_each_index_with_its_env_and_hostname(cluster: RenderCluster) -> None:
    name = unique_name("idx")
    # Each pod succeeds only with its index in JOB_COMPLETION_INDEX (render pods share the host's UTS
    # namespace, so the hostname itself is checked on the netns lab, tests/e2e/test_jobs.py).
    body = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"completions": 3, "parallelism": 3, "completionMode": "Indexed",
                     "template": {"spec": {"restartPolicy": "Never", "containers": [{
                         "name": "main", "image": "busybox",
                         "command": ["sh", "-c", 'case "$JOB_COMPLETION_INDEX" in [0-2]) exit 0;; esac; exit 1']}]}}}}
    kubectl(cluster, "create", "-f", "-", stdin=json.dumps(body))
    wait_condition(cluster, name, "complete")

    status = get(cluster, "job", name)["status"]
    assert (status["completedIndexes"], status["succeeded"], status.get("failed")) == ("0-2", 3, None)
    pods = get(cluster, "pods", "-l", f"job-name={name}")["items"]
    indexes = sorted(p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] for p in pods)
    assert indexes == ["0", "1", "2"]
    assert sorted(p["spec"]["hostname"] for p in pods) == [f"{name}-0", f"{name}-1", f"{name}-2"]
    assert all(p["metadata"]["name"].startswith(
        f"{name}-{p['metadata']['labels']['batch.kubernetes.io/job-completion-index']}-") for p in pods)


def test_backoff_limit_per_index_fails_one_index_and_runs_the_others(cluster: RenderCluster) -> None:
    name = unique_name("perindex")
    create_job(cluster, name, 'test "$JOB_COMPLETION_INDEX" != 1', completions=3, parallelism=3,
               completionMode="Indexed", backoffLimitPerIndex=0)
    wait_condition(cluster, name, "failed")
    status = get(cluster, "job", name)["status"]
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert (failed["reason"], failed["message"]) == ("FailedIndexes", "Job has failed indexes")
    assert (status["completedIndexes"], status["failedIndexes"], status["failed"]) == ("0,2", "1", 1)


def test_pod_failure_policy_fails_the_job_on_an_exit_code(cluster: RenderCluster) -> None:
    name = unique_name("pfp")
    policy = {"rules": [{"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In",
                                                              "values": [42]}}]}
    create_job(cluster, name, "exit 42", backoffLimit=6, podFailurePolicy=policy)
    wait_condition(cluster, name, "failed")
    failed = next(c for c in get(cluster, "job", name)["status"]["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "PodFailurePolicy"
    assert failed["message"].startswith("Container main for pod default/")
    assert failed["message"].endswith("failed with exit code 42 matching FailJob rule at index 0")


def test_ttl_after_finished_deletes_the_job_and_its_pods(cluster: RenderCluster) -> None:
    name = unique_name("ttl")
    create_job(cluster, name, "exit 0", ttlSecondsAfterFinished=0)
    wait_for(f"{name} deleted", lambda: kubectl(cluster, "get", "job", name, check=False).returncode != 0,
             timeout=90)
    wait_for(f"{name}'s pods deleted", lambda: not get(cluster, "pods", "-l", f"job-name={name}")["items"],
             timeout=90)


def test_active_deadline_exceeded(cluster: RenderCluster) -> None:
    name = unique_name("slow")
    create_job(cluster, name, "sleep 600", activeDeadlineSeconds=2)
    wait_condition(cluster, name, "failed")
    failed = next(c for c in get(cluster, "job", name)["status"]["conditions"] if c["type"] == "Failed")
    assert (failed["reason"], failed["message"]) == ("DeadlineExceeded",
                                                     "Job was active longer than specified deadline")


def test_deleting_a_running_job_deletes_its_pods_despite_their_finalizer(cluster: RenderCluster) -> None:
    """kubectl deletes with Background propagation; the pods carry the job-tracking finalizer, which the
    Job controller removes once their Job is gone (kube's syncOrphanPod), or they stay Terminating."""
    name = unique_name("gone")
    create_job(cluster, name, "sleep 600")
    wait_for(f"{name}'s pod running", lambda: [p for p in get(cluster, "pods", "-l", f"job-name={name}")["items"]
                                               if p["status"].get("phase") == "Running"])
    kubectl(cluster, "delete", "job", name, "--wait=false")
    wait_for(f"{name}'s pods deleted", lambda: not get(cluster, "pods", "-l", f"job-name={name}")["items"],
             timeout=90)


def test_suspend_deletes_the_pods_and_resume_starts_again(cluster: RenderCluster) -> None:
    name = unique_name("pause")
    create_job(cluster, name, "sleep 600")
    wait_for(f"{name} running", lambda: [p for p in get(cluster, "pods", "-l", f"job-name={name}")["items"]
                                         if p["status"].get("phase") == "Running"])
    kubectl(cluster, "patch", "job", name, "-p", '{"spec":{"suspend":true}}')
    wait_condition(cluster, name, "suspended")
    wait_for(f"{name}'s pods gone", lambda: not get(cluster, "pods", "-l", f"job-name={name}")["items"], timeout=90)
    assert table(kubectl(cluster, "get", "job", name).stdout)[0]["STATUS"] == "Suspended"
    assert "startTime" not in get(cluster, "job", name)["status"]
    kubectl(cluster, "patch", "job", name, "-p", '{"spec":{"suspend":false}}')
    wait_for(f"{name} resumed", lambda: [p for p in get(cluster, "pods", "-l", f"job-name={name}")["items"]
                                         if p["status"].get("phase") == "Running"])
    resumed = next(c for c in get(cluster, "job", name)["status"]["conditions"] if c["type"] == "Suspended")
    assert (resumed["status"], resumed["reason"]) == ("False", "JobResumed")
    kubectl(cluster, "delete", "job", name, "--wait=false")


def test_kubelab_up_runs_a_cronjob_every_minute(cluster: RenderCluster) -> None:
    """The one real-time schedule: the controller in `kubelab up` requeues itself for the next minute,
    creates `<cronjob>-<minutes>`, and records lastScheduleTime and, once the Job completes,
    lastSuccessfulTime (at most ~60 s of waiting for the minute, plus the Job)."""
    name = unique_name("minutely")
    kubectl(cluster, "create", "cronjob", name, "--image=busybox", "--schedule=* * * * *", "--", "true")
    status = wait_for(f"{name} succeeded once", lambda: (s := get(cluster, "cronjob", name).get("status") or {})
                      .get("lastSuccessfulTime") and s, timeout=100)
    scheduled = timeutil.parse(status["lastScheduleTime"])
    assert scheduled is not None and scheduled.second == 0
    jobs = [j for j in get(cluster, "jobs")["items"] if j["metadata"]["name"].startswith(f"{name}-")]
    assert f"{name}-{int(scheduled.timestamp()) // 60}" in [j["metadata"]["name"] for j in jobs]
    kubectl(cluster, "delete", "cronjob", name)


async def _run_cronjob_controller(url: str, key: str, clock_at: datetime) -> None:
    async with ApiClient(url, user_agent="cronjob-test") as api:
        informers = SharedInformers(api)
        tasks = [asyncio.create_task(informers.cronjobs.run()), asyncio.create_task(informers.jobs.run())]
        try:
            await informers.cronjobs.wait_synced()
            await informers.jobs.wait_synced()
            controller = CronJobController(api, informers, clock=lambda: clock_at)
            await controller.reconcile(key)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


def test_cronjob_controller_creates_the_due_job_on_a_moved_clock(apiserver: str, api: Any) -> None:
    """A real API server and the controller's real writes; only the clock is the test's: ten minutes after
    the CronJob was made, `*/5` is due at the last multiple of five minutes."""
    name = unique_name("cj")
    body = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name},
            "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": {"spec": {
                "restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "busybox", "command": ["true"]}]}}}}}}
    resp = api.post("/apis/batch/v1/namespaces/default/cronjobs", json=body)
    assert resp.status_code == 201, resp.text
    created = timeutil.parse(resp.json()["metadata"]["creationTimestamp"])
    assert created is not None
    later = created + timedelta(minutes=10)
    due = later.replace(minute=later.minute - later.minute % 5, second=0, tzinfo=UTC)

    asyncio.run(_run_cronjob_controller(apiserver, f"default/{name}", later))

    job_name = f"{name}-{int(due.timestamp()) // 60}"
    job = api.get(f"/apis/batch/v1/namespaces/default/jobs/{job_name}").json()
    assert job["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"] == timeutil.rfc3339(due)
    assert job["metadata"]["ownerReferences"][0]["name"] == name
    cj = api.get(f"/apis/batch/v1/namespaces/default/cronjobs/{name}").json()
    assert cj["status"]["lastScheduleTime"] == timeutil.rfc3339(due)
    assert [a["name"] for a in cj["status"]["active"]] == [job_name]
    # The same clock again: the start is taken, nothing new.
    asyncio.run(_run_cronjob_controller(apiserver, f"default/{name}", later))
    jobs = api.get("/apis/batch/v1/namespaces/default/jobs").json()["items"]
    assert [j["metadata"]["name"] for j in jobs if j["metadata"]["name"].startswith(name)] == [job_name]
