"""Reference solutions of the bundled action tasks: per turn, the (operator, reviewer) answers."""

from __future__ import annotations

import json
from typing import Any


def act(action: str, prose: str = "Next step.", **params: Any) -> str:
    """An answer with prose and one action in a ```json fence."""
    return f"{prose}\n```json\n{json.dumps({'action': action, 'parameters': params})}\n```"


def acts(*pairs: tuple[str, dict[str, Any]]) -> str:
    """An answer with several actions in one list."""
    body = [{"action": a, "parameters": p} for a, p in pairs]
    return f"Doing several things.\n```json\n{json.dumps(body)}\n```"


DONE = act("complete_task", "All done.", summary="The request is complete and verified.")


def locate(messages: list[dict[str, str]], task_of_prompt: dict[str, str]) -> tuple[str, int]:
    """(task id, turn) of an agent's chat: turn 1 is the user message that starts with a task's prompt (after
    the demonstration exchange); each later turn adds one user message."""
    users = [m["content"] for m in messages if m["role"] == "user"]
    for i, text in enumerate(users):
        for prompt, task_id in task_of_prompt.items():
            if text.startswith(prompt):
                return task_id, len(users) - i
    raise KeyError("no task prompt in the chat")


SLUGIFY = '''import re


def slugify(text):
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
'''
FIB = '''def fib(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a
'''
REPORT = '''import csv


def count(path):
    with open(path) as f:
        return sum(1 for _ in csv.DictReader(f))


def total(path):
    with open(path) as f:
        return float(sum(float(row["amount"]) for row in csv.DictReader(f)))


if __name__ == "__main__":
    value = total("sales.csv")
    with open("report.txt", "w") as f:
        f.write(f"total: {value}\\n")
    print(value)
'''
PASSWORD = '''def is_strong(password):
    return (len(password) >= 8 and any(c.isdigit() for c in password)
            and any(c.isupper() for c in password) and any(c.islower() for c in password))
'''
STATS = '''def mean(values):
    return sum(values) / len(values) if values else 0.0


def summary(values):
    return {"n": len(values), "mean": mean(values)}
'''

REFERENCE: dict[str, list[tuple[str, str]]] = {
    "ts-config-json": [
        (act("read_file", path="config.json"), act("read_file", path="app.py")),
        (act("create_file", "The trailing comma breaks JSON.", path="config.json",
             content='{\n  "port": 8080,\n  "debug": false\n}\n'),
         act("run_python", code="import app\nprint(app.load())")),
        (act("run_python", code="import app\nprint(app.load())"), DONE),
    ],
    "ts-stats-empty": [
        (act("read_file", path="stats.py"), act("run_python", code="from stats import summary\nprint(summary([]))")),
        (act("create_file", path="stats.py", content=STATS),
         act("run_python", code="from stats import summary\nprint(summary([]), summary([1, 2]))")),
        (act("read_file", path="stats.py"), DONE),
    ],
    "ts-service-cache": [
        (act("api_call", method="GET", url="http://status.shop.test/v1/health"),
         act("api_call", method="GET", url="http://status.shop.test/v1/cache")),
        (act("api_call", method="POST", url="http://status.shop.test/v1/cache", body={"enabled": True}),
         act("create_file", path="incident.md", content="# Incident\nCause: the cache was disabled.\n")),
        (act("api_call", method="GET", url="http://status.shop.test/v1/health"), DONE),
    ],
    "ts-queue-stuck": [
        (act("api_call", method="GET", url="http://jobs.internal.test/v1/jobs"), act("read_file", path="README.md")),
        (act("api_call", method="POST", url="http://jobs.internal.test/v1/jobs/7/retry"),
         act("create_file", path="retried.txt", content="7\n")),
        (act("api_call", method="GET", url="http://jobs.internal.test/v1/jobs"), DONE),
    ],
    "setup-python-package": [
        (act("create_file", path="greet/__init__.py", content="def hello(name):\n    return f'Hello, {name}!'\n"),
         act("create_file", path="README.md", content="# greet\n\n    from greet import hello\n    hello('Ada')\n")),
        (act("create_file", path="tests/test_greet.py",
             content="from greet import hello\n\n\ndef test_hello():\n    assert hello('Ada') == 'Hello, Ada!'\n"),
         act("run_python", code="from greet import hello\nprint(hello('Ada'))")),
        (act("read_file", path="README.md"), DONE),
    ],
    "setup-api-app": [
        (act("api_call", method="POST", url="http://api.devportal.test/v1/apps", body={"name": "reporter"}),
         act("api_call", method="GET", url="http://api.devportal.test/v1/apps")),
        (act("create_file", path="settings.ini", content="[reporter]\ntoken = tok-7f3a\n"), DONE),
    ],
    "setup-server-config": [
        (act("create_file", path="config.ini",
             content="[server]\nhost = 0.0.0.0\nport = 8080\n\n[logging]\nlevel = INFO\n"),
         act("create_file", path="check_config.py",
             content="import configparser\n\nc = configparser.ConfigParser()\nc.read('config.ini')\n"
                     "print(c['server']['port'])\n")),
        (act("run_python", code="import runpy\nrunpy.run_path('check_config.py', run_name='__main__')"), DONE),
    ],
    "setup-ci-webhook": [
        (act("api_call", method="GET", url="http://hooks.ci.test/v1/events"),
         act("api_call", method="GET", url="http://hooks.ci.test/v1/webhooks")),
        (act("api_call", method="POST", url="http://hooks.ci.test/v1/webhooks",
             body={"url": "https://chat.example.test/ci", "events": ["push"]}),
         act("create_file", path="webhooks.md", content="CI webhook: wh-1 (push events)\n")),
        (act("api_call", method="GET", url="http://hooks.ci.test/v1/webhooks"), DONE),
    ],
    "improve-slugify": [
        (act("read_file", path="slugify.py"),
         act("run_python", code="from slugify import slugify\nprint(slugify('A b'))")),
        (act("create_file", path="slugify.py", content=SLUGIFY),
         act("run_python", code="from slugify import slugify\nprint(slugify('  Hi, there!  '))")),
        (act("read_file", path="slugify.py"), DONE),
    ],
    "improve-fib": [
        (act("read_file", path="fib.py"), act("run_python", code="from fib import fib\nprint(fib(10))")),
        (act("create_file", path="fib.py", content=FIB), act("run_python", code="from fib import fib\nprint(fib(90))")),
        (act("read_file", path="fib.py"), DONE),
    ],
    "improve-sales-report": [
        (acts(("read_file", {"path": "report.py"}), ("read_file", {"path": "sales.csv"})),
         act("run_python", code="import report\nprint(report.count('sales.csv'))")),
        (act("create_file", path="report.py", content=REPORT),
         act("run_python", code="import runpy\nrunpy.run_path('report.py', run_name='__main__')")),
        (act("read_file", path="report.txt"), DONE),
    ],
    "improve-password-check": [
        (act("read_file", path="password.py"),
         act("run_python", code="from password import is_strong\nprint(is_strong('abcdefgh'))")),
        (act("create_file", path="password.py", content=PASSWORD),
         act("run_python", code="from password import is_strong\n"
                                "print(is_strong('Secure123'), is_strong('secure123'))")),
        (act("read_file", path="password.py"), DONE),
    ],
}
