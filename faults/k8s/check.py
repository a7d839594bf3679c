"""What an API server would refuse of objects, without a cluster: each object's name, namespace and
labels as ObjectMeta's validation checks them; a custom kind against its CRD's schema (the CRDs
given: the ones your cluster runs); the core kinds against Kubernetes' own (kubernetes-validate),
strictly, as `kubectl apply`'s server-side field validation refuses an unknown field; Chaos Mesh's
admission webhooks (faults/k8s/admission); and the pods each object makes against the Pod Security
level enforced where they go (podsecurity.py): a Namespace among the objects, by its label, else
the one given for every namespace."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import jsonschema
import kubernetes_validate
import yaml

from faults.k8s import admission, names, podsecurity
from faults.k8s.pods import LABEL_KEY, LABEL_VALUE
from llmchaos import yamlfile
from llmchaos.errors import UsageError

KUBERNETES = "1.30"  # the oldest release Kubernetes still patched when the admission port was pinned
DNS_LABEL = re.compile(rf"(?=.{{1,63}}$){names.DNS_LABEL.pattern}")
DNS_SUBDOMAIN = re.compile(r"(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
CRD = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")
Schemas = dict[str, dict]  # "group/version Kind": its JSON Schema


def release(text: str) -> str:
    """A Kubernetes release kubernetes-validate has the schemas of, as MAJOR.MINOR."""
    versions = [tuple(map(int, v.split(".")[:2])) for v in kubernetes_validate.utils.all_versions()]
    oldest, newest = min(versions), max(versions)
    found = re.fullmatch(r"v?(1)\.(\d{1,3})", text)
    if not found or not oldest <= (int(found[1]), int(found[2])) <= newest:
        shown = ".".join(map(str, oldest)), ".".join(map(str, newest))
        raise UsageError(f"{text!r}: a release from {shown[0]} to {shown[1]}, as 1.30", field="--kubernetes")
    return f"{found[1]}.{found[2]}"


def read(paths: Iterable[str]) -> list[tuple[str, int, dict]]:
    """Each object in the YAML files with its file and line; a document that is not one is a UsageError."""
    out = []
    for path in paths:
        for node in yamlfile.compose_all(path):
            reader = yamlfile.Reader(path)
            obj = reader.value(node, "")
            if not isinstance(obj, dict):
                raise reader.fail(node, "", "a document must be an object (a mapping with apiVersion and kind)")
            out.append((path, yamlfile.line(node), obj))
    return out


def crds(paths: Iterable[str]) -> Schemas:
    """The JSON Schema of each served version of the CRDs in `paths` (YAML files, or folders of them;
    a `kubectl get crd -o yaml` List too); anything else in them is a UsageError naming file and line."""
    out: Schemas = {}
    for given in paths:
        files = sorted(Path(given).glob("*.y*ml")) if Path(given).is_dir() else [Path(given)]
        if not files:
            raise UsageError("a folder with no .yaml file: no CRD", file=given)
        for path in files:
            for node in yamlfile.compose_all(str(path)):
                for crd, at in _definitions(str(path), node):
                    for version in crd["spec"]["versions"]:
                        if version.get("served"):
                            out[f"{crd['spec']['group']}/{version['name']} {crd['spec']['names']['kind']}"] = _schema(
                                crd, version, str(path), at
                            )
    return out


def _definitions(path: str, node: yaml.Node) -> list[tuple[dict, int]]:
    """The CRDs of one document (a List's items), each with its line."""
    reader = yamlfile.Reader(path)
    doc = reader.value(node, "")
    if isinstance(doc, dict) and doc.get("kind") == "List":
        items = reader.mapping(node, "").get("items")
        if items is None or not isinstance(items[1], yaml.SequenceNode):
            raise reader.fail(node, "items", "a List must have its items")
        return [d for item in items[1].value for d in _definitions(path, item)]
    if not isinstance(doc, dict) or (doc.get("apiVersion"), doc.get("kind")) != CRD:
        raise reader.fail(node, "kind", f"not a {CRD[0]} {CRD[1]}")
    spec = doc.get("spec")
    if not (
        isinstance(spec, dict)
        and isinstance(spec.get("group"), str)
        and isinstance(spec.get("names"), dict)
        and isinstance(spec["names"].get("kind"), str)
        and isinstance(spec.get("versions"), list)
        and all(isinstance(v, dict) and isinstance(v.get("name"), str) for v in spec["versions"])
    ):
        raise reader.fail(node, "spec", "a CRD must have its group, names.kind and named versions")
    return [(doc, yamlfile.line(node))]


def _schema(crd: dict, version: dict, path: str, line: int) -> dict:
    schema = (version.get("schema") or {}).get("openAPIV3Schema")
    if not isinstance(schema, dict):
        raise UsageError(f"version {version.get('name')!r} has no openAPIV3Schema", file=path, line=line, field="spec")
    out = _convert(schema)
    assert isinstance(out, dict)  # a mapping converts to a mapping
    api = f"{crd['spec']['group']}/{version['name']}"
    out.setdefault("properties", {})
    out["properties"] |= {"apiVersion": {"const": api}, "kind": {"const": crd["spec"]["names"]["kind"]}}
    out["required"] = sorted({*out.get("required", []), "apiVersion", "kind", "metadata"})
    return out


def _convert(node: object) -> object:
    """An OpenAPI v3 schema of a CRD as JSON Schema: `nullable`, int-or-string and list sets in their
    JSON Schema meaning, and an object with properties closed to others (unless it keeps unknown fields).
    By hand: no library reads a CRD's structural schema as the API server does."""
    if not isinstance(node, dict):
        return node
    out: dict = {}
    for key, value in node.items():
        if key.startswith("x-kubernetes-") or key in ("nullable", "description"):
            continue
        if key == "properties":
            out[key] = {name: _convert(sub) for name, sub in value.items()}
        elif key in ("items", "not") or (key == "additionalProperties" and isinstance(value, dict)):
            out[key] = _convert(value)
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = [_convert(sub) for sub in value]
        else:
            out[key] = value
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    if node.get("x-kubernetes-list-type") == "set":
        out["uniqueItems"] = True
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def _meta(obj: dict) -> list[str]:
    meta, out = obj.get("metadata"), []
    if not isinstance(meta, dict):
        return ["metadata: Required value"]
    name = meta.get("name")
    if not isinstance(name, str) or not DNS_SUBDOMAIN.fullmatch(name):
        out.append(f"metadata.name: Invalid value: {name!r}: not a DNS subdomain (RFC 1123)")
    namespace = meta.get("namespace")
    if namespace is not None and not (isinstance(namespace, str) and DNS_LABEL.fullmatch(namespace)):
        out.append(f"metadata.namespace: Invalid value: {namespace!r}: not a DNS label (RFC 1123)")
    labels = meta.get("labels") or {}
    for key, value in labels.items() if isinstance(labels, dict) else ():
        if not LABEL_KEY.fullmatch(str(key)):
            out.append(f"metadata.labels: Invalid value: {key!r}: not a label key")
        if not isinstance(value, str) or not LABEL_VALUE.fullmatch(value):
            out.append(f"metadata.labels: Invalid value: {value!r}: not a label value")
    return out


def problems(obj: dict, schemas: Schemas, kubernetes: str = KUBERNETES) -> list[str]:
    """Every reason the API server would refuse `obj`, each naming the field; [] when it would take it.
    As the server goes: the schema and ObjectMeta first, the validating webhooks only for an object
    that passed them."""
    api, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api, str) or not isinstance(kind, str):
        return ["apiVersion, kind: Required value"]
    out = _meta(obj) + _schema_errors(obj, api, kind, schemas, kubernetes)
    return out or admission.errors(obj)


def enforced(objects: Iterable[dict], default: str | None) -> dict[str, str]:
    """The Pod Security level each namespace enforces: the Namespaces' own labels among `objects`
    (a missing or unknown one is `privileged`, as the admission reads it), `default` for any other
    (a key "" for them), nothing when there is none."""
    out = {"": default} if default else {}
    for o in objects:
        if o.get("kind") == "Namespace" and isinstance(o.get("metadata"), dict):
            level = (o["metadata"].get("labels") or {}).get(podsecurity.LABEL, "privileged")
            out[o["metadata"].get("name", "")] = level if level in podsecurity.LEVELS else "privileged"
    return out


def pod_security(obj: dict, levels: dict[str, str]) -> list[str]:
    """What the pods `obj` makes violate of the level their namespace enforces."""
    meta = obj.get("metadata")
    namespace = meta.get("namespace", "default") if isinstance(meta, dict) else "default"
    level = levels.get(str(namespace), levels.get(""))
    if level is None or level == "privileged":
        return []
    out = []
    for where, pod, notes in podsecurity.pod_specs(obj):
        found = podsecurity.violations(pod, level, notes)
        if found:
            out.append(f'{where}: violates PodSecurity "{level}:latest": {", ".join(found)}')
    return out


def _schema_errors(obj: dict, api: str, kind: str, schemas: Schemas, kubernetes: str) -> list[str]:
    schema = schemas.get(f"{api} {kind}")
    if schema is not None:
        validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
        return [f"{_where(e.absolute_path)}: {e.message}" for e in validator.iter_errors(obj)]
    try:
        kubernetes_validate.validate(obj, kubernetes, strict=True)
    except kubernetes_validate.SchemaNotFoundError:
        custom = "." in api.partition("/")[0]  # a core group has no dot: apps, batch, v1's ""
        return [f"no CRD given for {api} {kind} (--crds)" if custom else f"Kubernetes {kubernetes} has no {api} {kind}"]
    except kubernetes_validate.ValidationError as e:
        return [f"{_where(e.absolute_path)}: {e.message}"]
    return []


def _where(path: Iterable[object]) -> str:
    return ".".join(map(str, path)) or "(the object)"
