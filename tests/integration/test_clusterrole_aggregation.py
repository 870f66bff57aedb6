"""The clusterrole-aggregation controller against a real API server and etcd: a ClusterRole labelled
`rbac.authorization.k8s.io/aggregate-to-view: "true"` adds its rules to the bootstrap `view` role (and,
through view's own label, to `edit` and `admin`), a user's own aggregated ClusterRole follows the roles its
selector picks, and a picked role's change or deletion is followed too."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from apitools import unique_name
from test_workload_controllers import wait_for

from controllers.clusterroleaggregation import ClusterRoleAggregationController
from kubelab import kinds
from kubelab.client import ApiClient, Informer
from kubelab.rbacaggregation import aggregated_rules

ROLES = "/apis/rbac.authorization.k8s.io/v1/clusterroles"
WIDGETS = {"verbs": ["get", "list"], "apiGroups": ["example.com"], "resources": ["widgets"]}


def test_aggregated_rules_selector_by_selector_in_name_order() -> None:
    def role(name: str, labels: dict[str, str], rules: list[Any]) -> dict[str, Any]:
        return {"metadata": {"name": name, "labels": labels}, "rules": rules}
    a, b = {"verbs": ["get"], "apiGroups": [""], "resources": ["a"]}, {"verbs": ["get"], "apiGroups": [""], "resources": ["b"]}
    target = {"metadata": {"name": "t", "labels": {"x": "1"}}, "rules": [b],
              "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"y": "1"}}, {"matchLabels": {"x": "1"}}]}}
    roles = [role("z", {"x": "1"}, [a, b]), role("m", {"y": "1"}, [b]), role("c", {"x": "1"}, [a]), target]
    assert aggregated_rules(target, roles) == [b, a]  # y's first (m), then x's in name order (c, z); never t itself
    assert aggregated_rules({"metadata": {"name": "plain"}}, roles) is None
    bad = {"metadata": {"name": "t"}, "aggregationRule": {"clusterRoleSelectors": [{"matchExpressions": [
        {"key": "x", "operator": "Bogus"}]}]}}
    assert aggregated_rules(bad, roles) == []


async def test_the_controller_keeps_aggregated_roles_current(private_api: str) -> None:
    api = ApiClient(private_api, user_agent="kubelab-test-aggregation")
    controller = ClusterRoleAggregationController(api, Informer(api, kinds.CLUSTERROLES))
    tasks = [asyncio.create_task(controller.roles.run()), asyncio.create_task(controller.run())]
    extra, mine = unique_name("widget-viewer"), unique_name("mine")
    try:
        async with httpx.AsyncClient(base_url=private_api, timeout=10) as http:
            async def rules_of(name: str) -> list[Any]:
                return list((await http.get(f"{ROLES}/{name}")).json().get("rules") or [])

            made = await http.post(ROLES, json={"metadata": {"name": extra, "labels": {
                "rbac.authorization.k8s.io/aggregate-to-view": "true", "team": extra}}, "rules": [WIDGETS]})
            assert made.status_code == 201, made.text
            for name in ("view", "edit", "admin"):
                async def has_widgets(name: str = name) -> bool:
                    return WIDGETS in await rules_of(name)
                await wait_for(f"{name} to aggregate the widgets rule", has_widgets)
            assert {"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["namespaces"]} in \
                await rules_of("view")  # the bootstrap rules stay
            made = await http.post(ROLES, json={"metadata": {"name": mine}, "aggregationRule": {
                "clusterRoleSelectors": [{"matchLabels": {"team": extra}}]}})
            assert made.status_code == 201, made.text

            async def mine_is(rules: list[Any]) -> bool:
                return await rules_of(mine) == rules
            await wait_for("the user's aggregated role", lambda: mine_is([WIDGETS]))
            watch = {**WIDGETS, "verbs": ["watch"]}
            patched = await http.patch(f"{ROLES}/{extra}", json={"rules": [WIDGETS, watch]},
                                       headers={"Content-Type": "application/merge-patch+json"})
            assert patched.status_code == 200, patched.text
            await wait_for("the change followed", lambda: mine_is([WIDGETS, watch]))
            assert (await http.delete(f"{ROLES}/{extra}")).status_code == 200
            await wait_for("the deletion followed", lambda: mine_is([]))

            async def view_without_widgets() -> bool:
                return WIDGETS not in await rules_of("view")
            await wait_for("view without the widgets rule", view_without_widgets)
            await http.delete(f"{ROLES}/{mine}")
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await api.close()
