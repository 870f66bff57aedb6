"""The RBAC authorizer, pure: what Roles, ClusterRoles and their bindings let a user do, as
kube-apiserver's plugin/pkg/auth/authorizer/rbac decides it.

A user's rules are those of every ClusterRoleBinding whose subjects name it (by user name, one of its
groups, or its service account), then, for a request in a namespace, those of every RoleBinding there
that does (a ServiceAccount subject without a namespace means the binding's). A rule allows a request
when its verbs, API groups, resources (`pods/log` for a subresource, `*/scale` for a subresource of any
resource, `*` for all) and resource names (none: all) all match, or, for a path outside the API, when its
verbs and nonResourceURLs (`*` or a trailing `*` as a prefix) do. A binding whose role is missing adds
nothing, and the refusal then says so (`RBAC: clusterrole.rbac.authorization.k8s.io "x" not found`), as
kube's ruleCheckingVisitor reports it.

Escalation prevention (`covers`) is validation.ConfirmNoEscalation's check: every rule asked for, broken
down into one verb on one group, resource and name, must be allowed by one of the user's own rules.

The policy comes in as a `Policy` snapshot (rbacsource.py keeps one current from the watch cache). The
snapshot indexes its bindings by the user names and groups their subjects can name when it is built, so a
request visits only the bindings that name it (a handful) rather than every binding in the cluster and the
namespace: `visit_rules` yields exactly what the plain walk (`walk_rules`, kube's VisitRulesFor) yields, in
the same order, which is the order that decides the reason of a refusal.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

from kubelab import validation
from kubelab.tokenfile import UserInfo

from .requestinfo import RequestInfo

SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
Rule = Mapping[str, Any]  # a PolicyRule as JSON (verbs, apiGroups, resources, resourceNames, nonResourceURLs)
SubjectKey = tuple[str, str]  # ("user", name) or ("group", name): what a subject names, as an index key
BindingIndex = Mapping[SubjectKey, Sequence[int]]  # key -> positions of the bindings naming it, ascending


@dataclass(frozen=True)
class Policy:
    """Every Role, ClusterRole and binding, as stored (JSON), indexed for the authorizer."""

    cluster_roles: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    roles: Mapping[tuple[str, str], Mapping[str, Any]] = field(default_factory=dict)  # (namespace, name)
    cluster_role_bindings: Sequence[Mapping[str, Any]] = ()
    role_bindings: Mapping[str, Sequence[Mapping[str, Any]]] = field(default_factory=dict)  # by namespace
    # Built from the two above (__post_init__): who each binding can name, per binding list.
    cluster_index: BindingIndex = field(init=False, repr=False, compare=False)
    namespace_index: Mapping[str, BindingIndex] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # A frozen snapshot: the index is part of building it, never updated afterwards.
        object.__setattr__(self, "cluster_index", index_bindings(self.cluster_role_bindings, ""))
        object.__setattr__(self, "namespace_index", {namespace: index_bindings(bindings, namespace)
                                                     for namespace, bindings in self.role_bindings.items()})

    @classmethod
    def of(cls, *, cluster_roles: Iterable[Mapping[str, Any]], roles: Iterable[Mapping[str, Any]],
           cluster_role_bindings: Iterable[Mapping[str, Any]], role_bindings: Iterable[Mapping[str, Any]]) -> Policy:
        by_namespace: dict[str, list[Mapping[str, Any]]] = {}
        for binding in role_bindings:
            by_namespace.setdefault(_meta(binding).get("namespace") or "", []).append(binding)
        return cls(cluster_roles={_meta(r).get("name") or "": r for r in cluster_roles},
                   roles={(_meta(r).get("namespace") or "", _meta(r).get("name") or ""): r for r in roles},
                   cluster_role_bindings=tuple(cluster_role_bindings), role_bindings=by_namespace)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _strings(rule: Rule, key: str) -> Sequence[str]:
    values = rule.get(key)
    return [v for v in values if isinstance(v, str)] if isinstance(values, list) else ()


# --- rule matching (rbacv1helpers) -----------------------------------------------------------------

def verb_matches(rule: Rule, verb: str) -> bool:
    verbs = _strings(rule, "verbs")
    return "*" in verbs or verb in verbs


def api_group_matches(rule: Rule, group: str) -> bool:
    groups = _strings(rule, "apiGroups")
    return "*" in groups or group in groups


def resource_matches(rule: Rule, combined: str, subresource: str) -> bool:
    """`*`, the resource itself (`pods`, or `pods/log` for a subresource), or `*/<subresource>`."""
    for resource in _strings(rule, "resources"):
        if resource in ("*", combined):
            return True
        if subresource and resource == f"*/{subresource}":
            return True
    return False


def resource_name_matches(rule: Rule, name: str) -> bool:
    names = _strings(rule, "resourceNames")
    return not names or name in names


def non_resource_url_matches(rule: Rule, path: str) -> bool:
    for url in _strings(rule, "nonResourceURLs"):
        if url in ("*", path) or (url.endswith("*") and path.startswith(url[:-1])):
            return True
    return False


def rule_allows(rule: Rule, info: RequestInfo) -> bool:
    """RuleAllows: whether one rule allows the request `info` describes."""
    if not verb_matches(rule, info.verb):
        return False
    if not info.is_resource:
        return non_resource_url_matches(rule, info.path)
    combined = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
    return (api_group_matches(rule, info.group) and resource_matches(rule, combined, info.subresource)
            and resource_name_matches(rule, info.name))


# --- subjects ----------------------------------------------------------------------------------------

def applies_to(subject: Mapping[str, Any], user: UserInfo, namespace: str) -> bool:
    """appliesToUser: `namespace` is the binding's ("" for a ClusterRoleBinding)."""
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return user.name == name
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        account_namespace = subject.get("namespace") or namespace
        return bool(account_namespace) and user.name == f"{SERVICE_ACCOUNT_PREFIX}{account_namespace}:{name}"
    return False


def binds(binding: Mapping[str, Any], user: UserInfo, namespace: str) -> bool:
    subjects = binding.get("subjects")
    return isinstance(subjects, list) and any(isinstance(s, Mapping) and applies_to(s, user, namespace)
                                              for s in subjects)


def subject_key(subject: Mapping[str, Any], namespace: str) -> SubjectKey | None:
    """The one user name or group `subject` can name (None: it names nobody), so that applies_to(subject,
    user, namespace) holds exactly when the key is ("user", user.name) or ("group", g) for a g in
    user.groups. A ServiceAccount names the user `system:serviceaccount:<namespace>:<name>`."""
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return ("user", name) if isinstance(name, str) else None
    if kind == "Group":
        return ("group", name) if isinstance(name, str) else None
    if kind == "ServiceAccount":
        account_namespace = subject.get("namespace") or namespace
        return ("user", f"{SERVICE_ACCOUNT_PREFIX}{account_namespace}:{name}") if account_namespace else None
    return None


def index_bindings(bindings: Sequence[Mapping[str, Any]], namespace: str) -> dict[SubjectKey, tuple[int, ...]]:
    """Each key any subject of `bindings` names -> the positions of those bindings, ascending and once each."""
    index: dict[SubjectKey, list[int]] = {}
    for position, binding in enumerate(bindings):
        subjects = binding.get("subjects")
        if not isinstance(subjects, list):
            continue
        for subject in subjects:
            # type() first: stored subjects are dicts, and an ABC isinstance costs more than the rest here.
            if type(subject) is dict or isinstance(subject, Mapping):
                key = subject_key(subject, namespace)
                if key is not None:
                    positions = index.setdefault(key, [])
                    if not positions or positions[-1] != position:
                        positions.append(position)
    return {key: tuple(positions) for key, positions in index.items()}


def naming(index: BindingIndex, user: UserInfo) -> Sequence[int]:
    """The positions of the bindings that name `user` (by name, a group, or its service account), ascending:
    the order the walk meets them in."""
    found = [positions for key in (("user", user.name), *(("group", g) for g in user.groups))
             if (positions := index.get(key))]
    if not found:
        return ()
    if len(found) == 1:
        return found[0]
    return sorted(set(chain.from_iterable(found)))


# --- the authorizer ----------------------------------------------------------------------------------

def role_rules(policy: Policy, ref: Mapping[str, Any], namespace: str) -> tuple[Sequence[Rule], str]:
    """GetRoleReferenceRules: the rules a binding's roleRef names, or the error when it names nothing."""
    kind, name = ref.get("kind"), str(ref.get("name") or "")
    if kind == "ClusterRole":
        role = policy.cluster_roles.get(name)
        if role is None:
            return (), f'clusterrole.rbac.authorization.k8s.io "{name}" not found'
    elif kind == "Role" and namespace:
        role = policy.roles.get((namespace, name))
        if role is None:
            return (), f'role.rbac.authorization.k8s.io "{name}" not found'
    else:
        return (), f"unsupported role reference kind: {kind!r}"
    rules = role.get("rules")
    return [r for r in rules if isinstance(r, Mapping)] if isinstance(rules, list) else [], ""


def visit_rules(policy: Policy, user: UserInfo, namespace: str) -> Iterator[tuple[Sequence[Rule], str]]:
    """VisitRulesFor: (rules, "") per binding of the user, cluster bindings first, then the namespace's;
    ((), error) for a binding whose role is missing. Only the bindings the snapshot's index says name the
    user are looked at; what comes out is what walk_rules yields."""
    for position in naming(policy.cluster_index, user):
        yield role_rules(policy, policy.cluster_role_bindings[position].get("roleRef") or {}, "")
    if namespace:
        bindings = policy.role_bindings.get(namespace, ())
        for position in naming(policy.namespace_index.get(namespace) or {}, user):
            yield role_rules(policy, bindings[position].get("roleRef") or {}, namespace)


def walk_rules(policy: Policy, user: UserInfo, namespace: str) -> Iterator[tuple[Sequence[Rule], str]]:
    """VisitRulesFor as kube writes it: every binding walked, each asked whether it names the user. The
    reference the index (visit_rules) is tested against; too slow to serve (every request would look at
    every binding)."""
    for binding in policy.cluster_role_bindings:
        if binds(binding, user, ""):
            yield role_rules(policy, binding.get("roleRef") or {}, "")
    if namespace:
        for binding in policy.role_bindings.get(namespace, ()):
            if binds(binding, user, namespace):
                yield role_rules(policy, binding.get("roleRef") or {}, namespace)


def authorize(policy: Policy, user: UserInfo, info: RequestInfo) -> tuple[bool, str]:
    """RBACAuthorizer.Authorize: allowed at the first rule that allows; otherwise no opinion, with the
    missing roles met on the way as the reason (`RBAC: ...`, "" when there were none)."""
    return verdict_of(visit_rules(policy, user, info.namespace), info)


def verdict_of(visits: Iterable[tuple[Sequence[Rule], str]], info: RequestInfo) -> tuple[bool, str]:
    """ruleCheckingVisitor over `visits` (visit_rules' or walk_rules' output): stops at the first rule that
    allows, so a missing role met after it is never reported."""
    problems: list[str] = []
    for rules, problem in visits:
        if problem:
            problems.append(problem)
        elif any(rule_allows(rule, info) for rule in rules):
            return True, ""
    if not problems:
        return False, ""
    return False, "RBAC: " + aggregate(problems)


def aggregate(messages: Sequence[str]) -> str:
    """utilerrors.NewAggregate(errs).Error(): one message as it is; several once each, in order, between
    brackets (two bindings of one missing role report it once, without brackets)."""
    unique = list(dict.fromkeys(messages))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


def rules_for(policy: Policy, user: UserInfo, namespace: str) -> tuple[list[Rule], list[str]]:
    """RulesFor: every rule the user has in `namespace` ("" for the cluster's), and the missing roles."""
    rules: list[Rule] = []
    problems: list[str] = []
    for found, problem in visit_rules(policy, user, namespace):
        rules.extend(found)
        if problem:
            problems.append(problem)
    return rules, problems


# --- escalation prevention -----------------------------------------------------------------------------

def breakdown(rule: Rule) -> list[dict[str, list[str]]]:
    """BreakdownRule: one rule per verb and group, resource and name (or verb and URL)."""
    out: list[dict[str, list[str]]] = []
    for group in _strings(rule, "apiGroups"):
        for resource in _strings(rule, "resources"):
            names = _strings(rule, "resourceNames")
            for verb in _strings(rule, "verbs"):
                if names:
                    out += [{"verbs": [verb], "apiGroups": [group], "resources": [resource], "resourceNames": [n]}
                            for n in names]
                else:
                    out.append({"verbs": [verb], "apiGroups": [group], "resources": [resource]})
    for url in _strings(rule, "nonResourceURLs"):
        out += [{"verbs": [verb], "nonResourceURLs": [url]} for verb in _strings(rule, "verbs")]
    return out


def _has_all(have: Sequence[str], want: Sequence[str]) -> bool:
    return "*" in have or all(w in have for w in want)


def rule_covers(owner: Rule, sub: Rule) -> bool:
    """ruleCovers: whether one of the user's rules covers one broken-down rule."""
    if not _has_all(_strings(owner, "verbs"), _strings(sub, "verbs")):
        return False
    if not _has_all(_strings(owner, "apiGroups"), _strings(sub, "apiGroups")):
        return False
    urls = _strings(owner, "nonResourceURLs")
    for want in _strings(sub, "nonResourceURLs"):
        if not any(u in ("*", want) or (u.endswith("*") and want.startswith(u[:-1])) for u in urls):
            return False
    owner_resources = _strings(owner, "resources")
    for want in _strings(sub, "resources"):
        if not any(_resource_covers(have, want) for have in owner_resources):
            return False
    owner_names = _strings(owner, "resourceNames")
    return not owner_names or all(n in owner_names for n in _strings(sub, "resourceNames"))


def _resource_covers(have: str, want: str) -> bool:
    if have in ("*", want):
        return True
    # `*/scale` covers `deployments/scale`; `pods/*` covers `pods/log` (resourceCoversAll).
    if have.startswith("*/") and "/" in want and want.split("/", 1)[1] == have[2:]:
        return True
    return have.endswith("/*") and want.startswith(have[:-1])


def uncovered(owner_rules: Sequence[Rule], requested: Iterable[Rule]) -> list[dict[str, list[str]]]:
    """Covers: the broken-down rules of `requested` that none of `owner_rules` covers (empty: no escalation)."""
    missing: list[dict[str, list[str]]] = []
    for rule in requested:
        for sub in breakdown(rule):
            if not any(rule_covers(owner, sub) for owner in owner_rules):
                missing.append(sub)
    return missing


def compact(rules: Sequence[Mapping[str, list[str]]]) -> list[dict[str, list[str]]]:
    """CompactRules: broken-down rules that differ only in their verb, as one rule with all the verbs."""
    merged: dict[tuple[str, ...], dict[str, list[str]]] = {}
    out: list[dict[str, list[str]]] = []
    for rule in rules:
        if rule.get("resourceNames") or rule.get("nonResourceURLs"):
            out.append(dict(rule))
            continue
        key = (*rule.get("apiGroups", []), "/", *rule.get("resources", []))
        if key in merged:
            merged[key]["verbs"] = [*merged[key]["verbs"], *rule.get("verbs", [])]
        else:
            merged[key] = {k: list(v) for k, v in rule.items()}
            out.append(merged[key])
    return out


def compact_string(rule: Mapping[str, list[str]]) -> str:
    """rbacv1helpers.CompactString, as the escalation message lists each missing rule:
    `{APIGroups:["apps"], Resources:["deployments"], Verbs:["get" "list"]}` (Go's %q of a []string)."""
    parts = []
    for label, key in (("APIGroups", "apiGroups"), ("Resources", "resources"), ("ResourceNames", "resourceNames"),
                       ("NonResourceURLs", "nonResourceURLs"), ("Verbs", "verbs")):
        values = rule.get(key)
        if values:
            parts.append(f"{label}:[" + " ".join(validation.go_quote(v) for v in values) + "]")
    return "{" + ", ".join(parts) + "}"


def escalation_message(user: UserInfo, missing: Sequence[Mapping[str, list[str]]], problems: Sequence[str]) -> str:
    """ConfirmNoEscalation's refusal: the user, its groups, and each missing rule on its own line, sorted."""
    groups = "[" + " ".join(validation.go_quote(g) for g in user.groups) + "]"
    lines = sorted({compact_string(rule) for rule in compact(missing)})
    message = (f"user {validation.go_quote(user.name)} (groups={groups}) is attempting to grant RBAC permissions not "
               "currently held:\n" + "\n".join(lines))
    if problems:
        message += "; resolution errors: [" + " ".join(problems) + "]"
    return message


__all__ = ["Policy", "aggregate", "applies_to", "authorize", "breakdown", "compact", "compact_string", "escalation_message",
           "index_bindings", "naming", "rule_allows", "rules_for", "subject_key", "uncovered", "verdict_of", "visit_rules",
           "walk_rules"]
