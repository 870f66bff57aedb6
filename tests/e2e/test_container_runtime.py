"""Containers that run their commands (`kubelab up --dataplane netns`): exit codes, restart policies and
back-off, init containers, the environment kubelet builds, the pod's hostname, and the CRI log files,
seen through the real kubectl, the API and the files the runtime writes."""

from __future__ import annotations

import base64
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from kubelab_cluster import Cluster, wait_for

from kubeletstub import crilog


def apply(cluster: Cluster, manifest: dict[str, Any]) -> None:
    cluster.kubectl("apply", "-f", "-", input=json.dumps(manifest))


def pod_manifest(name: str, containers: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name}},
            "spec": {"containers": containers, **spec}}


def sh(name: str, script: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": "busybox", "command": ["sh", "-c", script], **extra}


def get_pod(cluster: Cluster, name: str) -> dict[str, Any]:
    return cluster.kubectl_json("get", "pod", name)  # type: ignore[no-any-return]


def status_column(cluster: Cluster, name: str) -> str:
    out = cluster.kubectl("get", "pod", name, "--no-headers").stdout.split()
    return out[2] if len(out) > 2 else ""


def log_file(cluster: Cluster, pod: dict[str, Any], container: str, restart: int = 0) -> Path:
    node = pod["spec"]["nodeName"]
    root = Path(cluster.state["nodes"][node]["podLogs"])
    meta = pod["metadata"]
    return crilog.container_log_path(root, meta["namespace"], meta["name"], meta["uid"], container, restart)


def log_lines(path: Path) -> list[crilog.LogLine]:
    return [crilog.parse_line(line) for line in path.read_bytes().splitlines()]


def container_status(pod: dict[str, Any], name: str, init: bool = False) -> dict[str, Any]:
    key = "initContainerStatuses" if init else "containerStatuses"
    return next(s for s in pod["status"].get(key) or [] if s["name"] == name)


def test_a_command_that_exits_3_fails_the_pod_with_its_exit_code_and_output(cluster: Cluster) -> None:
    apply(cluster, pod_manifest("exit3", [sh("job", "echo to stdout; echo to stderr >&2; exit 3")],
                                restartPolicy="Never"))
    pod = wait_for("exit3 Failed", lambda: (p := get_pod(cluster, "exit3"))["status"].get("phase") == "Failed" and p)
    term = container_status(pod, "job")["state"]["terminated"]
    assert (term["exitCode"], term["reason"]) == (3, "Error")
    assert term["containerID"].startswith("containerd://") and term["startedAt"] and term["finishedAt"]
    assert status_column(cluster, "exit3") == "Error"
    lines = log_lines(log_file(cluster, pod, "job"))
    assert [(ln.stream, ln.partial, ln.content) for ln in lines] == [
        ("stdout", False, b"to stdout"), ("stderr", False, b"to stderr")] or \
        sorted((ln.stream, ln.content) for ln in lines) == [("stderr", b"to stderr"), ("stdout", b"to stdout")]
    reasons = cluster.kubectl("get", "events", "--field-selector", "involvedObject.name=exit3").stdout
    assert "kubelab pulls no image" in reasons and "Created container: job" in reasons
    cluster.kubectl("delete", "pod", "exit3", "--wait=true")


def test_a_command_that_exits_0_completes_the_pod(cluster: Cluster) -> None:
    apply(cluster, pod_manifest("done0", [sh("job", "exit 0")], restartPolicy="Never"))
    pod = wait_for("done0 Succeeded",
                   lambda: (p := get_pod(cluster, "done0"))["status"].get("phase") == "Succeeded" and p)
    term = container_status(pod, "job")["state"]["terminated"]
    assert (term["exitCode"], term["reason"]) == (0, "Completed")
    assert status_column(cluster, "done0") == "Completed"
    cluster.kubectl("delete", "pod", "done0", "--wait=true")


@pytest.mark.parametrize("policy", ["OnFailure", "Always"])
def test_a_failing_container_is_restarted_then_backs_off(cluster: Cluster, policy: str) -> None:
    name = f"crash-{policy.lower()}"
    apply(cluster, pod_manifest(name, [sh("app", "echo run; exit 2")], restartPolicy=policy))

    def backing_off() -> dict[str, Any] | None:
        pod = get_pod(cluster, name)
        statuses = pod["status"].get("containerStatuses") or []
        waiting = (statuses[0].get("state") or {}).get("waiting") if statuses else None
        return pod if waiting and waiting.get("reason") == "CrashLoopBackOff" else None

    pod = wait_for(f"{name} in CrashLoopBackOff", backing_off)
    status = container_status(pod, "app")
    assert status["restartCount"] >= 1
    assert status["lastState"]["terminated"]["exitCode"] == 2
    uid = pod["metadata"]["uid"]
    assert re.fullmatch(rf"back-off (10s|20s|40s) restarting failed container=app pod={name}_default\({uid}\)",
                        status["state"]["waiting"]["message"]), status["state"]["waiting"]
    # kubectl's STATUS column (a separate read: the container may be between two back-offs, which recur)
    wait_for("CrashLoopBackOff in kubectl get", lambda: status_column(cluster, name) == "CrashLoopBackOff")
    assert pod["status"]["phase"] == "Running"
    # One log file per run: the first and the restart's.
    assert log_lines(log_file(cluster, pod, "app", 0))[0].content == b"run"
    assert log_lines(log_file(cluster, pod, "app", 1))[0].content == b"run"
    events = cluster.kubectl("get", "events", "--field-selector", f"involvedObject.name={name},reason=BackOff").stdout
    assert "Back-off restarting failed container app" in events
    cluster.kubectl("delete", "pod", name, "--wait=true")


def test_on_failure_does_not_restart_a_container_that_succeeded(cluster: Cluster) -> None:
    apply(cluster, pod_manifest("onfail-ok", [sh("app", "exit 0")], restartPolicy="OnFailure"))
    pod = wait_for("onfail-ok Succeeded",
                   lambda: (p := get_pod(cluster, "onfail-ok"))["status"].get("phase") == "Succeeded" and p)
    assert container_status(pod, "app")["restartCount"] == 0
    cluster.kubectl("delete", "pod", "onfail-ok", "--wait=true")


def test_init_containers_run_in_order_before_the_containers(cluster: Cluster, tmp_path: Path) -> None:
    # Containers see the host's filesystem: the test releases each init container with a file.
    gate = tmp_path / "gate"
    gate.mkdir()
    wait = "while [ ! -e {0} ]; do sleep 0.1; done; echo {1}"
    manifest = pod_manifest("inits", [sh("app", "echo app; sleep 3600")], restartPolicy="Never",
                            initContainers=[sh("first", wait.format(gate / "one", "first")),
                                            sh("second", wait.format(gate / "two", "second"))])
    apply(cluster, manifest)
    wait_for("Init:0/2", lambda: status_column(cluster, "inits") == "Init:0/2")
    pod = get_pod(cluster, "inits")
    assert "running" in container_status(pod, "first", init=True)["state"]
    assert container_status(pod, "second", init=True)["state"]["waiting"]["reason"] == "PodInitializing"
    initialized = next(c for c in pod["status"]["conditions"] if c["type"] == "Initialized")
    assert (initialized["status"], initialized["message"]) == ("False", "containers with incomplete status: [first second]")
    (gate / "two").touch()  # the second may not start before the first is done
    time.sleep(1)  # not synchronisation: a window in which a wrong runtime would start `second`
    assert status_column(cluster, "inits") == "Init:0/2"
    (gate / "one").touch()
    wait_for("Running", lambda: status_column(cluster, "inits") == "Running")
    pod = get_pod(cluster, "inits")
    first = container_status(pod, "first", init=True)["state"]["terminated"]
    second = container_status(pod, "second", init=True)["state"]["terminated"]
    assert (first["exitCode"], second["exitCode"]) == (0, 0)
    assert first["finishedAt"] <= second["startedAt"]
    assert log_lines(log_file(cluster, pod, "second"))[0].content == b"second"
    initialized = next(c for c in pod["status"]["conditions"] if c["type"] == "Initialized")
    assert initialized["status"] == "True"
    cluster.kubectl("delete", "pod", "inits", "--wait=true", "--grace-period=1")


def test_the_environment_is_kubelets(cluster: Cluster) -> None:
    cluster.kubectl("create", "configmap", "envcm", "--from-literal=color=blue", "--from-literal=size=9")
    cluster.kubectl("create", "secret", "generic", "envsec", "--from-literal=password=s3cret")
    cluster.kubectl("create", "service", "clusterip", "my-db", "--tcp=5432:5432")
    env = [
        {"name": "PLAIN", "value": "v"},
        {"name": "EXPANDED", "value": "$(PLAIN)-$$(PLAIN)-$(MISSING)"},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "LABEL", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
        {"name": "COLOR", "valueFrom": {"configMapKeyRef": {"name": "envcm", "key": "color"}}},
        {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "envsec", "key": "password"}}},
        {"name": "OPTIONAL", "valueFrom": {"secretKeyRef": {"name": "nope", "key": "x", "optional": True}}},
        {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}},
    ]
    container = {"name": "app", "image": "busybox", "command": ["sh", "-c", "env; echo cmd=$0", "$(COLOR)"],
                 "env": env, "workingDir": "/tmp",
                 "envFrom": [{"configMapRef": {"name": "envcm"}, "prefix": "CM_"}],
                 "resources": {"limits": {"memory": "64Mi"}}}
    apply(cluster, pod_manifest("envpod", [container], restartPolicy="Never"))
    pod = wait_for("envpod Succeeded",
                   lambda: (p := get_pod(cluster, "envpod"))["status"].get("phase") == "Succeeded" and p)
    lines = [ln.content.decode() for ln in log_lines(log_file(cluster, pod, "app"))]
    got = dict(line.split("=", 1) for line in lines if "=" in line)
    svc_ip = cluster.kubectl_json("get", "svc", "my-db")["spec"]["clusterIP"]
    kube_ip = cluster.kubectl_json("get", "svc", "kubernetes")["spec"]["clusterIP"]
    want = {
        "PLAIN": "v", "EXPANDED": "v-$(PLAIN)-$(MISSING)", "POD_NAME": "envpod", "POD_IP": pod["status"]["podIP"],
        "NODE": pod["spec"]["nodeName"], "LABEL": "envpod", "COLOR": "blue", "PASSWORD": "s3cret", "MEM": "64",
        "CM_color": "blue", "CM_size": "9", "HOSTNAME": "envpod", "PWD": "/tmp", "cmd": "blue",
        "MY_DB_SERVICE_HOST": svc_ip, "MY_DB_SERVICE_PORT": "5432", "MY_DB_SERVICE_PORT_5432_5432": "5432",
        "MY_DB_PORT": f"tcp://{svc_ip}:5432", "MY_DB_PORT_5432_TCP": f"tcp://{svc_ip}:5432",
        "MY_DB_PORT_5432_TCP_PROTO": "tcp", "MY_DB_PORT_5432_TCP_PORT": "5432", "MY_DB_PORT_5432_TCP_ADDR": svc_ip,
        "KUBERNETES_SERVICE_HOST": kube_ip, "KUBERNETES_SERVICE_PORT": "443",
    }
    assert {k: got.get(k) for k in want} == want
    assert "OPTIONAL" not in got
    cluster.kubectl("delete", "pod", "envpod", "--wait=true")

    # enableServiceLinks: false keeps only the kubernetes Service's variables.
    apply(cluster, pod_manifest("nolinks", [sh("app", "env")], restartPolicy="Never", enableServiceLinks=False))
    pod = wait_for("nolinks Succeeded",
                   lambda: (p := get_pod(cluster, "nolinks"))["status"].get("phase") == "Succeeded" and p)
    names = {ln.content.decode().split("=", 1)[0] for ln in log_lines(log_file(cluster, pod, "app"))}
    assert "KUBERNETES_SERVICE_HOST" in names and "MY_DB_SERVICE_HOST" not in names
    cluster.kubectl("delete", "pod", "nolinks", "--wait=true")


def test_a_missing_config_map_leaves_the_container_waiting(cluster: Cluster) -> None:
    env = [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "absent", "key": "k"}}}]
    apply(cluster, pod_manifest("nocm", [{**sh("app", "true"), "env": env}], restartPolicy="Never"))
    wait_for("CreateContainerConfigError", lambda: status_column(cluster, "nocm") == "CreateContainerConfigError")
    waiting = container_status(get_pod(cluster, "nocm"), "app")["state"]["waiting"]
    assert waiting["message"] == 'configmap "absent" not found'
    cluster.kubectl("create", "configmap", "absent", "--from-literal=k=v")
    wait_for("nocm Succeeded once the ConfigMap exists", lambda: status_column(cluster, "nocm") == "Completed")
    cluster.kubectl("delete", "pod", "nocm", "--wait=true")


def test_termination_message_and_fallback_to_logs(cluster: Cluster) -> None:
    containers = [sh("file", "printf 'bye now' > /dev/termination-log"),
                  sh("logs", "echo last words; exit 1", terminationMessagePolicy="FallbackToLogsOnError"),
                  sh("custom", "printf custom > /tmp/kubelab-term-msg", terminationMessagePath="/tmp/kubelab-term-msg")]
    apply(cluster, pod_manifest("term", containers, restartPolicy="Never"))
    pod = wait_for("term Failed", lambda: (p := get_pod(cluster, "term"))["status"].get("phase") == "Failed" and p)
    assert container_status(pod, "file")["state"]["terminated"]["message"] == "bye now"
    assert container_status(pod, "logs")["state"]["terminated"]["message"] == "last words\n"
    assert container_status(pod, "custom")["state"]["terminated"]["message"] == "custom"
    assert not Path("/dev/termination-log").exists(), "the host's /dev was written"
    assert not Path("/tmp/kubelab-term-msg").exists(), "the host's /tmp was written"
    cluster.kubectl("delete", "pod", "term", "--wait=true")


def test_the_pod_has_its_hostname_and_hosts_file(cluster: Cluster) -> None:
    apply(cluster, pod_manifest("named", [sh("a", "hostname; cat /etc/hosts; echo pid=$$$$"), sh("b", "hostname")],
                                restartPolicy="Never"))
    pod = wait_for("named Succeeded",
                   lambda: (p := get_pod(cluster, "named"))["status"].get("phase") == "Succeeded" and p)
    a = [ln.content.decode() for ln in log_lines(log_file(cluster, pod, "a"))]
    b = [ln.content.decode() for ln in log_lines(log_file(cluster, pod, "b"))]
    assert a[0] == b[0] == "named"
    assert "# Kubernetes-managed hosts file." in a
    assert f"{pod['status']['podIP']}\tnamed" in a
    assert a[-1] == "pid=1"  # PID 1 of a PID namespace of its own ($$$$: kubelet turns $$ into $)
    cluster.kubectl("delete", "pod", "named", "--wait=true")


def test_deleting_a_running_container_stops_it_with_sigterm(cluster: Cluster, tmp_path: Path) -> None:
    script = f"trap 'echo got TERM > {tmp_path}/term; exit 7' TERM; echo up; while true; do sleep 0.2; done"
    apply(cluster, pod_manifest("stopme", [sh("app", script)], terminationGracePeriodSeconds=20))
    pod = wait_for("stopme Running",
                   lambda: (p := get_pod(cluster, "stopme"))["status"].get("phase") == "Running" and p)
    path = log_file(cluster, pod, "app")
    wait_for("the container's first line", lambda: path.exists() and path.read_bytes())
    cluster.kubectl("delete", "pod", "stopme", "--wait=true")
    events = cluster.kubectl("get", "events", "--field-selector", "involvedObject.name=stopme,reason=Killing").stdout
    assert "Stopping container app" in events
    assert (tmp_path / "term").read_text() == "got TERM\n"


def test_each_volume_type_is_seen_by_the_command(cluster: Cluster) -> None:
    cluster.kubectl("create", "configmap", "volcm", "--from-literal=app.conf=color=red", "--from-literal=other=x")
    cluster.kubectl("create", "secret", "generic", "volsec", "--from-literal=password=hunter2")
    commands = [
        "cat /etc/config/app.conf", "echo", "cat /etc/secret/password", "echo",
        "stat -c '%a' /etc/secret/..data/password",
        "cat /etc/podinfo/name", "echo", "cat /etc/podinfo/labels", "echo",
        "cat /etc/podinfo/uid", "echo", "cat /etc/podinfo/node", "echo", "cat /etc/podinfo/mem", "echo",
        "cat /etc/proj/renamed", "echo", "cat /etc/proj/ns", "echo",
        "cat /data/only/app.conf", "echo",
        "echo scratch > /scratch/file", "cat /shared/from-init", "df -t tmpfs /mem | tail -1 | cut -c1-5",
        "readlink /etc/config/app.conf", "readlink /etc/config/..data",
        "touch /etc/config/new 2>/dev/null || echo read-only",
    ]
    script = "; ".join(commands)
    pod = pod_manifest("vols", [{
        **sh("app", script), "resources": {"limits": {"memory": "64Mi"}},
        "volumeMounts": [
            {"name": "cm", "mountPath": "/etc/config"}, {"name": "sec", "mountPath": "/etc/secret"},
            {"name": "info", "mountPath": "/etc/podinfo"}, {"name": "proj", "mountPath": "/etc/proj"},
            {"name": "cm", "mountPath": "/data/only/app.conf", "subPath": "app.conf"},
            {"name": "scratch", "mountPath": "/scratch"}, {"name": "shared", "mountPath": "/shared"},
            {"name": "mem", "mountPath": "/mem"}]}],
        restartPolicy="Never",
        initContainers=[{**sh("init", "echo hello-from-init > /shared/from-init"),
                         "volumeMounts": [{"name": "shared", "mountPath": "/shared"}]}],
        volumes=[
            {"name": "cm", "configMap": {"name": "volcm"}},
            {"name": "sec", "secret": {"secretName": "volsec", "defaultMode": 0o400}},
            {"name": "info", "downwardAPI": {"items": [
                {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
                {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                {"path": "uid", "fieldRef": {"fieldPath": "metadata.uid"}},
                {"path": "node", "fieldRef": {"fieldPath": "spec.nodeName"}},
                {"path": "mem", "resourceFieldRef": {"containerName": "app", "resource": "limits.memory",
                                                     "divisor": "1Mi"}}]}},
            {"name": "proj", "projected": {"sources": [
                {"configMap": {"name": "volcm", "items": [{"key": "other", "path": "renamed"}]}},
                {"downwardAPI": {"items": [{"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace"}}]}}]}},
            {"name": "scratch", "emptyDir": {}}, {"name": "shared", "emptyDir": {}},
            {"name": "mem", "emptyDir": {"medium": "Memory"}}])
    apply(cluster, pod)
    got = wait_for("vols Succeeded", lambda: (p := get_pod(cluster, "vols"))["status"].get("phase") == "Succeeded" and p)
    lines = [ln.content.decode() for ln in log_lines(log_file(cluster, got, "app"))]
    assert lines == ["color=red", "hunter2", "400", "vols", 'app="vols"', got["metadata"]["uid"],
                     got["spec"]["nodeName"], "64", "x", "default", "color=red",
                     "hello-from-init", "tmpfs", "..data/app.conf", lines[-2], "read-only"]
    assert lines[-2].startswith("..20")
    for host_path in ("/etc/config", "/etc/secret", "/etc/podinfo", "/etc/proj", "/data/only", "/scratch", "/shared",
                      "/mem"):
        assert not Path(host_path).exists(), f"{host_path} was created on the host"
    cluster.kubectl("delete", "pod", "vols", "--wait=true")


def test_the_service_account_token_is_projected_where_the_admission_plugin_mounts_it(cluster: Cluster) -> None:
    """The ServiceAccount admission plugin adds kube-api-access-<5>; kubelet fills it with a token bound to
    the pod (TokenRequest), the lab CA of kube-root-ca.crt and the pod's namespace."""
    script = "cd /var/run/secrets/kubernetes.io/serviceaccount && cat token; echo; cat namespace; echo; cat ca.crt"
    apply(cluster, pod_manifest("tokenpod", [sh("app", script)], restartPolicy="Never"))
    pod = wait_for("tokenpod Succeeded",
                   lambda: (p := get_pod(cluster, "tokenpod"))["status"].get("phase") == "Succeeded" and p)
    out = b"\n".join(line.content for line in log_lines(log_file(cluster, pod, "app"))).decode()
    token, namespace, ca = out.split("\n", 2)
    payload = token.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert claims["sub"] == "system:serviceaccount:default:default"
    assert claims["kubernetes.io"]["pod"] == {"name": "tokenpod", "uid": pod["metadata"]["uid"]}
    assert namespace == "default"
    published = cluster.kubectl_json("get", "configmap", "kube-root-ca.crt")["data"]["ca.crt"]
    assert ca.strip() == published.strip()
    cluster.kubectl("delete", "pod", "tokenpod", "--wait=true")


def test_a_source_the_api_does_not_have_is_a_failed_mount_not_a_crash(cluster: Cluster) -> None:
    volume = {"name": "proj", "projected": {"sources": [{"configMap": {"name": "arrives-later"}}]}}
    container = {**sh("app", "cat /etc/proj/greeting"), "volumeMounts": [{"name": "proj", "mountPath": "/etc/proj"}]}
    apply(cluster, pod_manifest("latepod", [container], restartPolicy="Never", volumes=[volume]))
    events = wait_for("FailedMount", lambda: (out := cluster.kubectl(
        "get", "events", "--field-selector", "involvedObject.name=latepod,reason=FailedMount").stdout)
        and "not found" in out and out)
    assert 'MountVolume.SetUp failed for volume "proj"' in events
    assert status_column(cluster, "latepod") == "ContainerCreating"
    waiting = get_pod(cluster, "latepod")  # kubelet writes its node's address in every status, Pending too
    node_ip = cluster.kubectl("get", "node", waiting["spec"]["nodeName"], "-o",
                              "jsonpath={.status.addresses[?(@.type=='InternalIP')].address}").stdout
    assert (waiting["status"]["hostIP"], waiting["status"]["hostIPs"]) == (node_ip, [{"ip": node_ip}])
    cluster.kubectl("create", "configmap", "arrives-later", "--from-literal=greeting=hello")
    pod = wait_for("latepod Succeeded",
                   lambda: (p := get_pod(cluster, "latepod"))["status"].get("phase") == "Succeeded" and p)
    assert [line.content for line in log_lines(log_file(cluster, pod, "app"))] == [b"hello"]
    cluster.kubectl("delete", "pod", "latepod", "--wait=true")
    cluster.kubectl("delete", "configmap", "arrives-later")


def test_a_container_printing_a_lot_is_rotated_as_kubelet_does(cluster: Cluster) -> None:
    script = f"yes {'a' * 99} | head -c 31400000; echo done"  # 30 MB in lines of 100 bytes
    apply(cluster, pod_manifest("chatty", [sh("app", script)], restartPolicy="Never"))
    pod = wait_for("chatty Succeeded",
                   lambda: (p := get_pod(cluster, "chatty"))["status"].get("phase") == "Succeeded" and p, timeout=120)
    live = log_file(cluster, pod, "app")

    def tidied() -> list[Path] | None:
        files = sorted(live.parent.iterdir())
        rotated = [f for f in files if f != live]
        return files if len(files) <= 5 and all(f.name.endswith(".gz") for f in rotated[:-1]) else None

    files = wait_for("rotated files gzipped and pruned", tidied)
    rotated = [f.name for f in files if f != live]
    assert len(rotated) >= 2, rotated
    assert all(re.fullmatch(r"0\.log\.\d{8}-\d{6}(\.gz)?", name) for name in rotated), rotated
    assert all(f.stat().st_size < 10 * 1024 * 1024 + 256 * 1024 for f in files)
    assert log_lines(live)[-1].content == b"done"
    cluster.kubectl("delete", "pod", "chatty", "--wait=true")


def test_the_built_in_server_logs_each_request_with_the_client_address_it_saw(cluster: Cluster) -> None:
    web = {"name": "web", "image": "nginx", "ports": [{"containerPort": 8080}]}
    apply(cluster, pod_manifest("weblog", [web]))
    pod = wait_for("weblog Running",
                   lambda: (p := get_pod(cluster, "weblog"))["status"].get("phase") == "Running" and p)
    ip = pod["status"]["podIP"]
    other = next(n for n in cluster.state["nodes"] if n != pod["spec"]["nodeName"])
    assert cluster.curl(other, f"http://{ip}:8080/").strip() == "weblog"
    path = log_file(cluster, pod, "web")
    line = wait_for("the request's log line", lambda: path.exists() and log_lines(path))[-1]
    client_ip = cluster.state["nodes"][other]["ip"]  # another node reaches the pod from its own address
    assert re.fullmatch(rf'{re.escape(client_ip)}:\d+ -> {re.escape(ip)}:8080 "GET / HTTP/1.1" 200',
                        line.content.decode()), line
    assert line.stream == "stdout"
    cluster.kubectl("delete", "pod", "weblog", "--wait=true")


def test_an_exec_readiness_probe_runs_inside_the_container(cluster: Cluster) -> None:
    # /ready exists only in the container's mount namespace: a probe run on the node's filesystem fails.
    container = {**sh("app", "touch /ready/ok; exec sleep 3600"),
                 "volumeMounts": [{"name": "flag", "mountPath": "/ready"}],
                 "readinessProbe": {"exec": {"command": ["test", "-f", "/ready/ok"]}, "periodSeconds": 1}}
    apply(cluster, pod_manifest("probed-in", [container], volumes=[{"name": "flag", "emptyDir": {}}]))

    def ready() -> bool:
        conditions = get_pod(cluster, "probed-in")["status"].get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    wait_for("probed-in Ready", ready)
    assert not Path("/ready").exists()
    cluster.kubectl("delete", "pod", "probed-in", "--wait=true", "--grace-period=1")


def test_a_config_map_volume_follows_its_config_map(cluster: Cluster) -> None:
    cluster.kubectl("create", "configmap", "live", "--from-literal=color=red")
    watch = 'last=; while :; do v=$(cat /etc/live/color); [ "$v" != "$last" ] && echo "$v" && last=$v; sleep 0.5; done'
    container = {**sh("app", watch), "volumeMounts": [{"name": "live", "mountPath": "/etc/live"}]}
    apply(cluster, pod_manifest("follower", [container], volumes=[{"name": "live", "configMap": {"name": "live"}}]))
    pod = wait_for("follower Running",
                   lambda: (p := get_pod(cluster, "follower"))["status"].get("phase") == "Running" and p)
    path = log_file(cluster, pod, "app")
    wait_for("red", lambda: path.exists() and [ln.content for ln in log_lines(path)] == [b"red"])
    cluster.kubectl("patch", "configmap", "live", "-p", '{"data": {"color": "blue"}}')
    # kubelet's sync period is a minute: the new value arrives within about that.
    wait_for("blue", lambda: [ln.content for ln in log_lines(path)] == [b"red", b"blue"], timeout=150)
    cluster.kubectl("delete", "pod", "follower", "--wait=true", "--grace-period=1")
