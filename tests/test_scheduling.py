"""The scheduling recipes of cluster/scheduling/ run `fsdask run` as shipped (cron, systemd, SLURM, Kubernetes)."""

import json
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

import numpy as np
import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCHED = ROOT / "cluster" / "scheduling"


def _project(folder: pathlib.Path, seed: int = 0) -> pathlib.Path:
    """A tiny nightly pipeline in ``folder``: ingest an .npz, one t-test selection."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(12, 30)).astype(np.float32)
    y = np.repeat([0, 1], 6)
    X[y == 1, :3] += 3
    np.savez(folder / "d.npz", X=X, y=y)
    cfg = {
        "steps": [
            {
                "name": "ingest",
                "ingest": {"source": "d.npz", "url": "out/d.zarr", "overwrite": True},
            },
            {
                "name": "ttest",
                "select": {
                    "url": "out/d.zarr",
                    "method": "ttest",
                    "output": "out/t.zarr",
                    "param": {"n_features_to_select": 3},
                },
            },
        ]
    }
    (folder / "nightly.yaml").write_text(yaml.safe_dump(cfg))
    (folder / "logs").mkdir(exist_ok=True)
    return folder / "nightly.yaml"


def _fake_home(tmp_path) -> pathlib.Path:
    """$HOME with ~/.local/bin/fsdask running this tree's fsdask (what `pip install --user` gives)."""
    home = tmp_path / "home"
    bindir = home / ".local" / "bin"
    bindir.mkdir(parents=True)
    exe = bindir / "fsdask"
    exe.write_text(f'#!/bin/sh\nPYTHONPATH={ROOT} exec {sys.executable} -m fsdask.cli "$@"\n')
    exe.chmod(0o755)
    return home


def _events(path):
    return [json.loads(line) for line in pathlib.Path(path).read_text().splitlines()]


def _unit(path: pathlib.Path) -> dict[str, list[str]]:
    """systemd unit → {"Section.Key": [values…]} (keys may repeat, e.g. Environment)."""
    out: dict[str, list[str]] = {}
    section = ""
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, value = line.split("=", 1)
        out.setdefault(f"{section}.{key}", []).append(value)
    return out


def test_systemd_unit_execstart_and_crontab_line_run_the_pipeline(tmp_path):
    home = _fake_home(tmp_path)
    config = _project(home / "fsdask-nightly")
    unit = _unit(SCHED / "systemd" / "fsdask-nightly.service")
    timer = _unit(SCHED / "systemd" / "fsdask-nightly.timer")
    assert (
        unit["Service.Type"] == ["oneshot"]
        and timer["Timer.OnCalendar"]
        and timer["Timer.Persistent"] == ["true"]
    )
    if shutil.which("systemd-analyze"):
        p = subprocess.run(
            [
                "systemd-analyze",
                "verify",
                str(SCHED / "systemd" / "fsdask-nightly.service"),
                str(SCHED / "systemd" / "fsdask-nightly.timer"),
            ],
            capture_output=True,
            text=True,
        )
        assert p.returncode == 0, p.stderr
    # the unit's own environment and command line, with systemd's %h and ${VAR} expansion
    env = {"HOME": str(home)}
    for item in unit["Service.Environment"]:
        k, v = item.replace("%h", str(home)).split("=", 1)
        env[k] = v
    argv = [
        re.sub(r"\$\{(\w+)\}", lambda m: env[m.group(1)], a)
        for a in shlex.split(unit["Service.ExecStart"][0].replace("%h", str(home)))
    ]
    cwd = unit["Service.WorkingDirectory"][0].replace("%h", str(home))
    p = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (config.parent / "out" / "t.zarr").exists()
    ev = _events(config.parent / "logs" / "nightly.jsonl")
    assert ev[-1]["event"] == "run_end" and ev[-1]["exit_code"] == 0 and ev[-1]["ran"] == 2
    # the crontab line (schedule fields dropped) the next night: nothing changed, nothing runs
    line = next(
        x
        for x in (SCHED / "crontab").read_text().splitlines()
        if x.strip() and not x.startswith("#")
    )
    fields = line.split(None, 5)
    assert len(fields) == 6 and fields[:5] == ["15", "2", "*", "*", "*"]
    # the line names its two paths once; nothing assumes a clone in $HOME or a logs/ folder
    assert "$HOME" not in line and "~" not in line
    command = re.sub(r"\bPROJECT=[^\s;]+", f"PROJECT={config.parent}", fields[5])
    command = re.sub(r"\bFSDASK=[^\s;]+", f"FSDASK={home}/.local/bin/fsdask", command)
    shutil.rmtree(config.parent / "logs")
    p = subprocess.run(
        ["/bin/sh", "-c", command],
        env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, (config.parent / "logs" / "nightly.log").read_text()
    assert _events(config.parent / "logs" / "nightly.jsonl")[-1]["skipped"] == 2
    assert (
        "skipped — done in an earlier run" in (config.parent / "logs" / "nightly.log").read_text()
    )


def _sbatch_env(tmp_path, **extra):
    env = dict(os.environ, PYTHONPATH=str(ROOT), FSDASK=f"{sys.executable} -m fsdask.cli", **extra)
    for k in [k for k in env if k.startswith("SLURM_") and k not in extra and k != "SLURM_CONF"]:
        env.pop(k)
    return env


def test_slurm_batch_script_sizes_the_local_cluster_from_the_allocation(tmp_path):
    """The batch script run as SLURM runs it (a bash script with SLURM_* set), no scheduler needed."""
    config = _project(tmp_path / "proj")
    shutil.rmtree(config.parent / "logs")  # the script makes the log folder itself
    script = SCHED / "slurm" / "fsdask-nightly.sbatch"
    p = subprocess.run(
        ["bash", str(script), str(config)],
        capture_output=True,
        text=True,
        timeout=300,
        env=_sbatch_env(tmp_path, SLURM_CPUS_PER_TASK="1", SLURM_MEM_PER_NODE="2000"),
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert (
        "scheduler=local:1" in p.stdout and "memory_limit=1800MB" in p.stdout
    )  # 90 % of 2000 MB, 1 worker
    ev = _events(tmp_path / "proj" / "logs" / "nightly.jsonl")
    assert ev[-1]["exit_code"] == 0 and ev[-1]["ran"] == 2
    sc = (SCHED / "slurm" / "scrontab").read_text().splitlines()
    assert any(x.startswith("#SCRON --cpus-per-task") for x in sc)
    cron = next(x for x in sc if x.strip() and not x.startswith("#"))
    assert "$HOME" not in cron  # no clone in $HOME assumed
    assert cron.split()[5].endswith("/fsdask-nightly.sbatch") and cron.split()[:5] == [
        "15",
        "2",
        "*",
        "*",
        "*",
    ]


def test_kubernetes_cronjob_is_valid_and_agrees_with_the_lock():
    kv = pytest.importorskip("kubernetes_validate")
    doc = yaml.safe_load((SCHED / "kubernetes" / "cronjob.yaml").read_text())
    kv.validate(
        doc, kv.latest_version(), strict=True
    )  # the Kubernetes OpenAPI schema, unknown keys refused
    broken = json.loads(json.dumps(doc))
    broken["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["volumeMount"] = []
    with pytest.raises(kv.ValidationError):
        kv.validate(broken, kv.latest_version(), strict=True)
    spec = doc["spec"]
    assert spec["concurrencyPolicy"] == "Forbid"
    pod = spec["jobTemplate"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = container["args"]
    assert args[0] == "run" and "--log-json" in args
    # the config (hence the state file and its lock) lives on the shared volume every night's pod mounts
    mount = container["volumeMounts"][0]
    assert args[1].startswith(mount["mountPath"] + "/")
    assert next(v for v in pod["volumes"] if v["name"] == mount["name"])["persistentVolumeClaim"]
    # a killed pod's lock (another host) is taken over long before the next night
    stale = int(
        next(e["value"] for e in container["env"] if e["name"] == "FSDASK_LOCK_STALE_SECONDS")
    )
    assert spec["schedule"].split()[2:] == ["*", "*", "*"] and stale < 86400
    # the image's entrypoint is fsdask, so args are fsdask's own command line
    docker = (SCHED / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["fsdask"]' in docker and 'pip install ".[s3' in docker
    from fsdask.cli import build_parser

    args_ns = build_parser().parse_args(args)
    assert args_ns.command == "run" and args_ns.scheduler == "local:4"
