"""batch/v1 Jobs and CronJobs through the real kubectl against a real API server (no controllers here):
`kubectl create job|cronjob` (protobuf bodies from 1.32 on), the defaults and generated selector kube
writes, `kubectl get` with kube's columns, `kubectl explain`, and validation answered with kube's messages.
The controllers' behaviour is in test_batch_controllers.py and the e2e tests."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest
from apitools import unique_name
from kubectltools import VERSIONS, Kubectl, headers, table


def _job(name: str, **spec: object) -> dict[str, object]:
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36",
                                                                   "command": ["true"]}]}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"template": template, **spec}}


@pytest.mark.parametrize("version", VERSIONS)
def test_create_job_gets_kubes_defaults_and_generated_selector(kubectl_for: Callable[[str], Kubectl],
                                                               version: str) -> None:
    kubectl = kubectl_for(version)
    name = unique_name("job")
    out = kubectl.ok("create", "job", name, "--image=busybox:1.36", "--", "sh", "-c", "exit 0")
    assert out.strip() == f"job.batch/{name} created"

    job = json.loads(kubectl.ok("get", "job", name, "-o", "json"))
    uid = job["metadata"]["uid"]
    spec = job["spec"]
    assert (spec["parallelism"], spec["completions"], spec["backoffLimit"], spec["completionMode"],
            spec["suspend"], spec["manualSelector"], spec["podReplacementPolicy"]) == (
        1, 1, 6, "NonIndexed", False, False, "TerminatingOrFailed")
    assert spec["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    generated = {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name,
                 "controller-uid": uid, "job-name": name}
    assert spec["template"]["metadata"]["labels"] == generated
    assert job["metadata"]["labels"] == generated
    assert spec["template"]["spec"]["restartPolicy"] == "Never"  # kubectl create job's own choice
    assert spec["template"]["spec"]["containers"][0]["command"] == ["sh", "-c", "exit 0"]


def test_get_jobs_columns(kubectl: Kubectl, api: httpx.Client) -> None:
    name = unique_name("job")
    resp = api.post("/apis/batch/v1/namespaces/default/jobs", json=_job(name, completions=3, parallelism=2))
    assert resp.status_code == 201, resp.text

    out = kubectl.ok("get", "jobs", name)
    assert headers(out) == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    row = table(out)[0]
    assert (row["NAME"], row["STATUS"], row["COMPLETIONS"], row["DURATION"]) == (name, "Running", "0/3", "")
    wide = kubectl.ok("get", "jobs", name, "-o", "wide")
    assert headers(wide) == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"]
    assert table(wide)[0]["SELECTOR"].startswith("batch.kubernetes.io/controller-uid=")

    # A work queue (no completions) with parallelism 2: "0/1 of 2".
    queue = unique_name("queue")
    assert api.post("/apis/batch/v1/namespaces/default/jobs",
                    json=_job(queue, parallelism=2)).status_code == 201
    assert table(kubectl.ok("get", "job", queue))[0]["COMPLETIONS"] == "0/1 of 2"
    # `all` includes jobs and cronjobs (their discovery categories).
    assert f"job.batch/{name}" in kubectl.ok("get", "all")


@pytest.mark.parametrize("version", VERSIONS)
def test_create_cronjob_and_a_job_from_it(kubectl_for: Callable[[str], Kubectl], version: str) -> None:
    kubectl = kubectl_for(version)
    name = unique_name("cj")
    out = kubectl.ok("create", "cronjob", name, "--image=busybox:1.36", "--schedule=*/5 * * * *", "--", "date")
    assert out.strip() == f"cronjob.batch/{name} created"
    cj = json.loads(kubectl.ok("get", "cronjob", name, "-o", "json"))
    assert (cj["spec"]["concurrencyPolicy"], cj["spec"]["suspend"], cj["spec"]["successfulJobsHistoryLimit"],
            cj["spec"]["failedJobsHistoryLimit"]) == ("Allow", False, 3, 1)
    listing = kubectl.ok("get", "cj", name)
    assert headers(listing) == ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST SCHEDULE", "AGE"]
    row = table(listing)[0]
    assert (row["SCHEDULE"], row["TIMEZONE"], row["SUSPEND"], row["ACTIVE"], row["LAST SCHEDULE"]) == (
        "*/5 * * * *", "<none>", "False", "0", "<none>")

    manual = unique_name("manual")
    assert kubectl.ok("create", "job", manual, f"--from=cronjob/{name}").strip() == f"job.batch/{manual} created"
    job = json.loads(kubectl.ok("get", "job", manual, "-o", "json"))
    assert job["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"] == "manual"
    owner = job["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "CronJob", name, cj["metadata"]["uid"], True)
    assert job["spec"]["template"]["spec"]["containers"][0]["command"] == ["date"]


def test_explain_job_and_cronjob(kubectl: Kubectl) -> None:
    out = kubectl.ok("explain", "job.spec.completions")
    assert out.startswith("GROUP:      batch\nKIND:       Job\nVERSION:    v1\n\nFIELD: completions <integer>\n")
    assert "Specifies the desired number of successfully finished pods" in " ".join(out.split())
    cj = kubectl.ok("explain", "cronjob.spec.jobTemplate.spec.backoffLimit")
    assert "FIELD: backoffLimit <integer>" in cj


@pytest.mark.parametrize(("spec_change", "message"), [
    pytest.param({"template": {"spec": {"restartPolicy": "Always", "containers": [{"name": "c", "image": "i"}]}}},
                 'spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"',
                 id="restartPolicy Always"),
    pytest.param({"backoffLimit": -1}, "spec.backoffLimit: Invalid value: -1: must be greater than or equal to 0",
                 id="negative backoffLimit"),
    pytest.param({"completionMode": "Sometimes"},
                 'spec.completionMode: Unsupported value: "Sometimes": supported values: "NonIndexed", "Indexed"',
                 id="completionMode"),
    # Defaulting sets completions only when parallelism is unset too.
    pytest.param({"completionMode": "Indexed", "parallelism": 2},
                 "spec.completions: Required value: when completion mode is Indexed", id="Indexed needs completions"),
    pytest.param({"podFailurePolicy": {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In",
                                                                                      "values": [0]}}]}},
                 "spec.podFailurePolicy.rules[0].onExitCodes.values[0]: Invalid value: 0: must not be 0 for the In "
                 "operator", id="podFailurePolicy In 0"),
    pytest.param({"successPolicy": {"rules": [{"succeededCount": 1}]}},
                 "spec.successPolicy: Invalid value: batch.SuccessPolicy{...}: requires indexed completion mode",
                 id="successPolicy on NonIndexed"),
    pytest.param({"completionMode": "Indexed", "completions": 3,
                  "successPolicy": {"rules": [{"succeededIndexes": "0-1", "succeededCount": 3}]}},
                 "spec.successPolicy.rules[0].succeededCount: Invalid value: 3: must be less than or equal to 2 "
                 "(the number of indexes in the specified succeededIndexes field)", id="successPolicy count"),
    pytest.param({"completionMode": "Indexed", "completions": 2, "backoffLimitPerIndex": 1, "maxFailedIndexes": 3},
                 "spec.maxFailedIndexes: Invalid value: 3: must be less than or equal to completions",
                 id="maxFailedIndexes above completions"),
])
def test_job_validation_messages(api: httpx.Client, spec_change: dict[str, object], message: str) -> None:
    body = _job(unique_name("bad"))
    spec = body["spec"]
    assert isinstance(spec, dict)
    for key, value in spec_change.items():
        if value is None:
            spec.pop(key, None)
        else:
            spec[key] = value
    resp = api.post("/apis/batch/v1/namespaces/default/jobs", json=body)
    assert resp.status_code == 422, resp.text
    assert message in resp.json()["message"]


def test_job_template_is_immutable_and_kubectl_says_so(kubectl: Kubectl, api: httpx.Client) -> None:
    name = unique_name("job")
    assert api.post("/apis/batch/v1/namespaces/default/jobs", json=_job(name)).status_code == 201
    patch = json.dumps({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "busybox:1.37"}]}}}})
    result = kubectl("patch", "job", name, "-p", patch).failed()
    assert f'The Job "{name}" is invalid: spec.template: Invalid value:' in result.stderr
    assert "field is immutable" in result.stderr
    # Parallelism is not: kubectl scale-like edits work.
    kubectl.ok("patch", "job", name, "-p", '{"spec":{"parallelism":3}}')
    assert json.loads(kubectl.ok("get", "job", name, "-o", "json"))["spec"]["parallelism"] == 3


@pytest.mark.parametrize(("schedule", "time_zone", "message"), [
    pytest.param("foo", None, "spec.schedule: Invalid value: \"foo\": expected exactly 5 fields, found 1: [foo]",
                 id="one field"),
    pytest.param("0 25 * * *", None, "end of range (25) above maximum (23): 25", id="hour 25"),
    pytest.param("@fortnightly", None, "unrecognized descriptor: @fortnightly", id="descriptor"),
    pytest.param("TZ=UTC 0 * * * *", None, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
                 id="TZ in schedule"),
    pytest.param("@hourly", "Mars/Olympus_Mons", 'spec.timeZone: Invalid value: "Mars/Olympus_Mons": unknown time '
                                                 "zone Mars/Olympus_Mons", id="unknown zone"),
    pytest.param("@hourly", "Local", "timeZone must be an explicit time zone", id="Local"),
])
def test_cronjob_validation_messages(api: httpx.Client, schedule: str, time_zone: str | None, message: str) -> None:
    spec: dict[str, object] = {"schedule": schedule, "jobTemplate": {"spec": _job("x")["spec"]}}
    if time_zone is not None:
        spec["timeZone"] = time_zone
    body = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": unique_name("cj")}, "spec": spec}
    resp = api.post("/apis/batch/v1/namespaces/default/cronjobs", json=body)
    assert resp.status_code == 422, resp.text
    assert message in resp.json()["message"]


def test_cronjob_with_a_zone_and_descriptor_is_accepted(kubectl: Kubectl, api: httpx.Client) -> None:
    name = unique_name("cj")
    body = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name},
            "spec": {"schedule": "@daily", "timeZone": "Europe/Paris", "jobTemplate": {"spec": _job("x")["spec"]}}}
    resp = api.post("/apis/batch/v1/namespaces/default/cronjobs", json=body)
    assert resp.status_code == 201, resp.text
    assert table(kubectl.ok("get", "cronjobs", name))[0]["TIMEZONE"] == "Europe/Paris"


@pytest.mark.parametrize("version", VERSIONS)
def test_describe_job_and_cronjob(kubectl_for: Callable[[str], Kubectl], version: str) -> None:
    kubectl = kubectl_for(version)
    name = unique_name("cj")
    kubectl.ok("create", "cronjob", name, "--image=busybox:1.36", "--schedule=0 3 * * *", "--", "true")
    kubectl.ok("create", "job", f"{name}-x", f"--from=cronjob/{name}")
    described = kubectl.ok("describe", "job", f"{name}-x")
    assert "Parallelism:      1" in described and "Completions:      1" in described
    assert f"Controlled By:    CronJob/{name}" in described
    # No controller runs here: status.ready is unset, so kubectl leaves out "(0 Ready)".
    assert "Pods Statuses:    0 Active / 0 Succeeded / 0 Failed" in described
    cron = kubectl.ok("describe", "cronjob", name)
    assert "Schedule:                      0 3 * * *" in cron
    assert "Concurrency Policy:            Allow" in cron


def test_api_resources_lists_batch(kubectl: Kubectl) -> None:
    out = kubectl.ok("api-resources", "--api-group=batch")
    rows = {r["NAME"]: r for r in table(out)}
    assert rows["jobs"]["APIVERSION"] == "batch/v1" and rows["jobs"]["KIND"] == "Job"
    assert rows["cronjobs"]["SHORTNAMES"] == "cj" and rows["cronjobs"]["NAMESPACED"] == "true"


def test_apply_a_job_twice_and_server_side(kubectl: Kubectl) -> None:
    """The generated selector and labels are the server's: applying the same manifest again changes nothing
    (no immutable-template error), client-side and server-side."""
    name = unique_name("applied")
    manifest = json.dumps(_job(name, completions=2))
    assert kubectl.ok("apply", "-f", "-", input=manifest).strip() == f"job.batch/{name} created"
    assert kubectl.ok("apply", "-f", "-", input=manifest).strip() == f"job.batch/{name} unchanged"
    ssa = unique_name("ssa")
    kubectl.ok("apply", "--server-side", "-f", "-", input=json.dumps(_job(ssa)))
    assert kubectl.ok("apply", "--server-side", "-f", "-", input=json.dumps(_job(ssa))).strip() == \
        f"job.batch/{ssa} serverside-applied"
    assert kubectl("diff", "-f", "-", input=manifest).returncode == 0


def test_deleting_a_job_without_a_propagation_policy_warns_and_orphans(api: httpx.Client) -> None:
    name = unique_name("orphaning")
    assert api.post("/apis/batch/v1/namespaces/default/jobs", json=_job(name)).status_code == 201
    resp = api.delete(f"/apis/batch/v1/namespaces/default/jobs/{name}")
    assert resp.status_code == 200, resp.text
    assert resp.headers.get_list("warning") == [
        ('299 - "child pods are preserved by default when jobs are deleted; set propagationPolicy=Background to '
        'remove them or set propagationPolicy=Orphan to suppress this warning"')]
    other = unique_name("background")
    assert api.post("/apis/batch/v1/namespaces/default/jobs", json=_job(other)).status_code == 201
    quiet = api.request("DELETE", f"/apis/batch/v1/namespaces/default/jobs/{other}",
                        json={"propagationPolicy": "Background"})
    assert quiet.status_code == 200 and "warning" not in quiet.headers
