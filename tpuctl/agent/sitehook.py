"""What every Python process of a job runs first: tpuctl's `sitecustomize.py`.

The agent puts a folder of tpuctl's first on the script's PYTHONPATH (`site_env`), so
that each Python process of the job that starts with it (the setup's and the script's,
and their Python children) runs the `sitecustomize.py` in it, which:
- registers the standard library's faulthandler on SIGUSR2, writing all its threads'
  stacks to `<job folder>/stacks/<pid>.txt` (`tpuctl stacks`: stacks.py);
- puts a finder first on `sys.meta_path` that finds nothing: the first time the process
  imports `jax` or `tensorflow`, it starts the profile listener (`LISTENER`, imported
  from the same folder as `_tpuctl_profile`) and does nothing more (`tpuctl profile`:
  profile.py). A process that imports neither never starts it;
- then imports the sitecustomize it hides, if any.

The listener is one daemon thread blocked opening a FIFO of its own,
`<job folder>/profile/<pid>.fifo` (the folder is the job's, mode 0700: only the job's
user can ask); a capture runs in a thread of its own, one at a time. Until asked it
takes no CPU time and no lock: a profile costs nothing measurable until one is taken,
so every job has it (no option turns it on). Asked, it
waits for the start time given (this machine's clock), traces in-process with the
framework's own profiler (`jax.profiler.start_trace` / `stop_trace`, or TensorFlow's
`tf.profiler.experimental.start` / `stop`) into the folder given, which the profiler
lays out as TensorBoard and XProf read (`plugins/profile/<run>/<host>.xplane.pb`), and
answers in `<pid>.<take>.json` beside its FIFO. In-process tracing needs no profiler
server (no port opened, none left listening) and no package beyond the framework, and
works while the script's main thread is blocked in a computation (JAX and TensorFlow
release the GIL while they compute).

Standard library only, Python 3.8+, like every module of the agent (bundle.py); the two
texts below run in the job's own Python, which may be any version the job chose.
"""

from __future__ import annotations

import os
from pathlib import Path

STACKS_VAR = "TPUCTL_STACKS_DIR"  # where a registered process writes its stacks
PROFILE_VAR = "TPUCTL_PROFILE_DIR"  # where a JAX or TensorFlow process listens
LISTENER_MODULE = "_tpuctl_profile"
FRAMEWORKS = ("jax", "tensorflow")  # the top-level imports that start the listener

SITE = '''\
"""tpuctl: `tpuctl stacks` asks this interpreter for its threads' stacks (SIGUSR2,
faulthandler); `tpuctl profile` asks it for a profile once it imports jax or tensorflow
(_tpuctl_profile.py); then the sitecustomize this one hides, if any, runs."""
import os as _os


def _tpuctl_register():
    folder = _os.environ.get("TPUCTL_STACKS_DIR")
    if not folder or not _os.path.isdir(folder):
        return
    try:
        import faulthandler
        import signal

        out = open(_os.path.join(folder, "%d.txt" % _os.getpid()), "ab", buffering=0)
        # chain=False: chaining to SIGUSR2's default action would end the process
        faulthandler.register(signal.SIGUSR2, file=out, all_threads=True, chain=False)
    except Exception:
        pass


class _TpuctlProfileFinder(object):
    """Finds no module: starts tpuctl's profile listener when jax or tensorflow is
    first imported."""

    started = False

    def find_spec(self, name, path=None, target=None):
        if not self.started and path is None and name in ("jax", "tensorflow"):
            self.started = True
            try:
                import _tpuctl_profile

                _tpuctl_profile.start()
            except Exception:
                pass
        return None


def _tpuctl_profiler():
    folder = _os.environ.get("TPUCTL_PROFILE_DIR")
    if folder and _os.path.isdir(folder):
        import sys

        sys.meta_path.insert(0, _TpuctlProfileFinder())


def _tpuctl_chain():
    import importlib
    import sys

    here = _os.path.dirname(_os.path.abspath(__file__))
    saved = list(sys.path)
    me = sys.modules.pop("sitecustomize", None)
    sys.path[:] = [p for p in sys.path if _os.path.abspath(p or ".") != here]
    try:
        importlib.import_module("sitecustomize")
    except ImportError as e:
        if e.name != "sitecustomize":
            raise
    finally:
        sys.path[:] = saved
        sys.modules["sitecustomize"] = me  # the import system takes its module back


_tpuctl_register()
_tpuctl_profiler()
_tpuctl_chain()
'''

LISTENER = '''\
"""tpuctl: `tpuctl profile` takes a profile of this process with the profiler of the
framework it imported (jax, else tensorflow), asked through a FIFO of its own."""
import json
import os
import sys
import threading
import time

FOLDER = os.environ.get("TPUCTL_PROFILE_DIR", "")


def _profiler():
    """(framework, start(folder), stop()) of the framework this process imported."""
    if "jax" in sys.modules:
        import jax.profiler

        return "jax", jax.profiler.start_trace, jax.profiler.stop_trace
    if "tensorflow" in sys.modules:
        import tensorflow as tf

        return "tensorflow", tf.profiler.experimental.start, tf.profiler.experimental.stop
    raise RuntimeError("neither jax nor tensorflow is imported")


def capture(ask):
    """Trace from ask["at"] (time.time()) for ask["seconds"] into ask["dir"]."""
    at, seconds, folder = float(ask["at"]), float(ask["seconds"]), str(ask["dir"])
    framework, start, stop = _profiler()
    time.sleep(max(0.0, at - time.time()))
    began = time.time()
    start(folder)
    try:
        time.sleep(max(0.0, began + seconds - time.time()))
    finally:
        stop()
    return {"framework": framework, "began": began, "ended": time.time()}


def _answer(name, value):
    path = os.path.join(FOLDER, name)
    with open(path + ".part", "w") as f:
        json.dump(value, f)
    os.replace(path + ".part", path)


_BUSY = threading.Lock()  # one capture at a time


def _take(take, ask):
    try:
        answer = capture(ask)
    except BaseException as e:
        answer = {"error": "%s: %s" % (type(e).__name__, e)}
    finally:
        _BUSY.release()
    answer["pid"] = os.getpid()
    try:
        _answer("%d.%s.json" % (os.getpid(), take), answer)
    except OSError:
        pass


def _serve(fifo):
    while True:
        with open(fifo, "rb") as f:  # blocks, with no CPU time, until the agent writes
            data = f.read(65536)
        try:
            ask = json.loads(data.decode())
            take = str(ask["take"])
        except Exception:
            continue
        if not take.replace("-", "").isalnum():
            continue
        if not _BUSY.acquire(blocking=False):
            busy = {"error": "a profile of this process is being taken already: try again "
                    "once it has ended", "pid": os.getpid()}
            try:
                _answer("%d.%s.json" % (os.getpid(), take), busy)
            except OSError:
                pass
            continue
        threading.Thread(target=_take, args=(take, ask), name="tpuctl-profile-take").start()


def _forget(fifo):
    try:
        os.unlink(fifo)
    except OSError:
        pass


def start():
    """The listener of this process: its FIFO, and the thread waiting on it."""
    import atexit

    fifo = os.path.join(FOLDER, "%d.fifo" % os.getpid())
    _forget(fifo)
    os.mkfifo(fifo, 0o600)
    atexit.register(_forget, fifo)
    threading.Thread(target=_serve, args=(fifo,), name="tpuctl-profile", daemon=True).start()
'''


def folders(job_dir: Path) -> tuple[Path, Path, Path]:
    """The job's folders of tpuctl's sitecustomize, of the stacks and of the profiles."""
    return job_dir / "site", job_dir / "stacks", job_dir / "profile"


def site_env(job_dir: Path, env: dict[str, str]) -> dict[str, str]:
    """What the script's environment gets so that its Python processes can be asked for
    their stacks and profiles: tpuctl's sitecustomize first on PYTHONPATH, and the folders
    they write to. Made before the setup and the script run."""
    site, dumps, profiles = folders(job_dir)
    for folder in (site, dumps, profiles):
        folder.mkdir(mode=0o700, exist_ok=True)
    (site / "sitecustomize.py").write_text(SITE)
    (site / f"{LISTENER_MODULE}.py").write_text(LISTENER)
    path = os.pathsep.join(p for p in (str(site), env.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path, STACKS_VAR: str(dumps), PROFILE_VAR: str(profiles)}
