"""A time level of the flow: what a step starts from and what it makes."""

from dataclasses import dataclass


@dataclass(eq=False)
class FlowState:
    """A time level: u^n and u^{n-1} ((dim, n) arrays of the rank's cells),
    u_s^n (its faces), p^n and p^{n-1}, the time, the step number and the
    last step size; ``u_s_old``, u_s^{n-1}; with Crank-Nicolson ``implicit`` and ``implicit_old``,
    the momentum solve's own share of the steps that made u^n and u^{n-1}
    (a solve's solution less its start u^ + G q*; zero where no solve made
    it: a first step, a restart from a file without them), which the next
    solve's guess extrapolates (None without a momentum solve)."""

    u: object
    u_old: object
    u_s: object
    p: object
    p_old: object
    t: float
    step: int
    dt_old: float
    implicit: object = None
    implicit_old: object = None
    u_s_old: object = None
