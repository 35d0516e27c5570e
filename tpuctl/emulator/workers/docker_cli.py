"""`docker` on an emulated worker: the subset of the docker CLI a TPU VM's agent uses.

It runs inside the worker's sandbox (standard library only, Python 3.8+, no site) and
talks to the worker's emulated daemon (containers.py) on /var/run/docker.sock: one JSON
line per request, the CLI's stdin/stdout/stderr passed along (SCM_RIGHTS) for `run`,
then the signals the CLI gets, while the daemon writes JSON lines back (`out`, `err`,
`exit`). Arguments are parsed strictly, as docker's own flag parser: an unknown flag is
`unknown flag: --x` and exit 125.

Commands: login (-u, -p, --password-stdin, SERVER), pull IMAGE, image inspect --format
'{{json .Config}}' IMAGE, run (--rm --name --net/--network --privileged --device -e/--env
--env-file -v/--volume -w/--workdir --entrypoint --init --shm-size --pid), kill [-s/--signal],
rm [-f/--force], ps [-q/--quiet] [-f/--filter name=...].
"""

import array
import base64
import contextlib
import json
import os
import signal
import socket
import sys

SOCKET = "/var/run/docker.sock"
# name -> (takes a value, canonical name) for each command's flags
_RUN = {
    "--rm": (False, "rm"),
    "--privileged": (False, "privileged"),
    "--init": (False, "init"),
    "--name": (True, "name"),
    "--net": (True, "net"),
    "--network": (True, "net"),
    "--device": (True, "device"),
    "-e": (True, "env"),
    "--env": (True, "env"),
    "--env-file": (True, "env_file"),
    "-v": (True, "volume"),
    "--volume": (True, "volume"),
    "-w": (True, "workdir"),
    "--workdir": (True, "workdir"),
    "--entrypoint": (True, "entrypoint"),
    "--shm-size": (True, "shm_size"),
    "--pid": (True, "pid"),
}
_FLAGS = {
    "login": {
        "-u": (True, "user"),
        "--username": (True, "user"),
        "-p": (True, "password"),
        "--password": (True, "password"),
        "--password-stdin": (False, "stdin"),
    },
    "pull": {},
    "image inspect": {"-f": (True, "format"), "--format": (True, "format")},
    "run": _RUN,
    "kill": {"-s": (True, "signal"), "--signal": (True, "signal")},
    "rm": {"-f": (False, "force"), "--force": (False, "force")},
    "ps": {"-q": (False, "quiet"), "--quiet": (False, "quiet"), "-f": (True, "filter")},
}
_FLAGS["ps"]["--filter"] = (True, "filter")
_FORWARDED = [
    s
    for s in signal.Signals
    if s not in (signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD, signal.SIGPIPE)
    and s.name not in ("SIGURG", "SIGWINCH")
]


class Usage(Exception):
    """A command line docker's parser refuses (exit 125)."""


def parse(command, argv):
    """(flags by canonical name: a list of values, positionals) of `argv`; flags end at
    the first positional for `run` (the rest are the container's arguments)."""
    table = _FLAGS[command]
    flags, positional = {}, []
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--":
            positional += argv[i:]
            break
        if not arg.startswith("-") or arg == "-":
            positional.append(arg)
            if command == "run":
                positional += argv[i:]
                break
            continue
        name, eq, value = arg.partition("=")
        if not arg.startswith("--") and len(arg) > 2:  # -eNAME=x, -qf
            name, eq, value = arg[:2], "=", arg[2:]
        if name not in table:
            if name.startswith("--"):
                raise Usage("unknown flag: " + name)
            raise Usage(f"unknown shorthand flag: '{name[1:2]}' in {arg}")
        takes, key = table[name]
        if takes and not eq:
            if i >= len(argv):
                raise Usage("flag needs an argument: " + name)
            value, i = argv[i], i + 1
        elif not takes:
            if eq and value not in ("true", "false"):
                raise Usage(f'invalid argument "{value}" for "{name}" flag')
            value = "false" if value == "false" else "true"
        flags.setdefault(key, []).append(value)
    return flags, positional


def _config_dir():
    return os.environ.get("DOCKER_CONFIG") or os.path.join(os.path.expanduser("~"), ".docker")


def _auths():
    try:
        with open(os.path.join(_config_dir(), "config.json")) as f:
            return json.load(f).get("auths") or {}
    except (OSError, ValueError, AttributeError):
        return {}


def _auth_for(image):
    host = image.split("/", 1)[0]
    auths = _auths()
    entry = auths.get(host) or auths.get("https://" + host) or {}
    return entry.get("auth") if isinstance(entry, dict) else None


def _send(sock, message, fds=()):
    data = (json.dumps(message) + "\n").encode()
    if fds:
        rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())]
        sent = sock.sendmsg([data], rights)
        data = data[sent:]
    if data:  # none left: a daemon that refused at once may have closed already (EPIPE)
        sock.sendall(data)


def _connect():
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(SOCKET)
    except OSError:
        sys.stderr.write(
            f"Cannot connect to the Docker daemon at unix://{SOCKET}. "
            "Is the docker daemon running?\n"
        )
        sys.exit(1)
    return sock


def talk(request, fds=(), during=None):
    """Send `request`, echo what the daemon says, return its exit status."""
    sock = _connect()
    _send(sock, request, fds)
    if during is not None:
        during(sock)
    with sock.makefile("rb") as replies:
        for line in replies:
            try:
                reply = json.loads(line)
            except ValueError:
                continue
            for key, stream in (("out", sys.stdout), ("err", sys.stderr)):
                if key in reply:
                    stream.write(reply[key])
                    stream.flush()
            if "exit" in reply:
                return int(reply["exit"])
    sys.stderr.write("docker: the daemon closed the connection\n")
    return 125 if request.get("op") == "run" else 1


def _one(flags, key, default=None):
    values = flags.get(key)
    return values[-1] if values else default


def login(flags, args):
    if len(args) > 1:
        raise Usage('"docker login" requires at most 1 argument.')
    server = args[0] if args else "https://index.docker.io/v1/"
    host = server.split("://", 1)[-1].rstrip("/")
    user = _one(flags, "user", "")
    if _one(flags, "stdin") == "true":
        if _one(flags, "password"):
            raise Usage("--password and --password-stdin are mutually exclusive")
        password = sys.stdin.read().rstrip("\r\n")
    else:
        password = _one(flags, "password")
        if password is None:
            sys.stderr.write("Error: Cannot perform an interactive login from a non TTY device\n")
            return 1
        sys.stderr.write(
            "WARNING! Using --password via the CLI is insecure. Use --password-stdin.\n"
        )
    auth = base64.b64encode((f"{user}:{password}").encode()).decode()
    status = talk({"op": "login", "host": host, "auth": auth})
    if status != 0:
        return status
    path = os.path.join(_config_dir(), "config.json")
    try:
        with open(path) as f:
            config = json.load(f)
    except (OSError, ValueError):
        config = {}
    if not isinstance(config, dict):
        config = {}
    config.setdefault("auths", {})[host] = {"auth": auth}
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(config, f, indent="\t")
    os.chmod(path + ".tmp", 0o600)
    os.replace(path + ".tmp", path)
    sys.stderr.write(
        f"WARNING! Your password will be stored unencrypted in {path}.\n"
        "Configure a credential helper to remove this warning. See\n"
        "https://docs.docker.com/engine/reference/commandline/login/#credentials-store\n\n"
    )
    print("Login Succeeded")
    return 0


def _env_file(path):
    """`--env-file`: NAME=VALUE lines (a bare NAME: taken from here), # comments."""
    found = []
    with open(path) as f:
        for line in f.read().splitlines():
            line = line.lstrip()
            if line and not line.startswith("#"):
                found.append(_env(line))
    return [e for e in found if e is not None]


def _env(item):
    if "=" in item:
        return item
    return f"{item}={os.environ[item]}" if item in os.environ else None


def run(flags, args):
    if not args:
        raise Usage('"docker run" requires at least 1 argument.')
    env = []
    try:
        for path in flags.get("env_file", []):
            env += _env_file(path)
    except OSError as exc:
        sys.stderr.write(f"docker: open {exc.filename}: {exc.strerror.lower()}.\n")
        return 125
    env += [e for e in map(_env, flags.get("env", [])) if e is not None]
    pid = _one(flags, "pid")
    if pid is not None and pid != "host" and not pid.startswith("container:"):
        raise Usage("docker: --pid: invalid PID mode.")  # docker's own check of the mode
    request = {
        "op": "run",
        "image": args[0],
        "args": args[1:],
        "name": _one(flags, "name"),
        "net": _one(flags, "net", "host"),
        "pid": pid,
        "devices": flags.get("device", []),
        "env": env,
        "volumes": flags.get("volume", []),
        "workdir": _one(flags, "workdir"),
        "entrypoint": _one(flags, "entrypoint"),
        "auth": _auth_for(args[0]),
        "hostname": socket.gethostname(),
    }

    def forward(sock):
        def handler(signum, frame):
            with contextlib.suppress(OSError):
                _send(sock, {"signal": signum})

        for sig in _FORWARDED:
            with contextlib.suppress(OSError, ValueError):
                signal.signal(sig, handler)

    return talk(request, (0, 1, 2), forward)


def main(argv):
    command = argv[0] if argv else ""
    rest = argv[1:]
    if command == "image" and rest[:1] == ["inspect"]:
        command, rest = "image inspect", rest[1:]
    if command not in _FLAGS:
        sys.stderr.write(
            "docker: '{}' is not a docker command.\nSee 'docker --help'\n".format(
                " ".join(argv[:1])
            )
        )
        return 1
    try:
        flags, args = parse(command, rest)
        if command == "login":
            return login(flags, args)
        if command == "run":
            return run(flags, args)
        if command in ("pull", "kill", "rm") and not args:
            raise Usage(f'"docker {command}" requires at least 1 argument.')
        if command == "pull":
            if len(args) != 1:
                raise Usage('"docker pull" requires exactly 1 argument.')
            return talk({"op": "pull", "image": args[0], "auth": _auth_for(args[0])})
        if command == "image inspect":
            return talk({"op": "inspect", "images": args, "format": _one(flags, "format")})
        if command == "kill":
            return talk({"op": "kill", "names": args, "signal": _one(flags, "signal", "KILL")})
        if command == "rm":
            return talk({"op": "rm", "names": args, "force": _one(flags, "force") == "true"})
        return talk(
            {
                "op": "ps",
                "quiet": _one(flags, "quiet") == "true",
                "filters": flags.get("filter", []),
            }
        )
    except Usage as exc:
        sys.stderr.write(f"{exc}\nSee 'docker {command} --help'.\n")
        return 125


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
