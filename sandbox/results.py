"""Plain result records of one sandboxed run, safe to pickle, cache and log."""

from __future__ import annotations

from dataclasses import asdict, dataclass

ASSERT_STATUSES = ("passed", "failed", "error", "timeout", "not_run")
# passed: every assert passed; failed: ran, some assert did not pass; timeout: the CPU-time limit or the
# wall-clock backstop was reached (`ExecResult.timeout_clock` says which); crashed: the candidate process
# died; load_error: module-level code raised; syntax_error: never ran; test_error: the tests' own setup
# raised; sandbox_error: the infrastructure failed (worker died, protocol broken).
RUN_STATUSES = ("passed", "failed", "timeout", "crashed", "load_error", "syntax_error", "test_error",
                "sandbox_error")


@dataclass(frozen=True)
class SyntaxErrorInfo:
    """Where a piece of code stopped parsing (1-based line and column, as `SyntaxError` reports them)."""

    line: int
    col: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}, col {self.col}: {self.message}"


@dataclass(frozen=True)
class AssertResult:
    """Outcome of one assert unit (an assert statement, or a loop/with/if statement that contains asserts)."""

    index: int
    source: str
    status: str  # one of ASSERT_STATUSES
    error_type: str | None = None
    message: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "passed"


@dataclass(frozen=True)
class ExecResult:
    """Everything the parent learned about one run; pass/fail is decided by the judge, never by stdout."""

    status: str  # one of RUN_STATUSES
    asserts: tuple[AssertResult, ...]
    passed: int
    total: int
    duration_s: float
    isolation: str
    stdout: str = ""
    stderr: str = ""
    syntax_error: SyntaxErrorInfo | None = None
    message: str = ""  # run-level explanation (load error, crash signal, timeout, ...)
    cached: bool = False
    timeout_clock: str = ""  # for a timeout: "cpu" (the limit, a property of the code) or "wall" (the backstop)
    cpu_s: float = 0.0  # CPU seconds the run used, as counted against the limit (0 when it never ran)

    @property
    def all_passed(self) -> bool:
        """True only when there was at least one assert and every one of them passed."""
        return self.total > 0 and self.passed == self.total

    @property
    def about_the_code(self) -> bool:
        """False for infrastructure failures and wall-clock timeouts, which say more about the machine than
        about the code: the sandbox does not cache them."""
        return self.status != "sandbox_error" and not (self.status == "timeout" and self.timeout_clock != "cpu")

    @property
    def fraction(self) -> float:
        return self.passed / self.total if self.total else 0.0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["all_passed"] = self.all_passed
        return d
