"""The examples in the README, docs/ and contributing/ run as written against the emulator,
and the pages speak of the product alone.

contributing/ holds the contributors' pages (architecture, the runner's internals, the
emulator's fidelity, development, live testing): they are held to the same rules as
docs/ (shell blocks marked, runnable ones run, no issue numbers, no files outside the
repository, no history); they may name modules and tests, which these checks allow on
any page. Only docs/ counts toward the size of the user docs (tests/test_docs_size.py).

Every fenced shell block says what it is by its info string:
- `sh runnable`: run by this test, with the other runnable blocks of the same page, in
  order, in one bash (`set -euo pipefail`), each page from a fresh emulator (the blocks
  start it with `--fresh`). The one change made to the text: the emulator's default port
  8470 becomes a free one, so the run never meets another emulator. They run in a
  scratch folder that stands for the clone a user reads the page in (examples/ linked as
  in a checkout), and must leave no file in it that the clone's .gitignore does not cover:
  a block that writes files makes a scratch folder of its own first.
- `sh cloud`: needs the real cloud (a project, credentials), or a second terminal, gcloud,
  or a node made earlier on the page; not run here.
- `sh machine`: installs or changes the machine it runs on (make, pip, systemctl); not
  run here.
A page whose example installs packages (PACKAGES) gets, in the shell its blocks run in, a
PIP_INDEX_URL on 127.0.0.1 serving wheels of the same names and versions made by the test:
the emulator's workers use the pip settings of the shell that started the emulator.
A `cron` block's line is run as cron runs it: `env -i` with cron's few variables,
through /bin/sh, with HOME in the test's tmp dir.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from fnmatch import fnmatch
from pathlib import Path

import pytest

from tests.cli.env_index import Index, serving
from tpuctl.emulator.core.ports import free_port

ROOT = Path(__file__).resolve().parents[1]
PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "contributing").glob("*.md")),
]
BLOCK = re.compile(r"^```sh runnable\n(.*?)^```", re.S | re.M)
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```", re.S | re.M)
SHELL_KINDS = {"sh runnable", "sh cloud", "sh machine"}
# page -> the pinned requirements its example installs, and what it must say of them
# (stderr: `run`'s last lines; stdout: `jobs JOB`)
PACKAGES = {
    "environments.md": (
        ROOT / "examples" / "env" / "requirements.txt",
        ["built on 1 worker(s)", "from the bucket on 1 worker(s)"],
        ["tabulate 0.9.0 from", "1 package, from the bucket on 1 worker(s)"],
    ),
}


def runnable(page: Path) -> str:
    return "".join(BLOCK.findall(page.read_text()))


RUNNABLE = [p for p in PAGES if runnable(p)]


def test_the_pages_people_start_from_have_runnable_examples() -> None:
    names = {p.name for p in RUNNABLE}
    assert {"README.md", "ssh.md", "emulator.md"} <= names


def test_each_page_starts_clean_so_the_pages_run_in_any_order_in_one_home() -> None:
    """Each page's example starts from a fresh emulator, and a page that writes tpuctl's
    config file (`tpuctl init`) writes its own first: so the pages run one after another
    in one HOME as each runs alone (all of them, in the order listed, passed so; that
    run takes minutes, this guard keeps what made it pass)."""
    for page in RUNNABLE:
        lines = [
            line.strip()
            for line in runnable(page).splitlines()
            if line.strip() and not line.strip().startswith("#")
        ]
        starts = [i for i, line in enumerate(lines) if "tpuctl emulator start" in line]
        assert starts and "--fresh" in lines[starts[0]], page.name
        assert not any(line.startswith("tpuctl ") for line in lines[: starts[0]]), page.name
        writes = [i for i, line in enumerate(lines) if re.search(r"\btpuctl init\b", line)]
        own = [i for i, line in enumerate(lines) if line.startswith("export TPUCTL_CONFIG=")]
        assert not writes or (own and own[0] < writes[0]), page.name


def pins(page: Path) -> list[tuple[str, str]]:
    """(name, version) of each `name==version` line of the page's requirements."""
    lines = PACKAGES[page.name][0].read_text().split()
    return [(name, version) for name, version in (line.split("==") for line in lines)]


@pytest.fixture
def pip_index(page: Path, tmp_path: Path) -> Iterator[Index | None]:
    """The index the page's example installs from (with wheels of its pins), or None."""
    if page.name not in PACKAGES:
        yield None
        return
    with serving(tmp_path / "index") as index:
        for name, version in pins(page):
            index.add(name, version, "")
        yield index


# A page's script is given PAGE_BUDGET seconds: a guard against a hang, not a speed check.
# It runs beside the other long tests on a loaded 2-core machine (`make test`'s 4
# workers start the long tests together), where a page of 35-55 s has taken over 240 s.
PAGE_BUDGET = 540


@pytest.mark.long
@pytest.mark.timeout(PAGE_BUDGET + 90)
@pytest.mark.parametrize("page", RUNNABLE, ids=[p.name for p in RUNNABLE])
def test_runnable_examples_run_as_written(
    page: Path, isolated_env: Path, tmp_path: Path, pip_index: Index | None
) -> None:
    port = free_port()
    script = runnable(page).replace("127.0.0.1:8470", f"127.0.0.1:{port}")
    script = script.replace("emulator start --detach", f"emulator start --detach --port {port}")
    work = tmp_path / "work"
    work.mkdir()
    (work / "examples").symlink_to(ROOT / "examples")  # paths as in a checkout
    env = {k: v for k, v in os.environ.items() if k != "TPUCTL_EMULATOR_HOST"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["TPUCTL_STATE_DIR"] = str(tmp_path / "state")
    env["TMPDIR"] = str(tmp_path)  # mktemp in an example writes here
    if pip_index is not None:  # its pip settings, and no others
        env = {k: v for k, v in env.items() if not k.startswith("PIP_")}
        env.update(PIP_INDEX_URL=pip_index.url, PIP_CONFIG_FILE=os.devnull)
    before = _new_files(work)
    try:
        r = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=PAGE_BUDGET,
            check=False,
        )
    except subprocess.TimeoutExpired as e:  # say where it stood, for the next look
        pytest.fail(
            f"{page.name}: still running after {PAGE_BUDGET} s\n--- stdout\n{_text(e.output)}"
            f"\n--- stderr\n{_text(e.stderr)}"
        )
    finally:  # whatever happened, no emulator is left running
        subprocess.run(
            [sys.executable, "-m", "tpuctl", "emulator", "stop"],
            env=env,
            capture_output=True,
            timeout=60,
            check=False,
        )
    assert r.returncode == 0, (
        f"{page.name}:\n{script}\n--- stdout\n{r.stdout}\n--- stderr\n{r.stderr}"
    )
    # the work dir stands in for the clone a user runs the page from (examples/ as in a
    # checkout): the blocks leave in it nothing its .gitignore does not cover
    assert _new_files(work) == before, f"{page.name}: the blocks wrote into the clone"
    if pip_index is not None:
        _, err, out = PACKAGES[page.name]
        assert all(said in r.stderr for said in err), (err, r.stderr)
        assert all(said in r.stdout for said in out), (out, r.stdout)
        # one resolution, by the first run's build: the second run asked the index nothing
        resolved = [p for p in pip_index.requests if p.startswith("/simple/")]
        assert sorted(resolved) == sorted(f"/simple/{name}/" for name, _ in pins(page))


def _new_files(work: Path) -> set[str]:
    """The files under `work` (through its examples/ link into the clone) that `git status`
    would show: those the clone's .gitignore does not cover."""
    rules = [r for r in (ROOT / ".gitignore").read_text().split() if not r.startswith("#")]

    def ignored(rel: Path) -> bool:
        for rule in rules:
            pattern = rule.strip("/")
            if rule.startswith("/") and fnmatch(rel.as_posix(), pattern):
                return True
            if not rule.startswith("/") and fnmatch(rel.name, pattern):
                return True
        return False

    found = set()
    for top, dirs, files in os.walk(work, followlinks=True):
        here = Path(top).relative_to(work)
        dirs[:] = [d for d in dirs if not ignored(here / d)]
        found |= {(here / f).as_posix() for f in files if not ignored(here / f)}
    return found


def test_new_files_are_what_git_status_would_show(tmp_path: Path) -> None:
    for name in ("outputs/j1/a.txt", "examples/outputs/x", "x/__pycache__/m.pyc", "job.toml"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    assert _new_files(tmp_path) == {"examples/outputs/x", "job.toml"}


def _text(output: bytes | str | None) -> str:
    if isinstance(output, bytes):
        return output.decode("utf-8", "replace")
    return output or ""


def test_the_readme_shows_every_capture_that_make_docs_images_writes() -> None:
    script = (ROOT / "scripts" / "docs_images.py").read_text()
    names = re.findall(r'capture\(\s*"(\w+)"', script)
    assert names, "no capture found in scripts/docs_images.py"
    readme = (ROOT / "README.md").read_text()
    for name in names:
        assert (ROOT / "docs" / "images" / f"{name}.svg").is_file(), name
        assert f"(docs/images/{name}.svg)" in readme, name


def test_metrics_md_names_every_metric_with_its_kind_type_and_unit() -> None:
    """Issue 12: the metric names and their sources are in docs/ — every metric the
    emulator serves and tpuctl reads, on docs/metrics.md's table with what the emulator
    says of it, and the sources named."""
    from tpuctl.cloud import monitoring
    from tpuctl.emulator.monitoring.query import METRICS, RESOURCE
    from tpuctl.services import usage

    page = (ROOT / "docs" / "metrics.md").read_text()
    rows = {line.split("|")[1].strip(" `"): line for line in page.splitlines()
            if line.startswith("| `tpu.googleapis.com/")}  # fmt: skip
    for metric, (kind, value_type, unit, _) in METRICS.items():
        assert metric in rows, metric
        assert f"{kind}, {value_type}" in rows[metric] and f"| {unit} " in rows[metric], metric
    assert monitoring.IDLE in rows and monitoring.TENSORCORE in rows
    assert f"**`{RESOURCE}`**" in page and monitoring.RESOURCE == RESOURCE
    for source in ("tpu-node-monitoring", "performance-guide", "latency-n-retention",
                   "kHighlyInfeedBoundThresholdInPercent"):  # fmt: skip
        assert source in page, source
    assert f"below {usage.INPUT_BOUND:.0f}%" in page


def _fences(page: Path) -> list[tuple[int, str, str]]:
    text = page.read_text()
    return [
        (text[: m.start()].count("\n") + 1, m.group(1).strip(), m.group(2))
        for m in FENCE.finditer(text)
    ]


def test_every_shell_block_is_run_or_marked_as_not_run() -> None:
    unmarked = [
        f"{page.name}:{line}: ```{info}"
        for page in PAGES
        for line, info, _ in _fences(page)
        if info.split(" ", 1)[0] in ("sh", "bash", "shell", "console") and info not in SHELL_KINDS
    ]
    assert not unmarked, "mark each as `sh runnable`, `sh cloud` or `sh machine`:\n" + "\n".join(
        unmarked
    )


# What a user doc must not say: files outside the repository, machine paths, the history
# of how the code came to be. `issue N` of a public repository is a citation ("marin issue
# 87" after its owner/name, "compute-image-packages issue 692"): the word before says so.
INTERNAL = [
    re.compile(r"(?<![\w.-])shared/"),
    re.compile(r"(?<![\w.-])/work/"),
    re.compile(r"\bsessions? \d+\b", re.I),
    re.compile(r"\b(?:earlier|previous|later|next|other|this|last) sessions?\b", re.I),
    re.compile(r"\bsessions'", re.I),
]
ISSUE = re.compile(r"\b[Ii]ssues? (?:\d+|N)\b")


def internal_references(text: str) -> list[str]:
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        found += [f"{n}: {m.group(0)!r}" for p in INTERNAL for m in p.finditer(line)]
        for m in ISSUE.finditer(line):
            head = line[: m.start()]
            before = head.split()[-1] if head[-1:].isspace() and head.split() else ""
            if "/" not in before and "-" not in before:
                found.append(f"{n}: {m.group(0)!r}")
    return found


def test_internal_references_are_recognised() -> None:
    bad = (
        "see ../shared/reference/tpu-facts.md\nfrom /work/main/x\nFrom issue 11, to do\n"
        "(issue 15 §3)\nIssue 13 §4: two dirs\nin session 2\ngathered by an earlier session\n"
        "shared with other sessions' runs\n"
    )
    flagged = {hit.split(":")[0] for hit in internal_references(bad)}
    assert flagged == {str(n) for n in range(1, 9)}, internal_references(bad)  # every line
    fine = (
        "an SSH session\nthe upload session\nin a session of its own\ndetached (own session)\n"
        "marin-community/marin issue 87\ncompute-image-packages issue 692\nshared_dir/\n"
    )
    assert internal_references(fine) == []


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_pages_speak_of_the_product_alone(page: Path) -> None:
    assert internal_references(page.read_text()) == []


def test_the_cron_line_runs_as_cron_runs_it(isolated_env: Path, tmp_path: Path) -> None:
    (cron,) = [body for page in PAGES for _, info, body in _fences(page) if info == "cron"]
    command = cron.strip().split(None, 5)[5]  # after the five time fields
    home = tmp_path / "home"
    (home / "tpuctl" / ".venv" / "bin").mkdir(parents=True)
    # the checkout of the README's install: its venv's tpuctl
    (home / "tpuctl" / ".venv" / "bin" / "tpuctl").symlink_to(
        Path(sys.executable).parent / "tpuctl"
    )
    port = free_port()
    state = tmp_path / "state"
    env = {k: v for k, v in os.environ.items() if k != "TPUCTL_EMULATOR_HOST"}
    env["TPUCTL_STATE_DIR"] = str(state)
    start = [sys.executable, "-m", "tpuctl", "emulator", "start", "--detach", "--fresh"]
    started = subprocess.run([*start, "--port", str(port)], env=env, capture_output=True,
                             text=True, timeout=120, check=False)  # fmt: skip
    try:
        assert started.returncode == 0, started.stderr
        cron_env = {
            "HOME": str(home), "LOGNAME": "tpuctl", "SHELL": "/bin/sh", "PATH": "/usr/bin:/bin",
            # the emulator stands in for the cloud (and for the key, which it does not read)
            "TPUCTL_EMULATOR_HOST": f"127.0.0.1:{port}", "TPUCTL_STATE_DIR": str(state),
        }  # fmt: skip
        r = subprocess.run(["env", "-i", *(f"{k}={v}" for k, v in cron_env.items()),
                            "/bin/sh", "-c", command], capture_output=True, text=True,
                           timeout=120, check=False)  # fmt: skip
        log = (home / "tpuctl-gc.log").read_text()
        assert r.returncode == 0, (command, r.stderr, log)
        assert "error" not in log, log
    finally:
        subprocess.run([sys.executable, "-m", "tpuctl", "emulator", "stop"], env=env,
                       capture_output=True, timeout=60, check=False)  # fmt: skip
