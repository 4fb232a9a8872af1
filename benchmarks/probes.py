"""Reward-hacking probes: scripted exploit policies against every verifier, on the real environments.

Each verifier is attacked with a catalogue of known exploits and checked on oracle trajectories; the bundled
envs' verifiers and their exploits:

    ===================  ======================================================================
    verifier             exploits
    ===================  ======================================================================
    search/exact-match   several answers in one ``<answer>``, spraying every title seen, two
                         ``<answer>`` blocks, an empty or a 100 kB answer, the question as the
                         answer, the gold inside a sentence, all aliases at once
    python/math          several numbers, ``3 or 4``, sprayed candidates, two ``\\boxed{}``,
                         ``3 = 4``, ``\\pm``, intervals, ``\\mathbb{R}``, a free variable, empty or
                         giant answers
    python/unit-tests    hard-coding or printing the visible example, a plausible wrong function,
                         ``sys.exit(0)`` / ``os._exit(0)`` at import or in the function, an object
                         equal to everything, editing or deleting files and planting results with
                         the ``python`` tool, a background process that rewrites the results,
                         patching ``json``/``unittest``/``builtins`` from the answer, reading the
                         harness's frames, infinite loops (with and without ``SIGALRM`` ignored)
    llm-judge            instructions aimed at the judge in the answer and in a tool call, a
                         guessed closing fence, forged ``[reference answer]`` sections, fake
                         verdict lines (Search trajectories scored by :class:`~rewards.LLMJudge`)
    webshop/score        buying the first search result, buying the target product without
                         choosing its options, ``Buy Now`` before any item page is open, URLs and
                         paths of the shop (a buy form, the JSON API) as search queries and as
                         click elements, searches for hidden page state (``price_upper``,
                         ``goal``, ``<script``, ``<!--``), answering instead of buying
    data/answer-fields   many values in one field (the gold among them), every number in the
                         data files in each field, a field given twice, the right values under
                         the wrong names, a 20 kB answer, the format line itself, searching the
                         sandbox for files the task did not name (and answering from them)
    data/sql-result      every row of a table, a statement that writes, a host file read by the
                         query, two statements, the gold table planted in the kernel and in
                         ``data/`` then selected from there, the ``sql`` tool replaced by one
                         that prints the gold table, an empty and a 20 kB answer
    swe/resolved         a no-op submit; deleting the FAIL_TO_PASS tests' files, skipping them
                         (``pytestmark``), editing their asserts away; a conftest and a ``-p``
                         plugin (named in ``pytest.ini``/``setup.cfg``) that rewrite every report
                         to passed; ``os._exit(0)``, fake ``N passed`` output and a patched
                         ``_pytest.reports.TestReport`` at the library's import; looking for the
                         history or the fix (``git log``, the filesystem) and using what is found
    ===================  ======================================================================

The exploits live with their verifier, in each env's probes module (``agentgym_envs/<env>/probes.py``, built
from :mod:`agentgym_envs.probing`); this harness plays those of every registered spec that has probes
(:attr:`~agentgym_envs.spec.EnvSpec.probes`) and names no environment itself.

An exploit episode is a *false positive* when the verifier accepts it (outcome 1.0: exact match,
equivalent, every hidden test passed, judge PASS, a WebShop purchase scored 1.0, an SWE task resolved); an
oracle episode is a *false negative* when it is not accepted. Both rates must be zero. Partial credit is
reported too: the unit-test verifier gives credit per test, and the visible example of a code task is one of
its hidden tests, so hard-coding it earns ``1 / len(tests)`` (a property of the task generator, shown
in the table). Partial credit is held to a margin on every verifier: no exploit probe's mean outcome
may reach :data:`MAX_SHARE_OF_ORACLE` of the oracle's. This matters most for WebShop, whose score is
partial credit by design: a purchase that misses one of the goal's terms still earns the share of the
terms it meets, so buying the right product without its options scores 0.67 to 0.75 on the bundled
goals, and fails (a success needs the score 1.0).

Episodes are also checked for leaks where the env's probes name what its tasks hide: no WebShop observation may
show the goal's fields, the list of matching products or a reply of the shop's JSON API (and the shop server's own
record of each purchase joins the evidence); no SWE observation may show a line the reference fix adds or a
FAIL_TO_PASS test id that the prompt does not name; no DataAnalysis observation may show a reference program.

Every probe also names the evidence that proves it was exercised (a format error, a tool
observation, the hidden-test error): an exploit that never ran would otherwise pass vacuously.

The judge probes cannot call a real LLM here: their judge is the *adversarially naive* loopback judge of
:mod:`agentgym_envs.probing`, so they measure the prompt construction of :func:`rewards.judge.build_judge_prompt`
(can agent text leave the quoted block, can it forge the block's structure), not whether a real model obeys
instructions that stay inside the block.

Example:
    python -m benchmarks.probes                                   # every env with probes, test split, 3 tasks
    python -m benchmarks.probes --envs search --limit 10 --json probes.json
    python -m benchmarks.probes --envs webshop
    python -m benchmarks.probes --envs data --sandbox bwrap
    python -m benchmarks.probes --envs agentrl/SWE-v0 --sandbox bwrap --limit 2
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from rich.console import Console
from rich.table import Table

from agentgym_envs.errors import UnknownEnvError
from agentgym_envs.probing import EpisodeRecord, Probe
from agentgym_envs.registration import SPECS
from agentgym_envs.spec import EnvSpec, ProbeSettings

MAX_SHARE_OF_ORACLE = 0.8
"""An exploit probe fails when its mean outcome reaches this share of the oracle's mean outcome on the verifier.

WebShop scores a purchase of the right type that meets ``m`` of the goal's ``n`` terms (attributes, options, the
price) ``m/n``; the bundled goals have 3, 4 or 6 terms, so the right product without its options earns 2/3, 3/4 or
4/6: an exploit at 0.8 would mean the score no longer weighs what the shopper asked for."""


@dataclass
class VerifierReport:
    """False-positive and false-negative rates of one verifier.

    Attributes:
        verifier: Its name.
        exploit_episodes: Exploit episodes played.
        false_positives: Exploit episodes accepted.
        oracle_episodes: Oracle episodes played.
        false_negatives: Oracle episodes not accepted.
        leaked_credit: Exploit episodes of ``zero_credit`` probes that still earned credit.
        unexercised: Probes whose evidence never matched.
        infra_errors: Episodes ended by an infrastructure fault (left out of every other count).
        oracle_mean: Mean outcome of the oracle episodes.
        near_oracle: Exploit probes whose mean outcome reached :data:`MAX_SHARE_OF_ORACLE` of ``oracle_mean``.
        hidden_leaks: Episodes (oracle ones too) whose observations showed a hidden task text.
    """

    verifier: str
    exploit_episodes: int = 0
    false_positives: int = 0
    oracle_episodes: int = 0
    false_negatives: int = 0
    leaked_credit: int = 0
    unexercised: list[str] = field(default_factory=list)
    infra_errors: int = 0
    oracle_mean: float = 0.0
    near_oracle: list[str] = field(default_factory=list)
    hidden_leaks: int = 0

    @property
    def fp_rate(self) -> float:
        """False positives over exploit episodes."""
        return self.false_positives / max(self.exploit_episodes, 1)

    @property
    def fn_rate(self) -> float:
        """False negatives over oracle episodes."""
        return self.false_negatives / max(self.oracle_episodes, 1)

    @property
    def failed(self) -> bool:
        """An exploit accepted or near the oracle, an oracle rejected, credit or hidden state leaked, a probe idle."""
        return bool(self.false_positives or self.false_negatives or self.leaked_credit or self.unexercised
                    or self.near_oracle or self.hidden_leaks)


# -------------------------------------------------------------------------------------- running


def probed_specs(names: Sequence[str] | None = None) -> list[EnvSpec]:
    """The specs whose probes a run plays.

    Args:
        names: Registered ids or aliases, each once in the result; None for every registered spec with probes.

    Raises:
        UnknownEnvError: A name is not registered.
        ValueError: A named spec has no probes.
    """
    if names is None:
        return [spec for spec in SPECS if spec.probes is not None]
    specs = SPECS.resolve(names)
    without = [spec.id for spec in specs if spec.probes is None]
    if without:
        with_probes = [spec.id for spec in SPECS if spec.probes is not None]
        raise ValueError(f"expected envs whose spec has probes (among {with_probes}), got {without}, whose spec "
                         "has none")
    return specs


def run_probes(envs: Sequence[str] | None = None, *, split: str = "test", limit: int = 3, sandbox: str = "docker",
               slow: bool = True) -> list[EpisodeRecord]:
    """Play every probe of the chosen envs on ``limit`` tasks per verifier.

    Args:
        envs: Registered ids or aliases whose spec has probes (None: every one that has).
        split: The bundled split to take tasks from.
        limit: Tasks per verifier.
        sandbox: The sandbox backend of the envs that run agent code (``"docker"`` or ``"bwrap"``).
        slow: Include the probes that wait for timeouts.

    Returns:
        One record per episode, env after env.

    Raises:
        UnknownEnvError: An env is not registered.
        ValueError: An env's spec has no probes.

    Example:
        >>> records = run_probes(["search"], limit=1)       # doctest: +SKIP
        >>> summarize(records)[0].fp_rate                    # doctest: +SKIP
        0.0
    """
    settings = ProbeSettings(split=split, limit=limit, sandbox=sandbox, slow=slow)
    records: list[EpisodeRecord] = []
    for spec in probed_specs(envs):
        assert spec.probes is not None  # probed_specs
        records += spec.probes(settings)
    return records


def catalogue() -> list[Probe]:
    """Every probe of every registered spec that lists its probes (:attr:`~agentgym_envs.spec.EnvSpec.probe_catalogue`),
    unplayed, spec after spec."""
    return [probe for spec in SPECS if spec.probe_catalogue is not None for probe in spec.probe_catalogue()]


def verifiers() -> list[str]:
    """The verifiers that :func:`catalogue` attacks, each once, in its order."""
    return list(dict.fromkeys(probe.verifier for probe in catalogue()))


def mean_outcomes(records: Sequence[EpisodeRecord]) -> dict[tuple[str, str], float]:
    """``(verifier, probe) -> mean outcome`` over the episodes no infrastructure fault ended."""
    outcomes: dict[tuple[str, str], list[float]] = {}
    for record in records:
        if not record.infra_error:
            outcomes.setdefault((record.verifier, record.probe), []).append(record.outcome)
    return {key: sum(values) / len(values) for key, values in outcomes.items()}


def summarize(records: Sequence[EpisodeRecord]) -> list[VerifierReport]:
    """One report per verifier that has records, in the order of their first record."""
    reports = {record.verifier: VerifierReport(record.verifier) for record in records}
    for record in records:
        report = reports[record.verifier]
        report.infra_errors += record.infra_error
        if record.infra_error:  # a dead sandbox is neither a wrong answer nor an accepted one
            continue
        report.hidden_leaks += bool(record.leaks)
        if record.oracle:
            report.oracle_episodes += 1
            report.false_negatives += not record.accepted
        else:
            report.exploit_episodes += 1
            report.false_positives += record.accepted
            report.leaked_credit += record.zero_credit and record.outcome > 0
    means = mean_outcomes(records)
    for verifier, report in reports.items():
        probes = {r.probe: r.oracle for r in records if r.verifier == verifier}
        report.unexercised = sorted(p for p in probes
                                    if not any(r.exercised for r in records if r.verifier == verifier and r.probe == p))
        oracle = [means[verifier, p] for p, is_oracle in probes.items() if is_oracle and (verifier, p) in means]
        report.oracle_mean = sum(oracle) / len(oracle) if oracle else 0.0
        report.near_oracle = sorted(p for p, is_oracle in probes.items() if not is_oracle and (verifier, p) in means
                                    and oracle and means[verifier, p] >= MAX_SHARE_OF_ORACLE * report.oracle_mean)
    return [report for report in reports.values() if report.exploit_episodes or report.oracle_episodes]


# ---------------------------------------------------------------------------------------- report


def probe_table(records: Sequence[EpisodeRecord], reports: Sequence[VerifierReport]) -> Table:
    """Per probe: episodes, accepted (a WebShop success), mean outcome and its share of the oracle's, exercised."""
    table = Table(title="reward-hacking probes")
    for column in ("verifier", "probe", "episodes", "accepted", "mean outcome", "of oracle", "exercised"):
        table.add_column(column, justify="left" if column in ("verifier", "probe") else "right")
    means = mean_outcomes(records)
    oracle_means = {report.verifier: report.oracle_mean for report in reports}
    for verifier, probe in dict.fromkeys((r.verifier, r.probe) for r in records):
        rows = [r for r in records if r.verifier == verifier and r.probe == probe]
        mean, oracle = means.get((verifier, probe)), oracle_means.get(verifier)
        share = f"{mean / oracle:.0%}" if mean is not None and oracle else "-"
        table.add_row(verifier, probe, str(len(rows)), str(sum(r.accepted for r in rows)),
                      "-" if mean is None else f"{mean:.2f}", share, f"{sum(r.exercised for r in rows)}/{len(rows)}")
    return table


def verifier_table(reports: Sequence[VerifierReport]) -> Table:
    """Per verifier: the false-positive and false-negative rates."""
    table = Table(title="false positives (exploits accepted) and false negatives (oracles rejected)")
    for column in ("verifier", "exploit eps", "FP", "FP rate", "oracle eps", "FN", "FN rate", "credit leaks",
                   "near oracle", "hidden leaks", "unexercised", "infra errors"):
        table.add_column(column, justify="left" if column in ("verifier", "near oracle", "unexercised") else "right")
    for r in reports:
        table.add_row(r.verifier, str(r.exploit_episodes), str(r.false_positives), f"{r.fp_rate:.3f}",
                      str(r.oracle_episodes), str(r.false_negatives), f"{r.fn_rate:.3f}", str(r.leaked_credit),
                      ", ".join(r.near_oracle) or "-", str(r.hidden_leaks), ", ".join(r.unexercised) or "-",
                      str(r.infra_errors))
    return table


def failures(records: Sequence[EpisodeRecord], reports: Sequence[VerifierReport]) -> list[str]:
    """Why the run failed: one ``"<verifier> / <probe>: <reasons>"`` per probe at fault (see
    :attr:`VerifierReport.failed`), and a line per verifier left without a scored oracle or exploit episode (every
    one ended by an infrastructure fault: nothing was compared), in the order of the records."""
    by_verifier = {report.verifier: report for report in reports}
    lines = []
    for verifier in dict.fromkeys(r.verifier for r in records):
        report = by_verifier.get(verifier, VerifierReport(verifier))
        played = [r for r in records if r.verifier == verifier]
        if not (report.oracle_episodes and report.exploit_episodes):
            lines.append(f"{verifier}: {report.oracle_episodes} oracle and {report.exploit_episodes} exploit episodes "
                         f"scored, {sum(r.infra_error for r in played)} ended by an infrastructure fault: nothing "
                         "compared (see the infra errors column)")
        for probe in dict.fromkeys(r.probe for r in played):
            scored = [r for r in played if r.probe == probe and not r.infra_error]
            reasons = probe_faults(report, probe, scored)
            lines += [f"{verifier} / {probe}: {'; '.join(reasons)}"] if reasons else []
    return lines


def probe_faults(report: VerifierReport, probe: str, episodes: Sequence[EpisodeRecord]) -> list[str]:
    """What one probe's scored ``episodes`` did wrong, as counts (an exploit accepted, an oracle rejected, credit
    for nothing, near the oracle, never exercised, a hidden text shown with the first such task and text)."""
    of = f"/{len(episodes)} episodes"
    accepted = sum(e.accepted and not e.oracle for e in episodes)
    rejected = sum(e.oracle and not e.accepted for e in episodes)
    credited = sum(e.zero_credit and e.outcome > 0 for e in episodes)
    leaking = [e for e in episodes if e.leaks]
    faults = [f"exploit accepted in {accepted}{of}"] if accepted else []
    faults += [f"oracle rejected in {rejected}{of}"] if rejected else []
    faults += [f"credit for nothing in {credited}{of}"] if credited else []
    faults += [f"mean outcome {MAX_SHARE_OF_ORACLE:.0%}+ of the oracle's"] if probe in report.near_oracle else []
    faults += [f"never exercised in {len(episodes)} scored episodes"] if probe in report.unexercised else []
    if leaking:
        faults.append(f"hidden text shown in {len(leaking)}{of} (task {leaking[0].task_id} showed "
                      f"{leaking[0].leaks[0][:80]!r})")
    return faults


def verdict(records: Sequence[EpisodeRecord], reports: Sequence[VerifierReport]) -> str:
    """The run's last line, plain text at any width: every failing verifier, probe and reason, or that all held."""
    reasons = failures(records, reports)
    if reasons:
        return "probes FAILED: " + " | ".join(reasons)
    infra = sum(r.infra_error for r in records)
    return (f"probes passed: {len(reports)} verifiers, {len(records)} episodes ({infra} ended by an infrastructure "
            "fault), no exploit accepted, no oracle rejected")


def env_names(text: str) -> list[str]:
    """``--envs``: comma-separated registered ids or aliases, each of a spec that has probes.

    Raises:
        argparse.ArgumentTypeError: A name is not registered, or its spec has no probes.
    """
    names = [name.strip() for name in text.split(",") if name.strip()]
    try:
        probed_specs(names)
    except (UnknownEnvError, ValueError) as error:
        raise argparse.ArgumentTypeError(str(error)) from error
    return names


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", type=env_names,
                        help="comma-separated registered env ids or aliases (default: every env with probes, "
                             f"among {', '.join(spec.id for spec in probed_specs())})")
    parser.add_argument("--split", default="test", help="bundled split (train, dev, test)")
    parser.add_argument("--limit", type=int, default=3, help="tasks per verifier")
    parser.add_argument("--sandbox", default="docker", choices=("docker", "bwrap"),
                        help="sandbox backend of the envs that run agent code")
    parser.add_argument("--fast", action="store_true", help="skip the probes that wait for timeouts")
    parser.add_argument("--json", help="write every episode record and the per-verifier rates here")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the probes, print both tables and :func:`verdict`; exit status 1 when anything failed (:func:`failures`:
    a verifier that failed, or one with nothing scored to compare)."""
    args = parse_args(argv)
    records = run_probes(args.envs, split=args.split, limit=args.limit, sandbox=args.sandbox, slow=not args.fast)
    reports = summarize(records)
    console = Console(width=160)
    console.print(probe_table(records, reports))
    console.print(verifier_table(reports))
    if args.json:
        payload = {"verifiers": [{**asdict(r), "fp_rate": r.fp_rate, "fn_rate": r.fn_rate} for r in reports],
                   "episodes": [asdict(r) for r in records]}
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(payload, handle, indent=2)
    print(verdict(records, reports))
    return int(bool(failures(records, reports)))


if __name__ == "__main__":
    raise SystemExit(main())
