"""An emulated worker's `docker` (workers/containers.py, docker_cli.py): an image built
here (a layer with a shell and its libraries, a second that overrides and whites out
files of the first), pushed to the emulator's registry as docker pushes, is pulled and
run on a worker over SSH as on a TPU VM: login with the VM's token, pull by digest, run
with its environment, binds, devices, exit status and signals; docker's refusals."""

from __future__ import annotations

import array
import base64
import json
import os
import secrets
import shlex
import socket
from pathlib import Path
from typing import Any

import pytest

from tests.emulator.registry_helpers import CONFINED, layer, libraries, make_repository, push_image
from tests.emulator.ssh_helpers import create, delete, mine, user_key, wait_until
from tests.emulator.test_ssh_workers import run
from tpuctl.emulator.workers.sandbox import Sandbox

PROJECT, REPO = "tpuctl-demo", "boxes"
NAME = f"us-docker.pkg.dev/{PROJECT}/{REPO}/tool"
SA = f"runner@{PROJECT}.iam.gserviceaccount.com"
PULL = "artifactregistry.repositories.downloadArtifacts"
TOKEN = (
    'python3 -c "import json,os,urllib.request as u; print(json.load(u.urlopen(u.Request('
    "os.environ['TPUCTL_METADATA_URL'] + '/instance/service-accounts/default/token', "
    "headers={'Metadata-Flavor': 'Google'})))['access_token'])\""
)
LOGIN = f"{TOKEN} | docker login -u oauth2accesstoken --password-stdin https://us-docker.pkg.dev"


def _push(registry: str, tag: str) -> str:
    """The test image as NAME:tag; its manifest's digest."""
    first = layer(
        {
            **libraries("/bin/dash", "/bin/sleep", "/bin/cat"),
            "bin/sh": "/bin/dash",
            "etc/msg": b"from the first layer\n",
            "etc/gone": b"whited out\n",
            "data/old": b"hidden by the opaque folder\n",
            "wait.fifo": None,
        },
        gzip=True,
    )
    second = layer(
        {
            "etc/msg": b"from the second layer\n",
            "etc/.wh.gone": b"",
            "data/.wh..wh..opq": b"",
            "data/new": b"new\n",
        },
        gzip=False,
    )
    config = {"Cmd": ["cat", "/etc/msg"], "Env": ["FROM_IMAGE=yes"], "WorkingDir": "/data"}
    return push_image(registry, tag, [first, second], config, NAME)


@pytest.fixture
def worker(emulator: Any, emulator_server: Any, tmp_path: Path) -> Any:
    """(run a command on worker 0 as alice: its result, the worker's folder, the image's
    digest) of a READY v3-8 whose account is SA."""
    make_repository(emulator.address, REPO)
    digest = _push(str(emulator.status()["registry_endpoint"]), "v1")
    pub, key = user_key(tmp_path)
    node = create(
        emulator,
        f"docked-{secrets.token_hex(4)}",  # no other test's node, nor its docker's images
        "v3-8",
        metadata={"ssh-keys": f"alice:{pub}"},
        service_account={"email": SA},
    )
    wdir = Path(emulator_server.backend.worker_env(node.name, 0)["HOME"]).parent

    def on_worker(cmd: str) -> Any:
        return run(emulator, tmp_path, node, 0, "alice", key, cmd)

    try:
        yield on_worker, wdir, digest
    finally:
        if any(n["name"] == node.name for n in emulator.nodes()):
            delete(emulator, node.name)
        procs = mine(emulator_server, holders=True)
        wait_until(lambda: not procs(), "the worker's processes (and containers) to be gone")


def _out(done: Any) -> str:
    return done.stdout.decode()


@CONFINED
def test_an_image_runs_on_a_worker_as_docker_runs_it(worker: Any) -> None:
    on_worker, wdir, digest = worker
    image = f"{NAME}@{digest}"
    done = on_worker(f"export DOCKER_CONFIG=$HOME/.dk; {LOGIN} && cat $DOCKER_CONFIG/config.json")
    assert done.exit_status == 0, done.stderr
    assert _out(done).startswith("Login Succeeded\n")
    auth = json.loads(_out(done).split("\n", 1)[1])["auths"]["us-docker.pkg.dev"]["auth"]
    assert base64.b64decode(auth).decode().startswith("oauth2accesstoken:ya29.")

    pull = on_worker(f"export DOCKER_CONFIG=$HOME/.dk; docker pull {image}")
    assert pull.exit_status == 0, pull.stderr
    lines = _out(pull).splitlines()
    assert lines[-2:] == [f"Status: Downloaded newer image for {image}", image]
    again = on_worker(f"export DOCKER_CONFIG=$HOME/.dk; docker pull {image}")
    assert _out(again).splitlines()[-2:] == [f"Status: Image is up to date for {image}", image]
    inspect = on_worker(f"docker image inspect --format '{{{{json .Config}}}}' {image}")
    assert json.loads(_out(inspect))["Env"] == ["FROM_IMAGE=yes"]

    # the image's Cmd, in its WorkingDir: the second layer's file; whiteouts applied
    assert _out(on_worker(f"docker run --rm --net=host {image}")) == "from the second layer\n"
    script = (
        'echo "$FROM_IMAGE $GIVEN $FROM_CLI $(pwd)"; echo /etc/* /data/*; '
        "test -e /dev/accel0 && echo has-accel0; echo written > /out/result; exit 7"
    )
    cmd = (
        f"mkdir -p /tmp/o && FROM_CLI=cli docker run --rm --name c1 --net=host --privileged "
        "--device /dev/accel0 -e GIVEN=given -e FROM_CLI -v /tmp/o:/out "
        f"{image} sh -c {shlex.quote(script)}"
    )
    done = on_worker(cmd)
    assert done.exit_status == 7, done.stderr
    # the image's and the given environment; the first layer's /etc/gone and /data/old
    # whited out by the second
    assert _out(done) == "yes given cli /data\n/etc/msg /data/new\nhas-accel0\n"
    assert (wdir / "root" / "tmp" / "o" / "result").read_text() == "written\n"
    # --env-file (a bare NAME taken from the CLI's environment), -w made, --entrypoint
    options = f"--env-file /tmp/e -w /made --entrypoint sh {image} -c 'echo $A $B $(pwd)'"
    done = on_worker(f"printf 'A=from-file\\n# no\\nB\\n' > /tmp/e; B=b docker run --rm {options}")
    assert _out(done) == "from-file b /made\n", done.stderr


@CONFINED
def test_a_signal_to_docker_reaches_the_container(worker: Any) -> None:
    on_worker, wdir, digest = worker
    script = "trap 'kill $!; echo got-term; exit 42' TERM; echo > /out/ready; sleep 60 & wait"
    cmd = (
        f"mkdir -p /tmp/s; docker run --rm --name sig -v /tmp/s:/out {NAME}@{digest} "
        f"sh -c {shlex.quote(script)} & pid=$!; until [ -e /tmp/s/ready ]; do sleep 0.05; done; "
        "docker ps -q --filter name=sig | wc -l; kill -TERM $pid; wait $pid; echo status=$?"
    )
    done = on_worker(f"export DOCKER_CONFIG=$HOME/.dk; {LOGIN} >/dev/null && {cmd}")
    assert _out(done).split("\n")[-3:] == ["got-term", "status=42", ""], done.stderr
    assert _out(done).split("\n")[0] == "1"


@CONFINED
def test_docker_refuses_as_docker_does(emulator: Any, worker: Any) -> None:
    on_worker, wdir, digest = worker
    done = on_worker(f"docker run --bogus {NAME}@{digest}")
    assert (done.exit_status, done.stderr.decode()) == (
        125,
        "unknown flag: --bogus\nSee 'docker run --help'.\n",
    )
    setup = f"export DOCKER_CONFIG=$HOME/.dk; {LOGIN} >/dev/null 2>&1 && "
    missing = on_worker(setup + f"docker pull {NAME}:v9")
    assert missing.exit_status == 1
    assert missing.stderr.decode().startswith("Error response from daemon: manifest for ")
    assert "manifest unknown" in missing.stderr.decode()
    # run pulls what is not here (a new VM's docker has no image): with no credentials
    # (no DOCKER_CONFIG), refused
    assert not list((wdir.parent / f"{wdir.name}-docker").glob("images/*/config.json"))
    anonymous = on_worker(f"docker run --rm {NAME}@{digest} true")
    assert anonymous.exit_status == 125
    assert "Unauthenticated request" in anonymous.stderr.decode()
    assert on_worker(setup + f"docker pull {NAME}@{digest}").exit_status == 0
    outside = on_worker(f"docker run --rm -v /etc:/x {NAME}@{digest} true")
    assert outside.exit_status == 125
    assert "invalid mount config: /etc is not the worker's own" in outside.stderr.decode()
    absent = on_worker(f"docker run --rm {NAME}@{digest} nothing-here")
    assert absent.exit_status == 127
    assert '"nothing-here": executable file not found in $PATH' in absent.stderr.decode()
    emulator.config(service_accounts={SA: {"denied_permissions": [PULL]}})
    refused = on_worker(setup + f"docker pull {NAME}@{digest}")
    assert refused.exit_status == 1
    assert refused.stderr.decode().startswith("Error response from daemon: ")
    assert f'denied: Permission "{PULL}" denied on resource' in refused.stderr.decode()


def _sleeping(mark: str) -> list[int]:
    """This machine's processes running `sleep MARK`."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            if Path(f"/proc/{entry}/cmdline").read_bytes() == f"sleep\0{mark}\0".encode():
                found.append(int(entry))
        except OSError:
            pass
    return found


@CONFINED
def test_no_container_process_outlives_its_worker(emulator: Any, worker: Any) -> None:
    on_worker, wdir, digest = worker
    mark = str(400000 + os.getpid() % 10000)
    pull = f"export DOCKER_CONFIG=$HOME/.dk; {LOGIN} && docker pull {NAME}@{digest}"
    assert on_worker(pull).exit_status == 0
    detached = f"setsid docker run --rm --name long {NAME}@{digest} sleep {mark} >/dev/null 2>&1 &"
    assert on_worker(detached).exit_status == 0
    wait_until(lambda: _sleeping(mark), "the container's process")
    assert _out(on_worker("docker ps -q --filter name=lon")).strip() != ""
    emulator.tpu_client().delete_node(name=emulator.nodes()[0]["name"]).result()
    wait_until(lambda: not _sleeping(mark), "the container's process to end with its worker")
    store = wdir.parent / f"{wdir.name}-docker"  # its images go with it
    wait_until(lambda: not store.exists(), "the worker's docker images to go with it")


def test_an_unconfined_worker_runs_no_container(tmp_path: Path) -> None:
    """Without the workers' sandbox, `run` is refused by the daemon (image code never
    runs on the machine unconfined)."""
    from tpuctl.emulator.workers.containers import Daemons

    daemons = Daemons(Sandbox(bwrap=str(tmp_path / "no-bwrap"), unconfined=True))
    wdir = tmp_path / "node" / "w0"
    daemons.serve(wdir)
    read, write = os.pipe()
    try:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(str(wdir / "root" / "var" / "run" / "docker.sock"))
            request = json.dumps({"op": "run", "image": f"{NAME}:v1"}).encode() + b"\n"
            rights = array.array("i", [read, write, write]).tobytes()
            sock.sendmsg([request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, rights)])
            replies = [json.loads(line) for line in sock.makefile("rb")]
    finally:
        os.close(read)
        os.close(write)
        daemons.end(lambda _: True)
    assert replies[-1] == {"exit": 125}
    assert "runs containers only in sandboxed workers" in replies[0]["err"]


@CONFINED
def test_kill_rm_and_a_device_gone_as_docker_says(emulator: Any, worker: Any) -> None:
    on_worker, wdir, digest = worker
    image = f"{NAME}@{digest}"
    script = "trap 'kill $!; echo got-usr1; exit 3' USR1; echo > /out/ready; sleep 60 & wait"
    start = (
        f"export DOCKER_CONFIG=$HOME/.dk; {LOGIN} >/dev/null 2>&1 && docker pull {image} >/dev/null"
        f" && mkdir -p /tmp/k && (docker run --rm --name k1 -v /tmp/k:/out {image} "
        f"sh -c {shlex.quote(script)} > /tmp/k/out; echo $? > /tmp/k/status) & "
        "until [ -e /tmp/k/ready ]; do sleep 0.05; done; docker kill --signal USR1 k1; "
        "until [ -e /tmp/k/status ]; do sleep 0.05; done; cat /tmp/k/out /tmp/k/status"
    )
    done = on_worker(start)
    assert _out(done) == "k1\ngot-usr1\n3\n", done.stderr
    missing = on_worker("docker kill k1")
    assert (missing.exit_status, missing.stderr.decode()) == (
        1,
        "Error response from daemon: Cannot kill container: k1: No such container: k1\n",
    )
    long = f"setsid docker run --rm --name k2 {image} sleep 60 >/dev/null 2>&1 & "
    long += 'until [ -n "$(docker ps -q --filter name=k2)" ]; do sleep 0.05; done; '
    long += "docker rm -f k2; docker ps -q --filter name=k2 | wc -l; docker rm -f k2; echo $?"
    assert _out(on_worker(long)) == "k2\n0\n0\n"

    emulator.worker_fault(emulator.nodes()[0]["name"], "no-device")
    gone = on_worker(f"docker run --rm --device /dev/accel0 {image} true")
    assert gone.exit_status == 125
    assert 'adding custom device "/dev/accel0": no such file' in gone.stderr.decode()
    assert _out(on_worker(f"docker run --rm {image} sh -c 'echo /dev/accel*'")) == "/dev/accel*\n"


@CONFINED
def test_pid_host_shows_the_workers_pids_and_other_modes_are_refused(worker: Any) -> None:
    on_worker, wdir, digest = worker
    image = f"{NAME}@{digest}"
    mark = str(410000 + os.getpid() % 10000)
    setup = (
        f"export DOCKER_CONFIG=$HOME/.dk; {LOGIN} >/dev/null 2>&1 && docker pull {image} >/dev/null"
    )
    assert on_worker(setup).exit_status == 0
    # the container's own pid ($$, then sleep's by exec) is the worker's: its /proc has it
    script = f"echo $$ > /out/pid; exec sleep {mark}"
    start = (
        f"mkdir -p /tmp/p; setsid docker run --rm --name p1 --pid=host -v /tmp/p:/out {image} "
        f"sh -c {shlex.quote(script)} >/dev/null 2>&1 &"
    )
    assert on_worker(start).exit_status == 0
    pid_file = wdir / "root" / "tmp" / "p" / "pid"
    wait_until(pid_file.exists, "the container's pid")
    pid = pid_file.read_text().strip()
    seen = lambda: _out(on_worker(f"tr '\\0' ' ' < /proc/{pid}/cmdline"))  # noqa: E731
    wait_until(lambda: seen() == f"sleep {mark} ", "the worker to see the container's sleep")
    assert _out(on_worker("docker rm -f p1")) == "p1\n"
    joined = on_worker(f"docker run --rm --pid container:p1 {image} true")
    assert joined.exit_status == 125, joined.stderr.decode()
    assert "the emulated docker has only --pid=host" in joined.stderr.decode()
    bogus = on_worker(f"docker run --rm --pid=bogus {image} true")
    assert (bogus.exit_status, bogus.stderr.decode()) == (
        125,
        "docker: --pid: invalid PID mode.\nSee 'docker run --help'.\n",
    )
