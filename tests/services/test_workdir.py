"""Which files a work dir stages: git's ignore rules, --exclude, modes and hashes."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from tpuctl.errors import UsageError
from tpuctl.services.workdir import read_file, walk

TREE = {
    ".gitignore": "*.pyc\nbuild/\n/top.txt\n*.log\n!keep.log\ndocs/**/draft.md\n**/cache\n"
    "secret/\n!secret/ok.txt\nsub/x.txt\n\\#hash.txt\n",
    "train.py": "print('hi')\n",
    "top.txt": "anchored at the root: ignored\n",
    "a.pyc": "",
    "keep.log": "re-included\n",
    "other.log": "ignored\n",
    "build": "a file named build is not a directory: kept\n",
    "#hash.txt": "escaped pattern: ignored\n",
    "pkg/top.txt": "anchored pattern does not reach here: kept\n",
    "pkg/mod.py": "x = 1\n",
    "pkg/mod.pyc": "",
    "pkg/build/out.bin": "dir-only pattern, at any depth: ignored\n",
    "pkg/cache/blob": "ignored by **/cache\n",
    "docs/a/b/draft.md": "ignored by docs/**/draft.md\n",
    "docs/draft.md": "** matches zero directories too: ignored\n",
    "docs/final.md": "kept\n",
    "secret/ok.txt": "inside an ignored directory: cannot be re-included\n",
    "sub/x.txt": "inner slash anchors to the root: ignored\n",
    "other/sub/x.txt": "kept\n",
    "nested/.gitignore": "!*.log\n*.txt\n/only-here.md\n",
    "nested/debug.log": "re-included by the deeper file\n",
    "nested/notes.txt": "ignored by the deeper file\n",
    "nested/only-here.md": "ignored\n",
    "nested/deeper/only-here.md": "kept: anchored to nested/\n",
    "nested/deeper/more.txt": "ignored: nested's *.txt reaches below\n",
    "notes.txt": "the deeper rule does not reach up: kept\n",
    ".git/HEAD": "never staged\n",
}
EXPECTED = [
    ".gitignore",
    "build",
    "docs/final.md",
    "keep.log",
    "nested/.gitignore",
    "nested/debug.log",
    "nested/deeper/only-here.md",
    "notes.txt",
    "other/sub/x.txt",
    "pkg/mod.py",
    "pkg/top.txt",
    "train.py",
]


def make_tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_gitignore_rules(tmp_path: Path) -> None:
    assert walk(make_tree(tmp_path / "w", TREE)) == EXPECTED


def test_agrees_with_git_itself(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "w", {k: v for k, v in TREE.items() if not k.startswith(".git/")})
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "--others", "--exclude-standard"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    git_files = sorted(line.strip('"').replace("\\043", "#") for line in listed if line)
    assert walk(root) == git_files == EXPECTED


def test_excludes_win_over_gitignore(tmp_path: Path) -> None:
    root = make_tree(
        tmp_path / "w",
        {
            ".gitignore": "!*.ckpt\n",
            "train.py": "",
            "model.ckpt": "",
            "data/x.csv": "",
            "src/data/y.csv": "",
            "src/keep.py": "",
        },
    )
    assert walk(root, ["*.ckpt", "/data/"]) == [
        ".gitignore",
        "src/data/y.csv",
        "src/keep.py",
        "train.py",
    ]
    assert walk(root, ["data"]) == [".gitignore", "model.ckpt", "src/keep.py", "train.py"]


def test_links_git_file_and_errors(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "w", {"real.py": "x", ".git": "gitdir: elsewhere\n"})
    outside = make_tree(tmp_path / "outside", {"big.bin": "not ours"})
    (root / "link.py").symlink_to(root / "real.py")
    (root / "dirlink").symlink_to(outside, target_is_directory=True)
    (root / "broken").symlink_to(root / "nowhere")
    assert walk(root) == ["link.py", "real.py"]
    with pytest.raises(UsageError, match="is not a directory"):
        walk(root / "real.py")


def test_manifest_hashes_sizes_and_modes(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "w", {"run.sh": "#!/bin/sh\necho hi\n", "data.txt": "abc"})
    os.chmod(root / "run.sh", 0o700)
    os.chmod(root / "data.txt", 0o600)
    manifest = {relative: read_file(root / relative).entry for relative in walk(root)}
    assert manifest["data.txt"].to_json() == {
        "sha256": hashlib.sha256(b"abc").hexdigest(),
        "size": 3,
        "mode": 0o644,
    }
    assert manifest["run.sh"].mode == 0o755


def test_rules_of_the_enclosing_repository_apply(tmp_path: Path) -> None:
    repo = make_tree(
        tmp_path / "repo",
        {
            ".gitignore": "*.ckpt\n/proj/local.txt\n",
            "proj/.gitignore": "!keep.ckpt\n",
            "proj/train.py": "",
            "proj/model.ckpt": "",
            "proj/keep.ckpt": "",
            "proj/local.txt": "",
            "proj/secret.txt": "",
            "proj/sub/local.txt": "",
        },
    )
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "exclude").write_text("secret.txt\n")
    expected = [".gitignore", "keep.ckpt", "sub/local.txt", "train.py"]
    listed = subprocess.run(
        ["git", "ls-files", "--others", "--exclude-standard"],
        cwd=repo / "proj",
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert walk(repo / "proj") == sorted(listed) == expected
    # the repository's own root: its info/exclude applies, nothing from above it
    assert "proj/secret.txt" not in walk(repo)


def test_a_folder_holding_tpuctls_outputs_marker_is_left_out_wherever_it_is(tmp_path: Path):
    from tpuctl.services.workdir import MARKED, OUTPUTS_MARKER, select

    (tmp_path / "train.py").write_text("")
    for folder in ("runs/first", "logs"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "result.txt").write_text("an earlier job's")
    (tmp_path / "runs" / "first" / OUTPUTS_MARKER).write_text("")
    (tmp_path / "logs" / OUTPUTS_MARKER).write_text("")
    chosen = select(tmp_path, excludes=["logs/"])
    assert chosen.files == ["train.py"]
    assert chosen.omitted == {"runs/first/": MARKED}  # an ignored folder goes unsaid
