"""x-kubernetes-validations: the CEL rules of a CustomResourceDefinition's schema, compiled when the definition
is written and run on every write of its objects, as apiextensions-apiserver's schema/cel does.

The CEL implementation is cel-expr-python, the CEL maintainers' Python binding of cel-cpp: a type checker,
the standard macros and functions, RE2 for `matches` (linear time: a hostile string cannot stall it), and
an iteration budget of 10,000 comprehension steps per evaluation that cannot be raised or lowered.

* Compilation (`definition_errors`): every rule of a schema node is compiled with `self` (and `oldSelf`)
  declared with the node's type, as kube's DeclType makes it (integer int, number double, boolean bool,
  string string, or bytes/duration/timestamp by format; arrays lists; additionalProperties maps), with
  kube's words: `...x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{...}:
  compilation failed: ERROR: <input>:1:6: ...`. An object with properties is declared map(string, dyn):
  cel-cpp types objects through protobuf descriptors only, so a misspelt field is refused at evaluation
  ("no such key") where kube refuses it when the definition is written.
* A rule that names `oldSelf` is a transition rule: run on update only where the old value exists
  (an item of a map-type list is matched by its keys), or always with `optionalOldSelf`, where `oldSelf`
  is an optional.
* Ratcheting: on update, a rule that is not a transition rule and fails on a value the update left as it
  was (or under an unchanged correlatable ancestor) is let through, as kube 1.30+ does (kube also warns).
* Evaluation (`RuleTree.validate`): a rule that is false gives kube's field error: `<path>: Invalid value:
  "<schema type>": <message>` (the type, not the value: kube 1.32), or Forbidden/Required/Duplicate by
  `reason`, at `fieldPath` under the node when given; `messageExpression` replaces the message when it
  evaluates to a non-empty single-line string. A rule that errs says `<error> evaluating rule: <rule>`.
* Cost: kube estimates each rule's worst case when the definition is written and meters evaluation in
  cost units; cel-cpp has neither, so nothing is refused for its estimate. What bounds evaluation: the
  request body (3 MiB), cel-cpp's 10,000 comprehension iterations per evaluation (reported with kube's
  "call cost exceeds limit" words; no further rules run), and `MAX_EVALUATIONS` per object.

Pure: plain JSON in, field errors out.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cache, lru_cache
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings

from kubelab import validation
from kubelab.validation import FieldError, GoLiteral, go_quote

REASONS = ("FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired")
# kube's RuntimeCELCostBudget is 10,000,000 cost units per object; the smallest rule costs a few units.
# kubelab cannot meter units, so it counts evaluations: a hostile object of many small items runs at most
# this many rules (80-100 us each through cel-expr-python: about a second of CPU, measured) and is then
# refused with kube's budget words.
MAX_EVALUATIONS = 10_000
# celconfig.MaxEvaluatedMessageExpressionSizeBytes
MAX_MESSAGE_BYTES = 5 * 1024
_ITERATION_BUDGET = "Iteration budget exceeded"
_COST_EXCEEDED = "operation cancelled: actual cost limit exceeded"
_BUDGET_MESSAGE = "validation failed due to running out of cost budget, no further validation rules will be run"

T = cel.Type


# --- kube's CEL library, as far as it is cheap to give ---------------------------------------------------

def _is_sorted(items: list[Any]) -> bool:
    return all(items[i] <= items[i + 1] for i in range(len(items) - 1))


def _sum(items: list[Any]) -> Any:
    total: Any = 0
    for item in items:
        total = total + item
    return total


def _min(items: list[Any]) -> Any:
    if not items:
        raise ValueError("min(list) called on empty list")
    return min(items)


def _max(items: list[Any]) -> Any:
    if not items:
        raise ValueError("max(list) called on empty list")
    return max(items)


def _index_of(items: list[Any], item: Any) -> int:
    return next((i for i, value in enumerate(items) if value == item), -1)


def _last_index_of(items: list[Any], item: Any) -> int:
    return next((i for i in range(len(items) - 1, -1, -1) if items[i] == item), -1)


def _member(name: str, ident: str, result: cel.Type, params: list[cel.Type], impl: Callable[..., Any]
            ) -> cel.FunctionDecl:
    return cel.FunctionDecl(name, [cel.Overload(ident, result, params, is_member=True, impl=impl)])


@cache
def _lists_library() -> cel.CelExtension:
    """k8s.io/apiserver/pkg/cel/library/lists.go: isSorted, sum, min, max, indexOf, lastIndexOf."""
    dyn_list = T.List(T.DYN)
    return cel.CelExtension("kubelab.k8s.lists", [
        _member("isSorted", "kubelab_list_is_sorted", T.BOOL, [dyn_list], _is_sorted),
        _member("sum", "kubelab_list_sum", T.DYN, [dyn_list], _sum),
        _member("min", "kubelab_list_min", T.DYN, [dyn_list], _min),
        _member("max", "kubelab_list_max", T.DYN, [dyn_list], _max),
        _member("indexOf", "kubelab_list_index_of", T.INT, [dyn_list, T.DYN], _index_of),
        _member("lastIndexOf", "kubelab_list_last_index_of", T.INT, [dyn_list, T.DYN], _last_index_of),
    ])


_PRIMITIVES = {"dyn": T.DYN, "int": T.INT, "double": T.DOUBLE, "bool": T.BOOL, "string": T.STRING,
               "bytes": T.BYTES, "duration": T.DURATION, "timestamp": T.TIMESTAMP}


def _type(signature: str) -> cel.Type:
    """The cel.Type of a `cel_type` signature (cel-cpp's own parser of signatures makes abstract types)."""
    if signature.startswith("list(") and signature.endswith(")"):
        return T.List(_type(signature[5:-1]))
    if signature.startswith("map(string, ") and signature.endswith(")"):
        return T.Map(T.STRING, _type(signature[12:-1]))
    return _PRIMITIVES[signature]


@lru_cache(maxsize=256)  # bounded: a definition's author chooses how many distinct types there are
def _env(self_type: str, old_self: str) -> cel.Env:
    """An environment with `self` of `self_type` and `oldSelf` as `old_self` says: "" (undeclared), "plain"
    (the same type), "dyn" (optionalOldSelf's optional, for the checker's words: cel-expr-python cannot
    declare an optional variable), or "hidden": the pair the optionalOldSelf wrapper binds oldSelf from."""
    typ = _type(self_type)
    variables: dict[str, cel.Type] = {"self": typ}
    if old_self == "plain":
        variables["oldSelf"] = typ
    elif old_self == "dyn":
        variables["oldSelf"] = T.DYN
    elif old_self == "hidden":
        variables["kubelabOldSelfPresent"] = T.BOOL
        variables["kubelabOldSelfValue"] = typ
    return cel.NewEnv(variables=variables, extensions=[
        ext_strings.ExtStrings(), ext_optional.ExtOptional(), ext_bindings.ExtBindings(), _lists_library()])


# --- types and values as kube's DeclType makes them --------------------------------------------------------

def cel_type(schema: dict[str, Any]) -> str:
    """The CEL type of a schema node (SchemaDeclType), as a signature (`list(int)`, `map(string, dyn)`)."""
    if schema.get("x-kubernetes-int-or-string") is True:
        return "dyn"
    typ = schema.get("type")
    if typ == "string":
        return {"byte": "bytes", "duration": "duration", "date": "timestamp",
                "date-time": "timestamp"}.get(str(schema.get("format")), "string")
    if typ in ("integer", "number", "boolean"):
        return {"integer": "int", "number": "double", "boolean": "bool"}[typ]
    if typ == "array":
        items = schema.get("items")
        return f"list({cel_type(items) if isinstance(items, dict) else 'dyn'})"
    if typ == "object":
        additional = schema.get("additionalProperties")
        if isinstance(additional, dict) and not _props(schema):
            return f"map(string, {cel_type(additional)})"
        return "map(string, dyn)"
    return "dyn"


def _props(schema: dict[str, Any]) -> dict[str, Any]:
    props = schema.get("properties")
    return props if isinstance(props, dict) else {}


_GO_DURATION = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def _go_duration(text: str) -> timedelta | None:
    """time.ParseDuration's grammar (`1h30m`, `-1.5s`, `0`)."""
    sign, rest = (-1, text[1:]) if text.startswith("-") else (1, text.removeprefix("+"))
    if rest == "0":
        return timedelta(0)
    seconds, pos = 0.0, 0
    for match in _GO_DURATION.finditer(rest):
        if match.start() != pos or match.group(1) in ("", "."):
            return None
        seconds += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    return timedelta(seconds=sign * seconds) if pos == len(rest) and pos else None


def to_cel(value: Any, schema: Any, *, typed: bool = True) -> Any:
    """A JSON value as CEL sees it under `schema` (UnstructuredToVal): numbers of `number` fields are doubles,
    formatted strings bytes, durations and timestamps. Under a map(string, dyn) (an object's properties)
    durations and timestamps stay strings: cel-cpp takes them from Python only where they are declared."""
    if not isinstance(schema, dict) or value is None or schema.get("x-kubernetes-int-or-string") is True:
        return value
    typ = schema.get("type")
    if typ == "number" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if typ == "string" and isinstance(value, str):
        fmt = str(schema.get("format"))
        return _formatted(value, fmt) if typed or fmt == "byte" else value
    if isinstance(value, list):
        return [to_cel(item, schema.get("items"), typed=typed) for item in value]
    if isinstance(value, dict):
        props, additional = _props(schema), schema.get("additionalProperties")
        typed = typed and not props and isinstance(additional, dict)
        return {key: to_cel(item, props.get(key, additional), typed=typed) for key, item in value.items()}
    return value


def _formatted(value: str, fmt: str) -> Any:
    try:
        if fmt == "byte":
            return base64.b64decode(value, validate=True)
        if fmt == "duration":
            parsed = _go_duration(value)
            return value if parsed is None else parsed
        if fmt == "date":
            return datetime.strptime(value, "%Y-%m-%d").replace(tzinfo=UTC)
        if fmt == "date-time":
            stamp = datetime.fromisoformat(value)
            return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)
    except (ValueError, OverflowError):
        pass  # schema validation refuses it in kube's words; the rule sees the string
    return value


def root_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """WithTypeAndObjectMeta: at the root, apiVersion, kind and metadata's name and generateName."""
    props = {**_props(schema), "apiVersion": {"type": "string"}, "kind": {"type": "string"},
             "metadata": {"type": "object", "properties": {"name": {"type": "string"},
                                                           "generateName": {"type": "string"}}}}
    return {**schema, "properties": props}


def root_value(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    return {**obj, "metadata": {k: meta[k] for k in ("name", "generateName") if k in meta}}


# --- compilation -------------------------------------------------------------------------------------------

class CompileError(Exception):
    """A rule or message expression cel-cpp refuses; the text is cel-go's issues.String() shape."""


_STATUS_SUFFIX = re.compile(r" \[[A-Z_]+\]")


def _issues(error: Exception) -> str:
    """cel-cpp's status text (`INVALID_ARGUMENT: ERROR: ... [INVALID_ARGUMENT]`) as cel-go's issues.String()."""
    text = re.sub(r"^[A-Z_]+: ", "", str(error))
    suffix = list(_STATUS_SUFFIX.finditer(text))
    return text[:suffix[-1].start()] if suffix and suffix[-1].end() == len(text) else text


@dataclass(frozen=True)
class Rule:
    source: dict[str, Any]
    program: Any
    message_program: Any
    transition: bool
    optional_old_self: bool

    @property
    def text(self) -> str:
        return str(self.source.get("rule", "")).strip()

    @property
    def error_string(self) -> str:
        """ruleErrorString: the message if any, else the rule."""
        message = str(self.source.get("message") or "").strip()
        return message or self.text


@dataclass(frozen=True)
class Compiled:
    rule: Rule | None
    rule_error: str | None = None
    message_error: str | None = None


def _compile(env: cel.Env, source: str) -> Any:
    try:
        return env.compile(source)
    except RuntimeError as exc:
        raise CompileError(_issues(exc)) from exc


def _result_is(program: Any, *names: str) -> bool:
    return str(program.return_type().name()) in names


def compile_rule(rule: dict[str, Any], schema: dict[str, Any]) -> Compiled:
    """compileRule: the program of one rule (and of its messageExpression), or kube's words for why not."""
    typ = cel_type(schema)
    text = str(rule.get("rule") or "")
    optional = rule.get("optionalOldSelf") is True
    try:
        _compile(_env(typ, ""), text)
        transition = False
    except CompileError:
        transition = True  # decided below: compiles only once oldSelf is declared
    try:
        checked = _compile(_env(typ, "dyn" if optional else "plain"), text)
    except CompileError as exc:
        return Compiled(None, rule_error=f"compilation failed: {exc}")
    if not _result_is(checked, "BOOL", "DYN", "dyn", "bool"):
        return Compiled(None, rule_error="cel expression must evaluate to a bool")
    if transition and optional:
        # oldSelf is an optional: bind it from two hidden variables (a Python value cannot be an optional).
        wrapped = ("cel.bind(oldSelf, kubelabOldSelfPresent ? optional.of(kubelabOldSelfValue) : "
                   f"optional.none(), {text})")
        try:
            program = _compile(_env(typ, "hidden"), wrapped)
        except CompileError as exc:
            return Compiled(None, rule_error=f"compilation failed: {exc}")
    else:
        program = checked
    message_program, message_error = None, None
    message_expression = str(rule.get("messageExpression") or "")
    if message_expression.strip():
        try:
            message_program = _compile(_env(typ, "plain"), message_expression)
            if not _result_is(message_program, "STRING", "string", "DYN", "dyn"):
                message_program, message_error = None, "messageExpression must evaluate to a string"
        except CompileError as exc:
            message_error = f"messageExpression compilation failed: {exc}"
    return Compiled(Rule(rule, program, message_program, transition, optional), message_error=message_error)


def rule_literal(rule: dict[str, Any]) -> GoLiteral:
    """How Go's %#v prints an apiextensions.ValidationRule (the bad value of a compile error)."""
    reason = ("(*apiextensions.FieldValueErrorReason)(nil)" if rule.get("reason") is None
              else "(*apiextensions.FieldValueErrorReason)(0xc000a1b2c0)")
    optional = ("(*bool)(nil)" if rule.get("optionalOldSelf") is None else "(*bool)(0xc000a1b2c8)")
    return GoLiteral(
        f"apiextensions.ValidationRule{{Rule:{go_quote(str(rule.get('rule') or ''))}, "
        f"Message:{go_quote(str(rule.get('message') or ''))}, "
        f"MessageExpression:{go_quote(str(rule.get('messageExpression') or ''))}, Reason:{reason}, "
        f"FieldPath:{go_quote(str(rule.get('fieldPath') or ''))}, OptionalOldSelf:{optional}}}")


_NEWLINES = re.compile(r"[\n\r]+")


def field_path(path: str, schema: dict[str, Any]) -> str | None:
    """ValidFieldPath: `.a.b` or `['a']` steps through properties (or map keys); the normalized path
    (`a.b`, `a[k]`) or None if it does not name a field of `schema`."""
    steps: list[str] = []
    node: Any = schema
    pos = 0
    token = re.compile(r"\.([^.\[\]]+)|\['((?:[^'\\]|\\.)*)'\]")
    while pos < len(path):
        match = token.match(path, pos)
        if match is None or not isinstance(node, dict):
            return None
        name = match.group(1) if match.group(1) is not None else re.sub(r"\\(.)", r"\1", match.group(2))
        if _props(node):
            if name not in _props(node):
                return None
            steps.append(f".{name}" if steps else name)
            node = _props(node)[name]
        elif isinstance(node.get("additionalProperties"), dict):
            steps.append(f"[{name}]")
            node = node["additionalProperties"]
        else:
            return None
        pos = match.end()
    return "".join(steps) if steps else None


def definition_errors(schema: dict[str, Any], path: str, *, root: bool, uncorrelatable: str | None,
                      compile_rules: bool) -> list[FieldError]:
    """The x-kubernetes-validations checks of one schema node (ValidateCustomResourceDefinitionOpenAPISchema):
    each rule's fields, then, when the schema has no other error, its compilation."""
    rules = schema.get("x-kubernetes-validations")
    if not isinstance(rules, list) or not rules:
        return []
    errs: list[FieldError] = []
    base = f"{path}.x-kubernetes-validations"
    for i, rule in enumerate(rules):
        rule = rule if isinstance(rule, dict) else {}
        at = f"{base}[{i}]"
        text, message = str(rule.get("rule") or ""), rule.get("message")
        if not text.strip():
            errs.append(validation.required(f"{at}.rule", "rule is not specified"))
        elif isinstance(message, str) and message and not message.strip():
            errs.append(validation.invalid(f"{at}.message", message, "message must be non-empty if specified"))
        elif isinstance(message, str) and _NEWLINES.search(message.strip()):
            errs.append(validation.invalid(f"{at}.message", message, "message must not contain line breaks"))
        elif _NEWLINES.search(text.strip()) and not str(message or "").strip():
            errs.append(validation.required(f"{at}.message", "message must be specified if rule contains line "
                                                             "breaks"))
        expression = rule.get("messageExpression")
        if isinstance(expression, str) and expression and not expression.strip():
            errs.append(validation.required(f"{at}.messageExpression", "messageExpression must be non-empty if "
                                                                       "specified"))
        reason = rule.get("reason")
        if reason is not None and reason not in REASONS:
            errs.append(validation.not_supported(f"{at}.reason", reason, list(REASONS)))
        fpath = rule.get("fieldPath")
        if isinstance(fpath, str) and fpath:
            if not fpath.strip():
                errs.append(validation.invalid(f"{at}.fieldPath", fpath, "fieldPath must be non-empty if specified"))
            elif _NEWLINES.search(fpath):
                errs.append(validation.invalid(f"{at}.fieldPath", fpath, "fieldPath must not contain line breaks"))
            elif field_path(fpath, schema) is None:
                errs.append(validation.invalid(f"{at}.fieldPath", fpath, "fieldPath must be a valid path"))
    if errs or not compile_rules:
        return errs
    node = root_schema(schema) if root else schema
    for i, rule in enumerate(rules):
        rule = rule if isinstance(rule, dict) else {}
        at = f"{base}[{i}]"
        result = compile_rule(rule, node)
        if result.rule_error is not None:
            errs.append(validation.invalid(f"{at}.rule", rule_literal(rule), result.rule_error))
            continue
        if result.message_error is not None:
            errs.append(validation.invalid(f"{at}.messageExpression", rule_literal(rule), result.message_error))
        assert result.rule is not None
        if result.rule.transition and uncorrelatable is not None:
            errs.append(validation.invalid(f"{at}.rule", rule["rule"], "oldSelf cannot be used on the "
                                                                         f"uncorrelatable portion of the schema "
                                                                         f"within {uncorrelatable}"))
        elif not result.rule.transition and rule.get("optionalOldSelf") is not None:
            errs.append(validation.invalid(f"{at}.optionalOldSelf", rule["optionalOldSelf"],
                                           "may not be set if oldSelf is not used in rule"))
    return errs


# --- evaluation --------------------------------------------------------------------------------------------

@dataclass
class RuleTree:
    """The compiled rules of a schema, shaped as the schema where rules are found below."""
    schema: dict[str, Any]
    rules: list[Rule] = field(default_factory=list)
    properties: dict[str, RuleTree] = field(default_factory=dict)
    additional: RuleTree | None = None
    items: RuleTree | None = None

    @property
    def type_name(self) -> str:
        return str(self.schema.get("type") or "")

    def validate(self, obj: Any, old: Any) -> list[FieldError]:
        """Every rule's field error for `obj` (and `old` on update: None on create)."""
        run = _Run()
        self._validate(obj, old, "", run, root=True, unchanged=old is not None and obj == old)
        return run.errors

    def _validate(self, obj: Any, old: Any, path: str, run: _Run, *, root: bool, unchanged: bool) -> None:
        """`old` is the correlated old value (None where there is none); `unchanged` says whether this
        value, or its nearest correlatable ancestor, equals its old value (CRD validation ratcheting)."""
        if obj is None or run.evaluations < 0:
            return
        if self.rules:
            _evaluate(self, obj, old, path, run, root=root, unchanged=unchanged)
        if isinstance(obj, dict):
            old_map = old if isinstance(old, dict) else {}
            for key, value in obj.items():
                child = self.properties.get(key, self.additional)
                if child is None:
                    continue
                old_value = old_map.get(key)
                child._validate(value, old_value, _child(path, key) if key in self.properties else f"{path}[{key}]",
                                run, root=False, unchanged=old_value is not None and value == old_value)
        elif isinstance(obj, list) and self.items is not None:
            keys = self.schema.get("x-kubernetes-list-map-keys")
            olds: dict[Any, Any] = {}
            correlatable = self.schema.get("x-kubernetes-list-type") == "map" and isinstance(keys, list)
            if correlatable and isinstance(keys, list) and isinstance(old, list):
                olds = {_map_list_key(item, keys): item for item in old}
            for i, item in enumerate(obj):
                matched = olds.get(_map_list_key(item, keys)) if olds and isinstance(keys, list) else None
                # Items of other lists have no old value; their errors ratchet with the list's.
                same = (matched is not None and item == matched) if correlatable else unchanged
                self.items._validate(item, matched, f"{path}[{i}]", run, root=False, unchanged=same)


def build(schema: Any, *, root: bool = True) -> RuleTree | None:
    """The RuleTree of a version's openAPIV3Schema, or None where no rule is found."""
    if not isinstance(schema, dict):
        return None
    node_schema = root_schema(schema) if root else schema
    tree = RuleTree(node_schema)
    for rule in schema.get("x-kubernetes-validations") or []:
        if isinstance(rule, dict) and str(rule.get("rule") or "").strip():
            compiled = compile_rule(rule, node_schema)
            if compiled.rule is not None:  # a definition with a bad rule was refused when written
                tree.rules.append(compiled.rule)
    for name, sub in _props(schema).items():
        if (child := build(sub, root=False)) is not None:
            tree.properties[name] = child
    tree.additional = build(schema.get("additionalProperties"), root=False)
    tree.items = build(schema.get("items"), root=False)
    if not tree.rules and not tree.properties and tree.additional is None and tree.items is None:
        return None
    return tree


class _OutOfBudget(Exception):
    pass


@dataclass
class _Run:
    errors: list[FieldError] = field(default_factory=list)
    evaluations: int = 0


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _map_list_key(item: Any, keys: list[str]) -> tuple[Any, ...] | None:
    if not isinstance(item, dict):
        return None
    return tuple(repr(item.get(k)) for k in keys)




def _cel_error(value: Any) -> str:
    """cel-cpp's error text in cel-go's words where they differ."""
    text = re.sub(r"^[A-Z_]+: ", "", str(value))
    if text.startswith("Key not found in map"):
        return "no such key: " + text.split(":", 1)[1].strip().strip('"')
    if text.startswith("No matching overloads found"):
        return "no such overload"
    if text == "divide by zero":
        return "division by zero"
    if text.startswith("Index error"):
        return "index out of bounds"
    return text


def _eval(program: Any, data: dict[str, Any]) -> tuple[Any, str | None]:
    """The value of a program, or the error it gave."""
    try:
        result = program.eval(data=data)
    except RuntimeError as exc:
        if _ITERATION_BUDGET in str(exc):
            raise _OutOfBudget from exc
        return None, _cel_error(exc)
    except (TypeError, ValueError, OverflowError) as exc:
        return None, str(exc)
    if str(result.type().name()) == "ERROR":
        return None, _cel_error(result.value())
    return result.value(), None


def _evaluate(node: RuleTree, obj: Any, old: Any, path: str, run: _Run, *, root: bool, unchanged: bool) -> None:
    shown = path if path else "<nil>"
    value = to_cel(root_value(obj) if root and isinstance(obj, dict) else obj, node.schema)
    old_value = (to_cel(root_value(old) if root and isinstance(old, dict) else old, node.schema)
                 if old is not None else None)
    for rule in node.rules:
        if rule.transition and old is None and not rule.optional_old_self:
            continue  # transition rules run only where there is an old value to compare with
        if run.evaluations >= MAX_EVALUATIONS:
            run.errors.append(validation.invalid(shown, node.type_name, _BUDGET_MESSAGE))
            run.evaluations = -1
            return
        run.evaluations += 1
        data: dict[str, Any] = {"self": value}
        if rule.transition and rule.optional_old_self:
            data.update(kubelabOldSelfPresent=old is not None, kubelabOldSelfValue=old_value if old is not None
                        else value)
        elif rule.transition:
            data["oldSelf"] = old_value
        try:
            result, error = _eval(rule.program, data)
        except _OutOfBudget:
            run.errors.append(validation.invalid(shown, node.type_name, f"'{_COST_EXCEEDED}': no further "
                                                 f"validation rules will be run due to call cost exceeds "
                                                 f"limit for rule: {rule.error_string}"))
            run.evaluations = -1
            return
        if error is not None:
            if error == "no such overload":
                detail = (f"'{error}': call arguments did not match a supported operator, function or macro "
                          f"signature for rule: {rule.error_string}")
            else:
                detail = f"{error} evaluating rule: {rule.error_string}"
            run.errors.append(validation.invalid(shown, node.type_name, detail))
            continue
        if result is True:
            continue
        if unchanged and not rule.transition:
            # Ratcheting (CRDValidationRatcheting, on by default since 1.30): a value the update did not
            # change may keep failing a rule added since; kube turns the error into a warning.
            continue
        if not isinstance(result, bool):
            run.errors.append(validation.invalid(shown, node.type_name, "no such overload evaluating rule: "
                                                 f"{rule.error_string}"))
            continue
        at = path
        fpath = str(rule.source.get("fieldPath") or "")
        if fpath:
            normalized = field_path(fpath, node.schema)
            if normalized:
                at = f"{path}.{normalized}" if path else normalized
        detail = _message(rule, data)
        errs_at = at if at else "<nil>"
        reason = rule.source.get("reason")
        if reason == "FieldValueForbidden":
            run.errors.append(validation.forbidden(errs_at, detail))
        elif reason == "FieldValueRequired":
            run.errors.append(validation.required(errs_at, detail))
        elif reason == "FieldValueDuplicate":
            run.errors.append(FieldError("Duplicate", errs_at, node.type_name))
        else:
            run.errors.append(validation.invalid(errs_at, node.type_name, detail))


def _message(rule: Rule, data: dict[str, Any]) -> str:
    """evalMessageExpression, falling back to ruleMessageOrDefault."""
    if rule.message_program is not None:
        message_data = {k: v for k, v in data.items() if k in ("self", "oldSelf")}
        try:
            result, error = _eval(rule.message_program, message_data)
        except _OutOfBudget:
            result, error = None, "budget"
        if error is None and isinstance(result, str):
            trimmed = result.strip()
            if trimmed and len(trimmed.encode()) <= MAX_MESSAGE_BYTES and "\n" not in trimmed:
                return trimmed
    message = str(rule.source.get("message") or "").strip()
    return message if message else f"failed rule: {rule.text}"


def walk_rules(tree: RuleTree | None) -> Iterator[Rule]:
    """Every compiled rule of a tree (for tests and metrics)."""
    if tree is None:
        return
    yield from tree.rules
    for child in tree.properties.values():
        yield from walk_rules(child)
    yield from walk_rules(tree.additional)
    yield from walk_rules(tree.items)
