"""Checks the rendered OrderHold Kubernetes manifests; run by tests/deploy/k8s_test.sh.

Usage:
  k8s_check.py BASE.yaml OVERLAY.yaml REDIS_ENV ALERTS.yaml FLAGS HEALTH_SERVICE DRAIN_S UID
               LIVENESS_SERVICE

BASE.yaml and OVERLAY.yaml are `kubectl kustomize` output of deploy/k8s and of
deploy/k8s-example (with REDIS_ENV as its redis.env; an empty OVERLAY.yaml skips its checks);
FLAGS is a file of the server's flag names, one a line; HEALTH_SERVICE the name the server's
health reporter sets besides ""; DRAIN_S the seconds the server drains in-flight calls after
SIGTERM; UID the numeric user of the image (deploy/Dockerfile); LIVENESS_SERVICE the health
name that is SERVING whenever the server runs (kLivenessServiceName). Prints one line per failed
property and exits 1 if there is any.
"""
import base64
import re
import sys

import yaml

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
    return ok


def load(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def one(objects, kind, name=None):
    found = [o for o in objects
             if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    check(len(found) == 1, f"exactly one {kind} {name or ''}: found {len(found)}")
    return found[0] if found else {}


def selects(selector, labels, who):
    """True when a label selector (matchLabels only, or a Service's plain map) picks `labels`."""
    if "matchExpressions" in selector:
        return check(False, f"{who}: matchExpressions is not checked by this test")
    wanted = selector.get("matchLabels", selector)
    return check(bool(wanted) and all(labels.get(k) == v for k, v in wanted.items()),
                 f"{who}: selector {wanted} does not select the pods {labels}")


def main():
    (base_path, overlay_path, redis_env_path, alerts_path, flags_path, health_service,
     drain_s, image_uid, liveness_service) = sys.argv[1:]
    drain_s = int(drain_s)
    image_uid = int(image_uid)
    with open(flags_path) as f:
        variables = {"ORDERHOLD_" + line.strip().upper() for line in f if line.strip()}
    base = load(base_path)

    # Deployment and its pod.
    deployment = one(base, "Deployment", "orderhold")
    check(deployment["spec"].get("replicas") == 2, "Deployment: 2 replicas")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    selects(deployment["spec"]["selector"], pod_labels, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    containers = pod["containers"]
    check(len(containers) == 1, "Deployment: one container")
    c = containers[0]
    check(c.get("image") == "localhost/orderhold:dev", "container: image localhost/orderhold:dev")
    ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
    check(ports == {"grpc": 50051, "metrics": 9464},
          f"container: ports grpc=50051 and metrics=9464, got {ports}")

    # Probes: native gRPC health checks on the gRPC port. Readiness follows Redis ("" or the
    # service's name); liveness asks the name that stays SERVING through a Redis outage, so an
    # outage never restarts the pods.
    wanted_services = {"readinessProbe": ("", health_service),
                       "livenessProbe": (liveness_service,)}
    for probe_name, services in wanted_services.items():
        probe = c.get(probe_name, {})
        grpc = probe.get("grpc")
        if check(grpc is not None, f"{probe_name}: a grpc probe"):
            check(grpc.get("port") == 50051, f"{probe_name}: grpc port 50051")
            check(grpc.get("service", "") in services,
                  f"{probe_name}: service one of {services}, got {grpc.get('service')}")
        check(not {"httpGet", "tcpSocket", "exec"} & probe.keys(),
              f"{probe_name}: only the grpc handler")

    # Security context: the container's settings win over the pod's.
    pod_sc = pod.get("securityContext", {})
    sc = {**pod_sc, **c.get("securityContext", {})}
    check(sc.get("runAsNonRoot") is True, "securityContext: runAsNonRoot true")
    check(sc.get("runAsUser") == image_uid,
          f"securityContext: runAsUser {image_uid} (the image's user, deploy/Dockerfile)")
    check(sc.get("readOnlyRootFilesystem") is True, "securityContext: readOnlyRootFilesystem true")
    check(sc.get("allowPrivilegeEscalation") is False,
          "securityContext: allowPrivilegeEscalation false")
    check(sc.get("privileged") is not True, "securityContext: not privileged")
    caps = sc.get("capabilities") or {}
    check("ALL" in caps.get("drop", []), "securityContext: capabilities drop ALL")
    check(not caps.get("add"), "securityContext: no capabilities added")
    check(sc.get("seccompProfile", {}).get("type") == "RuntimeDefault",
          "securityContext: seccompProfile RuntimeDefault")
    check(pod.get("automountServiceAccountToken") is False, "pod: no service account token")
    # Service links would put ORDERHOLD_PORT=tcp://... and friends next to the ORDERHOLD_* settings.
    check(pod.get("enableServiceLinks") is False, "pod: enableServiceLinks false")

    resources = c.get("resources", {})
    for kind in ("requests", "limits"):
        check({"cpu", "memory"} <= resources.get(kind, {}).keys(), f"resources: {kind} cpu+memory")

    # Stop: preStop sleep, then SIGTERM and the drain, all inside the grace period.
    pre_stop = c.get("lifecycle", {}).get("preStop", {})
    command = pre_stop.get("exec", {}).get("command", [])
    sleep_s = None
    if len(command) == 2 and command[0] in ("sleep", "/bin/sleep") and command[1].isdigit():
        sleep_s = int(command[1])
    elif "sleep" in pre_stop:
        sleep_s = pre_stop["sleep"].get("seconds")
    if check(sleep_s is not None and sleep_s > 0, f"preStop: a sleep, got {pre_stop}"):
        grace = pod.get("terminationGracePeriodSeconds", 30)
        check(grace > sleep_s + drain_s,
              f"terminationGracePeriodSeconds {grace} > preStop {sleep_s} + drain {drain_s}")

    # Configuration: settings from a ConfigMap, credentials from a Secret.
    secrets = {o["metadata"]["name"]: o for o in base if o["kind"] == "Secret"}
    config_maps = {o["metadata"]["name"]: o for o in base if o["kind"] == "ConfigMap"}
    env = {e["name"]: e for e in c.get("env", [])}
    for name in env:
        check(name in variables, f"env: {name} is not a server flag's variable")
    url_ref = env.get("ORDERHOLD_REDIS_URL", {}).get("valueFrom", {}).get("secretKeyRef")
    if check(url_ref is not None, "env: ORDERHOLD_REDIS_URL from a secretKeyRef"):
        secret = secrets.get(url_ref["name"], {})
        keys = {**secret.get("data", {}), **secret.get("stringData", {})}
        check(url_ref["key"] in keys, f"Secret {url_ref['name']} has key {url_ref['key']}")
    for name, e in env.items():
        if "PASSWORD" in name:
            check("secretKeyRef" in e.get("valueFrom", {}), f"env: {name} from a Secret")
    env_from = c.get("envFrom", [])
    check(len(env_from) == 1 and "configMapRef" in env_from[0], "envFrom: one ConfigMap")
    for ref in env_from:
        cm = config_maps.get(ref.get("configMapRef", {}).get("name"))
        if check(cm is not None, f"envFrom: ConfigMap {ref} is in the rendering"):
            for key in cm["data"]:
                check(key in variables, f"ConfigMap: {key} is not a server flag's variable")
                check(key != "ORDERHOLD_REDIS_URL" and "PASSWORD" not in key,
                      f"ConfigMap: {key} is a credential (belongs in the Secret)")

    # Services: select the pods, ports named so a mesh sees gRPC (HTTP/2).
    services = [o for o in base if o["kind"] == "Service"]
    check(len(services) >= 1, "a Service")
    for svc in services:
        name = svc["metadata"]["name"]
        selects(svc["spec"].get("selector", {}), pod_labels, f"Service {name}")
        svc_ports = {p.get("name"): p for p in svc["spec"]["ports"]}
        grpc = svc_ports.get("grpc")
        if check(grpc is not None, f"Service {name}: a port named grpc"):
            check(grpc.get("appProtocol") == "grpc", f"Service {name}: grpc appProtocol grpc")
        for port_name, p in svc_ports.items():
            target = p.get("targetPort", p["port"])
            check(target in ports or target in ports.values(),
                  f"Service {name}: port {port_name} targets a container port, got {target}")
    main_svc = one(base, "Service", "orderhold")
    check("metrics" in {p.get("name") for p in main_svc.get("spec", {}).get("ports", [])},
          "Service orderhold: a port named metrics")

    pdb = one(base, "PodDisruptionBudget")
    check(pdb.get("spec", {}).get("minAvailable") == 1, "PodDisruptionBudget: minAvailable 1")
    selects(pdb.get("spec", {}).get("selector", {}), pod_labels, "PodDisruptionBudget")

    # Monitoring: the PodMonitor scrapes the pods' metrics port under the job the rules select.
    monitor = one(base, "PodMonitor")
    spec = monitor.get("spec", {})
    selects(spec.get("selector", {}), pod_labels, "PodMonitor")
    endpoints = spec.get("podMetricsEndpoints", [])
    check([e.get("port") for e in endpoints] == ["metrics"],
          "PodMonitor: scrapes the container port named metrics")
    check(all(e.get("path", "/metrics") == "/metrics" for e in endpoints), "PodMonitor: /metrics")
    job = pod_labels.get(spec.get("jobLabel", ""))
    check(job is not None, "PodMonitor: jobLabel names a pod label (the job the rules select)")

    with open(alerts_path) as f:
        alerts = yaml.safe_load(f)
    rule = one(base, "PrometheusRule")
    check(rule.get("spec", {}).get("groups") == alerts.get("groups"),
          "PrometheusRule: spec.groups differ from deploy/prometheus/alerts.yaml: run "
          "deploy/k8s/sync-rules.sh")
    for group in alerts.get("groups", []):
        for r in group.get("rules", []):
            for selected in re.findall(r'\bjob\s*=~?\s*"([^"]*)"', r.get("expr", "")):
                check(re.fullmatch(selected, job or ""),
                      f"rule {r.get('alert') or r.get('record')}: selects job {selected!r}, "
                      f"the PodMonitor's series have job {job!r}")

    # The example overlay: image, Secret and a setting replaced; everything in its namespace.
    overlay = load(overlay_path)
    if overlay:
        check_overlay(overlay, redis_env_path, next(iter(config_maps.values()), {}))

    for failure in failures:
        print(f"k8s_check: FAIL: {failure}")
    if failures:
        sys.exit(1)
    print(f"k8s_check: ok ({len(base)} objects in the base, {len(overlay)} in the overlay)")


def check_overlay(overlay, redis_env_path, base_cm):
    """deploy/k8s-example over the base: image, Secret and one setting replaced."""
    o_deployment = one(overlay, "Deployment", "orderhold")
    o_container = o_deployment["spec"]["template"]["spec"]["containers"][0]
    check(o_container["image"] == "registry.example.com/platform/orderhold:1.0.0",
          f"overlay: image replaced, got {o_container['image']}")
    check(all(o["metadata"].get("namespace") == "orderhold" for o in overlay),
          "overlay: every object in namespace orderhold")
    o_env = {e["name"]: e for e in o_container.get("env", [])}
    o_ref = o_env.get("ORDERHOLD_REDIS_URL", {}).get("valueFrom", {}).get("secretKeyRef", {})
    o_secret = one(overlay, "Secret", o_ref.get("name"))
    with open(redis_env_path) as f:
        wanted = dict(line.strip().split("=", 1) for line in f
                      if line.strip() and not line.startswith("#"))
    got = {k: base64.b64decode(v).decode() for k, v in o_secret.get("data", {}).items()}
    check(got == wanted and not o_secret.get("stringData"),
          f"overlay: the Secret holds redis.env only, got keys {sorted(got)}")
    o_cm_name = o_container["envFrom"][0]["configMapRef"]["name"]
    o_cm = one(overlay, "ConfigMap", o_cm_name)
    check(o_cm.get("data", {}) == {**base_cm.get("data", {}), "ORDERHOLD_MAX_HOLDS": "5"},
          "overlay: the ConfigMap is the base's with ORDERHOLD_MAX_HOLDS=5")
    for kind in ("PodMonitor", "PrometheusRule"):
        check(one(overlay, kind).get("metadata", {}).get("labels", {}).get("release")
              == "kube-prometheus-stack", f"overlay: {kind} labelled for Prometheus' selector")


if __name__ == "__main__":
    main()
