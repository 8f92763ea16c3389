"""The example Kubernetes manifests in deploy/: every YAML document parses and names itself; the
worker pod keeps what pysandbox needs (deploy/README.md) and nothing privileged creeps in; its
readiness probe is a command that passes here with the built binary; the workers reach the
scheduler through a Service the manifests define."""

import json
import os
import re
import subprocess
import unittest
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
PYSANDBOX = os.environ.get("PYSANDBOX", str(REPO / "build" / "bin" / "pysandbox"))
PROBE = ["pysandbox", "doctor", "--json"]


def documents() -> list[tuple[Path, dict]]:
    found = []
    for path in sorted(DEPLOY.glob("*.y*ml")):
        for document in yaml.safe_load_all(path.read_text()):
            found.append((path, document))
    return found


def objects(kind: str) -> list[dict]:
    return [document for _, document in documents() if document.get("kind") == kind]


def worker_pod() -> dict:
    workers = [d for d in objects("Deployment") if d["metadata"]["name"] == "pysandbox-worker"]
    assert len(workers) == 1, "deploy/ must define one Deployment pysandbox-worker"
    return workers[0]["spec"]["template"]["spec"]


class ManifestTest(unittest.TestCase):
    def test_every_document_parses_and_names_itself(self):
        files = sorted(DEPLOY.glob("*.y*ml"))
        self.assertGreaterEqual(len(files), 3, files)
        for path, document in documents():
            with self.subTest(file=path.name):
                self.assertIsInstance(document, dict, "an empty or non-mapping document")
                self.assertRegex(document.get("apiVersion", ""), r"^([a-z0-9.]+/)?v\d")
                self.assertRegex(document.get("kind", ""), r"^[A-Z][A-Za-z]+$")
                self.assertRegex(document.get("metadata", {}).get("name", ""),
                                 r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

    def test_the_worker_pod_gets_what_pysandbox_needs_and_nothing_privileged(self):
        pod = worker_pod()
        self.assertIs(pod.get("hostUsers"), False)
        self.assertIs(pod["securityContext"].get("runAsNonRoot"), True)
        self.assertNotEqual(pod["securityContext"].get("runAsUser"), 0)
        for field in ("hostNetwork", "hostPID", "hostIPC"):
            self.assertFalse(pod.get(field, False), field)
        containers = pod.get("initContainers", []) + pod["containers"]
        for container in containers:
            with self.subTest(container=container["name"]):
                context = container["securityContext"]
                self.assertFalse(context.get("privileged", False))
                self.assertIs(context.get("allowPrivilegeEscalation"), False)
                self.assertEqual(context.get("capabilities", {}).get("drop"), ["ALL"])
                self.assertNotIn("add", context.get("capabilities", {}))
                self.assertEqual(context.get("procMount"), "Unmasked")
                self.assertEqual(context.get("seccompProfile"), {"type": "Unconfined"})
                self.assertEqual(context.get("appArmorProfile"), {"type": "Unconfined"})
                self.assertIs(context.get("readOnlyRootFilesystem"), True)

    def test_the_readme_gives_the_worker_pods_settings(self):
        # README.md, "In Docker and Kubernetes": its pod spec is what worker.yaml does.
        readme = (REPO / "README.md").read_text()
        section = readme[readme.index("## In Docker and Kubernetes"):]
        spec = yaml.safe_load(re.search(r"^```yaml\n(.*?)^```$", section, re.M | re.S)[1])["spec"]
        pod = worker_pod()
        self.assertEqual(spec["hostUsers"], pod["hostUsers"])
        for key, value in spec["securityContext"].items():
            self.assertEqual(pod["securityContext"][key], value, key)
        for container in pod["initContainers"] + pod["containers"]:
            for key, value in spec["containers"][0]["securityContext"].items():
                self.assertEqual(container["securityContext"][key], value,
                                 f"{container['name']}: {key}")

    def test_doctor_gates_the_worker_and_probes_it(self):
        pod = worker_pod()
        self.assertIn(PROBE, [c["command"] for c in pod.get("initContainers", [])],
                      "an init container runs doctor before the worker starts")
        (worker,) = [c for c in pod["containers"] if c["name"] == "worker"]
        self.assertEqual(worker["readinessProbe"]["exec"]["command"], PROBE)

    def test_the_probe_command_passes_here(self):
        # The probe exactly as the manifests run it, with this build's binary for `pysandbox`.
        proc = subprocess.run([PYSANDBOX, *PROBE[1:]], capture_output=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIs(json.loads(proc.stdout)["ok"], True)

    def test_workers_reach_the_scheduler_through_its_service(self):
        (worker,) = [c for c in worker_pod()["containers"] if c["name"] == "worker"]
        command = worker["command"]
        self.assertEqual(command[:2], ["dask", "worker"])
        address = re.fullmatch(r"tcp://([a-z0-9-]+):(\d+)", command[2])
        self.assertIsNotNone(address, command)
        services = {s["metadata"]["name"]: s for s in objects("Service")}
        self.assertIn(address.group(1), services)
        ports = [p["port"] for p in services[address.group(1)]["spec"]["ports"]]
        self.assertIn(int(address.group(2)), ports)


if __name__ == "__main__":
    unittest.main()
