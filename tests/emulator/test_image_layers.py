"""Layers applied as the emulated docker applies them (workers/images.py), on files here:
in order, whiteouts of the layers below, and nothing written outside the image's root,
whatever a layer's paths, links or symlinks say."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from tpuctl.emulator.workers.images import ImageError, apply_layer


def _layer(path: Path, *members: tuple[str, str, str]) -> Path:
    """A plain tar of (name, kind: file/dir/symlink/link, data or link target)."""
    with tarfile.open(path, "w") as tar:
        for name, kind, data in members:
            info = tarfile.TarInfo(name)
            if kind == "dir":
                info.type = tarfile.DIRTYPE
            elif kind in ("symlink", "link"):
                info.type = tarfile.SYMTYPE if kind == "symlink" else tarfile.LNKTYPE
                info.linkname = data
            else:
                info.size = len(data.encode())
            body = io.BytesIO(data.encode()) if kind == "file" else None
            tar.addfile(info, body)
    return path


def test_whiteouts_hide_what_the_layers_below_have(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    first = [("etc/a", "file", "1"), ("etc/b", "file", "1"), ("d/old", "file", "1")]
    apply_layer(str(root), _layer(tmp_path / "1.tar", *first))
    whiteouts = [("etc/.wh.b", "file", ""), ("d/.wh..wh..opq", "file", "")]
    second = [*whiteouts, ("d/new", "file", "2"), ("etc/a", "file", "2")]
    apply_layer(str(root), _layer(tmp_path / "2.tar", *second))
    found = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    assert found == ["d", "d/new", "etc", "etc/a"]
    assert (root / "etc" / "a").read_text() == "2"


def test_nothing_is_written_outside_the_images_root(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret").write_text("host")
    # a symlink to / (or out of the root) is followed as in the image: into the root
    apply_layer(
        str(root),
        _layer(tmp_path / "1.tar", ("up", "symlink", str(outside)), ("rel", "symlink", "../../..")),
    )
    apply_layer(
        str(root),
        _layer(tmp_path / "2.tar", ("up/written", "file", "x"), ("rel/also", "file", "y")),
    )
    assert not (outside / "written").exists()
    assert (root / str(outside).lstrip("/") / "written").read_text() == "x"
    assert (root / "also").read_text() == "y"
    for bad in (("../escape", "file", "x"), ("x", "link", "../outside/secret")):
        with pytest.raises(ImageError, match="out of the image's root|invalid hard link"):
            apply_layer(str(root), _layer(tmp_path / "bad.tar", bad))
    with pytest.raises(ImageError, match="invalid hard link"):  # a link through a symlink
        apply_layer(
            str(root),
            _layer(
                tmp_path / "3.tar", ("s", "symlink", str(outside / "secret")), ("h", "link", "s")
            ),
        )
    assert not (tmp_path / "escape").exists()
    assert (outside / "secret").read_text() == "host"
