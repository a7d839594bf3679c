"""`llmchaos k8s render|render-load|wait|collect|gpu|check`."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from faults.k8s import names
from faults.k8s.podsecurity import LEVELS
from llmchaos.cli import Subparsers, positive
from llmchaos.errors import UsageError
from llmchaos.units import YEAR_S

GPU_ACCESS = ("driver-root", "runtime-class")  # how the GPU Job reaches the driver (faults/k8s/gpu.py)
IMAGE = "llmchaos:0.1.0"  # compose/Dockerfile's, as docker-compose.yml tags it
# RFC 1123 subdomain: a node's name, a StorageClass's
NODE = re.compile(r"(?=.{1,253}$)[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*")


def register(sub: Subparsers) -> None:
    p = sub.add_parser("k8s", help="a schedule as Chaos Mesh objects, the load as Locust on a cluster")
    ksub = p.add_subparsers(dest="k8s_command", required=True)
    r = ksub.add_parser("render", help="a schedule as one Chaos Mesh Workflow and the objects its steps need")
    r.add_argument("schedule")
    r.add_argument("--namespace", default="default")
    r.add_argument("--selector", default="", help="the server's pods, KEY=VALUE[,KEY=VALUE] (netem, tbf, docker)")
    r.add_argument("--replica-selector", default="", help="a router's replicas: one StatefulSet's pods (replica)")
    r.add_argument("--prefill-selector", default="", help="a disaggregated cluster's prefill pods (kv_link)")
    r.add_argument("--decode-selector", default="", help="its decode pods (kv_link)")
    r.add_argument("--gpu-namespace", default="llmchaos-gpu", help="the GPU Jobs' own (Pod Security privileged)")
    r.add_argument("--gpu-access", choices=GPU_ACCESS, default=GPU_ACCESS[0], help="how the GPU Job reaches the driver")
    r.add_argument("--driver-root", default="auto", help="driver-root: the driver's root on the node (auto: found)")
    r.add_argument("--upstream", default="", help="the model's Service URL, behind the SSE proxy (sse)")
    r.add_argument("--image", default=IMAGE, help="the llmchaos image (compose/Dockerfile) in your registry")
    r.add_argument("--run", default=None, help="the Workflow's name (default: the file's name and the time's)")
    r.add_argument("--duration", type=positive(float, most=YEAR_S), default=None, help="seconds (needed with 'every')")
    r.add_argument("--out", default=None, help="write DIR/setup.yaml and DIR/run.yaml (default: stdout)")
    r.set_defaults(func=run_render)

    lo = ksub.add_parser("render-load", help="Locust master and workers (or a LocustTest) on a cluster")
    lo.add_argument("--host", required=True, help="the target's URL from inside the cluster")
    lo.add_argument("--name", default="llmchaos-load")
    lo.add_argument("--namespace", default="default")
    lo.add_argument("--image", default=IMAGE)
    lo.add_argument("--workers", type=positive(int), default=2)
    for option in ("schedule", "slo", "guard"):
        lo.add_argument(f"--{option}", default=None, help=f"the load test's --{option} file, put in a ConfigMap")
    lo.add_argument("--push-gateway", default="", help="the Pushgateway's URL from inside the cluster")
    lo.add_argument("--results-size", default="1Gi", help="the results' PersistentVolumeClaim")
    lo.add_argument("--storage-class", default="", help="its StorageClass (default: the cluster's default)")
    lo.add_argument("--k8s-workflow", default="", help="the Workflow whose steps give the phases")
    lo.add_argument("--gpu-namespace", default="", help="where its GPU Jobs run (k8s render's): their lock records")
    lo.add_argument("--operator", action="store_true", help="a LocustTest for the Locust Kubernetes operator")
    lo.add_argument("--out", default=None, help="write DIR/load.yaml (default: stdout)")
    lo.add_argument("locust_args", nargs=argparse.REMAINDER, help="after --: more of Locust's options, for the master")
    lo.set_defaults(func=run_render_load)

    w = ksub.add_parser("wait", help="wait until a Workflow's step starts or ends (the GPU node's Job)")
    w.add_argument("workflow", help="[NAMESPACE/]NAME")
    w.add_argument("--step", required=True)
    w.add_argument("--for", dest="until", choices=["start", "end"], required=True)
    w.set_defaults(func=run_wait)

    co = ksub.add_parser("collect", help="a load run's results home from its volume, for report and compare")
    co.add_argument("run", metavar="[NAMESPACE/]RUN", help="render-load's --name (and --namespace)")
    co.add_argument("dir", help="where the results directory goes")
    co.add_argument("--image", default=IMAGE, help="the image of the pod that reads the volume (render-load's)")
    co.set_defaults(func=run_collect)

    g = ksub.add_parser("gpu", help="the GPU a server pod on this node holds, by UUID (the GPU node's Job)")
    g.add_argument("namespace", help="the server pods' namespace")
    g.add_argument("--selector", required=True, help="the server's pods, KEY=VALUE[,KEY=VALUE]")
    g.add_argument("--node", required=True, help="this node's name")
    g.add_argument("--index", type=int, default=0, help="which of the pod's GPUs, from 0")
    g.add_argument("--proc", default="/proc", help="the node's /proc (the Job runs with hostPID)")
    g.set_defaults(func=run_gpu)

    c = ksub.add_parser("check", help="what the API server and Chaos Mesh's webhooks would refuse, without a cluster")
    c.add_argument("files", nargs="+", metavar="FILE", help="YAML files of objects (documents separated by ---)")
    c.add_argument("--crds", action="append", default=[], metavar="PATH", help="CRD files or folders: your cluster's")
    c.add_argument("--kubernetes", default=None, help="the release whose schemas the core kinds are held to")
    c.add_argument(
        "--pod-security",
        choices=LEVELS,
        default=None,
        help="the Pod Security level enforced in namespaces the files hold no Namespace of",
    )
    c.set_defaults(func=run_check)


def _selector(text: str, flag: str = "--selector") -> dict[str, str]:
    from faults.k8s.pods import LABEL_KEY, LABEL_VALUE

    out: dict[str, str] = {}
    for item in filter(None, text.split(",")):
        key, eq, value = item.partition("=")
        if not eq or not LABEL_KEY.fullmatch(key) or not LABEL_VALUE.fullmatch(value):
            raise UsageError(f"expected KEY=VALUE[,KEY=VALUE] of Kubernetes labels, got {item!r}", field=flag)
        if key in out:
            raise UsageError(f"{key} given twice ({out[key]!r} and {value!r}): a pod has one value", field=flag)
        out[key] = value
    return out


def _name(value: str, flag: str, pattern: re.Pattern[str] = names.DNS_LABEL) -> str:
    reason = names.check(value, pattern)
    if reason:
        raise UsageError(reason, field=flag)
    return value


def run_render(args: argparse.Namespace) -> int:
    from faults import schedule
    from faults.injectors import KINDS
    from faults.k8s.cluster import Cluster
    from faults.k8s.dump import write
    from faults.k8s.workflow import render
    from faults.proxy.address import upstream_target

    plan = schedule.load(args.schedule, KINDS)
    if any(f.every for f in plan.faults) and args.duration is None:
        raise UsageError("a schedule with 'every' needs --duration", field="--duration")
    if args.upstream:
        upstream_target(args.upstream)
    if args.driver_root != "auto" and not args.driver_root.startswith("/"):
        raise UsageError(f"{args.driver_root!r}: expected auto or an absolute path on the node", field="--driver-root")
    cluster = Cluster(
        run=_name(args.run or names.fresh(Path(args.schedule).stem), "--run", names.DNS_1035),
        namespace=_name(args.namespace, "--namespace"),
        selector=_selector(args.selector),
        replicas=_selector(args.replica_selector, "--replica-selector"),
        prefill=_selector(args.prefill_selector, "--prefill-selector"),
        decode=_selector(args.decode_selector, "--decode-selector"),
        gpu_namespace=_name(args.gpu_namespace, "--gpu-namespace"),
        gpu_access=args.gpu_access,
        driver_root=args.driver_root,
        upstream=args.upstream,
        image=args.image,
    )
    rendered = render(plan, args.schedule, cluster, args.duration or plan.end())
    if args.out is None:
        write(rendered.objects(), None)
    else:
        if rendered.setup:
            write(rendered.setup, Path(args.out) / "setup.yaml")
        write(rendered.run, Path(args.out) / "run.yaml")
    return 0


def run_render_load(args: argparse.Namespace) -> int:
    from faults.k8s.dump import write
    from faults.k8s.load import Load, render

    extra = args.locust_args[1:] if args.locust_args[:1] == ["--"] else args.locust_args
    if args.storage_class and not NODE.fullmatch(args.storage_class):
        raise UsageError(f"{args.storage_class!r} is not a StorageClass's name", field="--storage-class")
    load = Load(
        host=args.host,
        name=_name(args.name, "--name", names.DNS_1035),
        namespace=_name(args.namespace, "--namespace"),
        image=args.image,
        workers=args.workers,
        files={o: getattr(args, o) for o in ("schedule", "slo", "guard") if getattr(args, o)},
        push_gateway=args.push_gateway,
        results_size=args.results_size,
        storage_class=args.storage_class,
        workflow=_name(args.k8s_workflow, "--k8s-workflow") if args.k8s_workflow else "",
        gpu_namespace=_name(args.gpu_namespace, "--gpu-namespace") if args.gpu_namespace else "",
        operator=args.operator,
        locust_args=tuple(extra),
    )
    if load.gpu_namespace and not load.workflow:
        raise UsageError(
            "the GPU Jobs' records are read for a Workflow's phases: give --k8s-workflow", field="--gpu-namespace"
        )
    if load.workflow and "schedule" in load.files:
        raise UsageError("give one source of phases: --schedule runs faults in the master", field="--k8s-workflow")
    write(render(load), Path(args.out) / "load.yaml" if args.out else None)
    return 0


def run_wait(args: argparse.Namespace) -> int:
    from faults.k8s.phases import api_reader, reference, wait

    return wait(api_reader(*reference(args.workflow), records=False), args.step, args.until)


def run_collect(args: argparse.Namespace) -> int:
    from faults.k8s.collect import collect
    from faults.k8s.phases import reference

    namespace, run = reference(args.run, "RUN")
    for found in collect(_name(namespace, "RUN"), _name(run, "RUN", names.DNS_1035), Path(args.dir), args.image):
        print(f"collected {found}: llmchaos report {found}")
    return 0


def run_gpu(args: argparse.Namespace) -> int:
    from faults.k8s.gpu_uuid import choose, pods_on

    selector = ",".join(f"{k}={v}" for k, v in _selector(args.selector).items())
    if not NODE.fullmatch(args.node):
        raise UsageError(f"{args.node!r} is not a node's name", field="--node")
    if args.index < 0:
        raise UsageError(f"{args.index}: a GPU's place in the pod's list counts from 0", field="--index")
    print(choose(pods_on(args.namespace, selector, args.node), args.index, Path(args.proc)))
    return 0


def run_check(args: argparse.Namespace) -> int:
    from faults.k8s import check

    objects = check.read(args.files)  # every file read first: a bad one refuses the whole check
    schemas = check.crds(args.crds)
    kubernetes = check.release(args.kubernetes or check.KUBERNETES)
    levels = check.enforced((obj for _, _, obj in objects), args.pod_security)
    refused = 0
    for path, line, obj in objects:
        found = check.problems(obj, schemas, kubernetes) or check.pod_security(obj, levels)
        refused += bool(found)
        meta = obj.get("metadata")
        name = meta.get("name") if isinstance(meta, dict) else None
        for problem in found:
            print(f"{path}:{line}: {obj.get('kind')}/{name}: {problem}")
    held = f"Kubernetes {kubernetes}, {len(schemas)} kinds from CRDs"
    print(f"llmchaos k8s check: {len(objects)} objects, {refused} refused ({held})")
    return 1 if refused else 0
