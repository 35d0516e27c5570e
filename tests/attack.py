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
