"""SWE task instances in SWE-bench's fields, their conversion to and from :class:`~tasks.records.Task`, and a
loader for SWE-bench instance files.

An instance has SWE-bench's fields (``instance_id``, ``repo``, ``base_commit``, ``problem_statement``,
``patch``, ``test_patch``, ``FAIL_TO_PASS``, ``PASS_TO_PASS``, ``version``, ``created_at``, ``hints_text``,
``environment_setup_commit``) plus ``difficulty``. As in SWE-bench, ``patch`` is the reference fix of the tree
at ``base_commit`` (for a planted bug: the reverse of the patch that planted it) and ``test_patch`` adds or
changes tests before grading (empty for planted bugs: the repository's own tests catch them). SWE-bench's files
store FAIL_TO_PASS and PASS_TO_PASS as JSON-encoded strings; both that and a plain list are accepted.

As a task: ``id`` = instance_id, ``env`` = ``"SWE"``, ``family`` = ``"synthetic"`` (planted here) or
``"swebench"`` (loaded), ``prompt`` = problem_statement, ``answer`` = patch (never shown), and ``metadata`` =
every instance field (test id lists as lists) plus ``repo_source``, which says where the repository comes
from: ``{"kind": "pypi", "name", "version", "sha256"}`` (a pin of :mod:`tasks.swe.repos`, with the bug
planted by reversing ``patch``), ``{"kind": "path", "path"}`` or ``{"kind": "image", "image"}``.

Example:
    >>> instance = SWEInstance.from_dict({"instance_id": "demo__demo-1", "repo": "demo/demo", "base_commit": "abc",
    ...     "problem_statement": "fix it", "patch": "", "FAIL_TO_PASS": '["t.py::a"]', "PASS_TO_PASS": []})
    >>> instance.FAIL_TO_PASS
    ('t.py::a',)
    >>> instance_from_task(instance.to_task({"kind": "path", "path": "/src/demo"})) == instance
    True
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from tasks.errors import TaskError
from tasks.records import Task
from tasks.swe.bugs import Bug
from tasks.swe.environments import Overrides, derive_environment, metadata_files
from tasks.swe.keep import Judgement
from tasks.swe.repos import RepoSpec, folder_files
from tasks.swe.statements import problem_statement

ENV = "SWE"
SWEBENCH_FIELDS = ("instance_id", "repo", "base_commit", "problem_statement", "patch", "test_patch", "FAIL_TO_PASS",
                   "PASS_TO_PASS", "version", "created_at", "hints_text", "environment_setup_commit")
"""SWE-bench's instance fields, in its order."""
REQUIRED_FIELDS = ("instance_id", "repo", "base_commit", "problem_statement", "patch")
"""The fields an instance file must have; the others default to empty."""
REPO_SOURCE_KINDS = ("pypi", "path", "image")


@dataclass(frozen=True)
class SWEInstance:
    """One SWE task in SWE-bench's fields (see the module docstring), plus ``difficulty`` (1 = easiest)."""

    instance_id: str
    repo: str
    base_commit: str
    problem_statement: str
    patch: str
    test_patch: str = ""
    FAIL_TO_PASS: tuple[str, ...] = ()
    PASS_TO_PASS: tuple[str, ...] = ()
    version: str = ""
    created_at: str = ""
    hints_text: str = ""
    environment_setup_commit: str = ""
    difficulty: int = 1
    image: str = ""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SWEInstance:
        """An instance from SWE-bench's record form (test lists as JSON strings or lists; extra keys ignored).

        Raises:
            TaskError: A required field is missing, or a test list is neither a list nor a JSON list of strings.
        """
        missing = [name for name in REQUIRED_FIELDS if name not in data]
        if missing:
            raise TaskError(f"expected SWE-bench instance fields {list(REQUIRED_FIELDS)}, got {missing} missing "
                            f"(instance {data.get('instance_id', '?')!r})")
        text = {name: str(data.get(name) or "") for name in SWEBENCH_FIELDS if name not in ("FAIL_TO_PASS",
                                                                                             "PASS_TO_PASS")}
        return cls(**text, FAIL_TO_PASS=as_test_ids(data.get("FAIL_TO_PASS"), "FAIL_TO_PASS"),
                   PASS_TO_PASS=as_test_ids(data.get("PASS_TO_PASS"), "PASS_TO_PASS"),
                   difficulty=int(data.get("difficulty", 1)), image=str(data.get("image") or ""))

    def to_dict(self) -> dict[str, Any]:
        """SWE-bench's record form: test lists as JSON strings, plus ``difficulty`` (and ``image`` when set)."""
        record = _without_empty_image(asdict(self))
        record["FAIL_TO_PASS"] = json.dumps(list(self.FAIL_TO_PASS))
        record["PASS_TO_PASS"] = json.dumps(list(self.PASS_TO_PASS))
        return record

    def to_task(self, repo_source: Mapping[str, Any], *, family: str = "swebench") -> Task:
        """The instance as a task (see the module docstring).

        Raises:
            TaskError: ``repo_source`` has no known ``kind``.
        """
        if repo_source.get("kind") not in REPO_SOURCE_KINDS:
            raise TaskError(f"expected repo_source with a kind in {REPO_SOURCE_KINDS}, got {dict(repo_source)}")
        metadata = {**_without_empty_image(asdict(self)), "FAIL_TO_PASS": list(self.FAIL_TO_PASS),
                    "PASS_TO_PASS": list(self.PASS_TO_PASS),
                    "repo_source": dict(repo_source)}
        return Task(id=self.instance_id, env=ENV, family=family, prompt=self.problem_statement, answer=self.patch,
                    difficulty=self.difficulty, metadata=metadata)


def _without_empty_image(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` without its ``image`` key when empty (records and tasks of instances with no image are as before
    the field existed)."""
    if not record.get("image"):
        record.pop("image", None)
    return record


def as_test_ids(value: Any, field: str) -> tuple[str, ...]:
    """A FAIL_TO_PASS / PASS_TO_PASS value (a list, or SWE-bench's JSON-encoded list) as a tuple of test ids.

    Raises:
        TaskError: Anything else.
    """
    if value is None:
        return ()
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except json.JSONDecodeError as error:
            raise TaskError(f"expected {field} as a JSON list of test ids, got {value[:80]!r} ({error})") from error
    if not isinstance(value, list | tuple) or not all(isinstance(item, str) for item in value):
        raise TaskError(f"expected {field} as a list of test id strings, got {str(value)[:80]!r}")
    return tuple(value)


def without_fail_to_pass(tasks: Sequence[Task]) -> list[str]:
    """The ids of the tasks that name no FAIL_TO_PASS test.

    Such a task cannot tell a fix from no change: SWE-bench's grading counts a no-op resolved, the strict rules
    have nothing to score. It is a defect of the data set, not an outcome of the agent, so the loader and the
    env refuse it before any episode is played (rather than spend an episode on a run that can only be invalid).
    """
    return [task.id for task in tasks if not as_test_ids(task.metadata.get("FAIL_TO_PASS"), "FAIL_TO_PASS")]


def refuse_without_fail_to_pass(tasks: Sequence[Task], source: str) -> None:
    """Raise when a task of ``source`` (a file, "tasks") names no FAIL_TO_PASS test (:func:`without_fail_to_pass`).

    Raises:
        TaskError: Naming the tasks, and what to do.
    """
    empty = without_fail_to_pass(tasks)
    if empty:
        more = f" and {len(empty) - 5} more" if len(empty) > 5 else ""
        raise TaskError(f"{source}: expected every instance to name at least one FAIL_TO_PASS test (without one a "
                        f"no-op would count as a fix), got none for {', '.join(empty[:5])}{more}; drop them, or "
                        "find their FAIL_TO_PASS tests with `python -m agentgym_envs.swe validate`")


def instance_from_task(task: Task) -> SWEInstance:
    """The instance a task was made from by :meth:`SWEInstance.to_task`.

    Raises:
        TaskError: The task is not an SWE task, or its metadata lacks instance fields.
    """
    if task.env != ENV:
        raise TaskError(f"expected an {ENV} task, got one of env {task.env!r} ({task.id})")
    return SWEInstance.from_dict({**task.metadata, "difficulty": task.difficulty})


def tree_digest(files: Mapping[str, bytes]) -> str:
    """A 40-hex-digit digest of a tree (paths and contents): the ``base_commit`` of a planted-bug instance.

    The sandbox's repository is a fresh one-commit tree, so no git commit id can name it ahead of time; this
    digest names its contents instead.
    """
    digest = hashlib.sha1(usedforsecurity=False)
    for path in sorted(files):
        digest.update(f"{path}\0{hashlib.sha256(files[path]).hexdigest()}\n".encode())
    return digest.hexdigest()


def difficulty_of(level: int, bugs: int) -> int:
    """The difficulty of a planted-bug task: 1 for one bug with the failing test shown (hint level 3), one more
    per hint level withheld and per extra bug, at most 5."""
    return min(5, (4 - level) + (bugs - 1))


def make_instance(spec: RepoSpec, files: Mapping[str, bytes], bug: Bug, judgement: Judgement, *, level: int,
                  failing_output: str = "") -> SWEInstance:
    """The instance of a kept planted bug.

    Args:
        spec: The pinned repository.
        files: Its clean tree (:func:`tasks.swe.repos.repository_files`).
        bug: The planted bug.
        judgement: Its :func:`tasks.swe.keep.judge_candidate` verdict (kept).
        level: The statement's hint level.
        failing_output: The output of ``judgement.fail_to_pass[0]`` in a run with the bug (levels 2 and 3).

    Raises:
        TaskError: The judgement dropped the bug.
    """
    if not judgement.kept:
        raise TaskError(f"expected a kept bug to make an instance, got one dropped: {judgement.reason}")
    buggy = bug.buggy_tree(files)
    base_commit = tree_digest(buggy)
    statement = problem_statement(level, repo=spec.repo, paths=bug.paths, functions=bug.functions,
                                  failing_test=judgement.fail_to_pass[0], test_output=failing_output)
    return SWEInstance(instance_id=f"{spec.name}__{spec.name}-{spec.version}-{base_commit[:10]}", repo=spec.repo,
                       base_commit=base_commit, problem_statement=statement, patch=bug.fix_patch,
                       FAIL_TO_PASS=judgement.fail_to_pass, PASS_TO_PASS=judgement.pass_to_pass, version=spec.version,
                       environment_setup_commit=base_commit, difficulty=difficulty_of(level, len(bug.sites)))


def pypi_source(spec: RepoSpec) -> dict[str, str]:
    """The ``repo_source`` of a planted-bug task on a pin."""
    return {"kind": "pypi", "name": spec.name, "version": spec.version, "sha256": spec.sha256}


def with_pin_environment(task: Task) -> Task:
    """A planted-bug task with ``metadata["environment"]``: its pin's environment
    (:func:`~tasks.swe.repos.pin_environment`, which the synthesizer records in the tasks it makes), so that it
    runs in its repository's own installed environment as a SWE-bench task does; a task that has one (every task
    the synthesizer makes) is returned as it is.

    Raises:
        TaskError: The task's repository is not a pin, or the pin cannot be fetched.
    """
    from tasks.swe.repos import pin, pin_environment, repository_files

    source = task.metadata.get("repo_source") or {}
    if source.get("kind") != "pypi":
        raise TaskError(f"expected a planted-bug task on a pin, got {task.id} from {dict(source)}")
    if task.metadata.get("environment"):
        return task
    spec = pin(str(source["name"]))
    environment = pin_environment(spec, repository_files(spec))
    return replace(task, metadata={**task.metadata, "environment": environment.to_dict()})


def read_instances(path: str | os.PathLike[str]) -> list[SWEInstance]:
    """The instances of a SWE-bench file: a JSON list of records, or JSONL with one record a line.

    Raises:
        TaskError: The file is neither, or a record is not an instance (with the file and record number).
    """
    text = Path(path).read_text(encoding="utf-8")
    records = _json_records(text, path)
    instances = []
    for number, record in enumerate(records, 1):
        if not isinstance(record, dict):
            raise TaskError(f"{path}: record {number}: expected a JSON object, got {type(record).__name__}")
        try:
            instances.append(SWEInstance.from_dict(record))
        except TaskError as error:
            raise TaskError(f"{path}: record {number}: {error}") from error
    return instances


def _json_records(text: str, path: str | os.PathLike[str]) -> list[Any]:
    """A JSON list, or the objects of JSONL lines."""
    if text.lstrip().startswith("["):
        try:
            return list(json.loads(text))
        except json.JSONDecodeError as error:
            raise TaskError(f"{path}: expected a JSON list of SWE-bench instances, got invalid JSON ({error})") \
                from error
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise TaskError(f"{path}:{number}: expected one JSON instance a line, got invalid JSON ({error})") \
                    from error
    return records


def load_swebench(path: str | os.PathLike[str], *, repository: str | os.PathLike[str] | Mapping[str, str] | None = None,
                  image: str | None = None, overrides: str | os.PathLike[str] | None = None,
                  validation: str | os.PathLike[str] | None = None) -> list[Task]:
    """SWE-bench instances as tasks, with their repositories from folders or images the user has.

    A task whose repository is a folder gets ``metadata["environment"]``: the environment its tests run in,
    derived from the repository's metadata and corrected by ``overrides``
    (:mod:`tasks.swe.environments`); the env installs it (``python -m agentgym_envs.swe env build`` builds it
    ahead). An instance with an image (its own ``image`` field, or ``image=``) runs in that image instead, with
    its interpreter (:data:`~tasks.swe.environments.IMAGE_PYTHON` unless an override sets ``python``): the image
    must be in the local Docker daemon (``docker load -i FILE.tar``), which the env checks; without ``repository``
    the tree is the image's ``/testbed``. Each task gets ``metadata["validation"]`` from the validation report
    (``python -m agentgym_envs.swe validate``) when it holds a verdict for this very instance and environment
    (:func:`validation_key`).

    Args:
        path: A SWE-bench instance file (JSON list or JSONL, SWE-bench's field names).
        repository: The folder holding the repository at ``base_commit`` (one folder for every instance), or a
            mapping of ``repo`` (e.g. ``"astropy/astropy"``) to folder. A git repository (a folder with
            ``.git``) gives each instance its own ``base_commit`` (:func:`checkout`), so one clone serves every
            instance of a repository.
        image: A Docker image name, formatted with the instance's fields, e.g.
            ``"sweb.eval.x86_64.{instance_id}:latest"``, for the instances without an ``image`` field.
        overrides: A YAML or JSON file of environment overrides (:class:`~tasks.swe.environments.Overrides`).
        validation: The validation report; by default :func:`validation_report_path` of ``path`` when it exists.

    Returns:
        Tasks of family ``"swebench"``, in file order.

    Raises:
        TaskError: An instance with neither a repository nor an image, a repo the mapping lacks, a folder that does not
            exist, a record that is not an instance, or an instance with no FAIL_TO_PASS test
            (:func:`without_fail_to_pass` says why that is refused).
    """
    fixes = Overrides.read(overrides)
    verdicts = read_validation(validation if validation is not None else validation_report_path(path))
    tasks = []
    for instance in read_instances(path):
        image_name = instance.image or (image.format(**instance.to_dict()) if image else "")
        task = instance.to_task(_repo_source(instance, repository, image_name), family="swebench")
        source = task.metadata["repo_source"]
        files = metadata_files(source["path"]) if source["kind"] == "path" else {}
        derived = derive_environment(instance.repo, instance.version, files)
        if image_name:  # the image's own environment: nothing to install
            derived = replace(derived, requirements=(), image=image_name)
        task.metadata["environment"] = fixes.apply(derived, instance.instance_id).to_dict()
        tasks.append(_with_validation(task, verdicts))
    refuse_without_fail_to_pass(tasks, str(path))
    return tasks


def _with_validation(task: Task, verdicts: Mapping[str, Mapping[str, Any]]) -> Task:
    """``task`` with its validation verdict in its metadata, when the report has one made for this very task
    (same environment, fix and tests: :func:`validation_key`)."""
    verdict = verdicts.get(task.id)
    if verdict and verdict.get("key") == validation_key(task):
        task.metadata["validation"] = verdict
    return task


SWESMITH_REQUIRED = ("instance_id", "repo", "patch", "problem_statement")
"""The fields a SWE-smith instance must have here (its problem statement is what the agent is shown)."""


def load_swesmith(path: str | os.PathLike[str], *, repository: str | os.PathLike[str] | Mapping[str, str],
                  overrides: str | os.PathLike[str] | None = None,
                  validation: str | os.PathLike[str] | None = None) -> list[Task]:
    """SWE-smith instances as tasks: their ``patch`` *introduces* the bug into the repository's clean tree, which
    many instances share; there is no ``test_patch``.

    Each becomes a SWE-bench-format task whose reference fix is that patch reversed and whose tree is the
    repository's with the bug planted (``repo_source["planted"]``). SWE-smith names a repository
    ``owner__name.<commit>``: a git clone gives each instance the tree at that commit (:func:`checkout`), a plain
    folder is taken as that commit's tree. Environments and validation as :func:`load_swebench`.

    Args:
        path: A SWE-smith instance file (JSON list or JSONL).
        repository: The repository's folder or git clone, or a mapping of SWE-smith ``repo`` to one.
        overrides: Environment overrides, as :func:`load_swebench`.
        validation: The validation report, as :func:`load_swebench`.

    Raises:
        TaskError: A missing field, a patch that does not apply to the repository, a folder that is not one, a
            commit the clone lacks, or an instance with no FAIL_TO_PASS test.
    """
    from tasks.swe.patches import PatchError, apply_patch, diff_trees, parse_patch

    fixes = Overrides.read(overrides)
    verdicts = read_validation(validation if validation is not None else validation_report_path(path))
    tasks = []
    for number, record in enumerate(_json_records(Path(path).read_text(encoding="utf-8"), path), 1):
        missing = [name for name in SWESMITH_REQUIRED if not (isinstance(record, dict) and record.get(name))]
        if missing:
            raise TaskError(f"{path}: record {number}: expected SWE-smith fields {list(SWESMITH_REQUIRED)}, got "
                            f"{missing} missing or empty")
        commit = record["repo"].rsplit(".", 1)[-1] if "." in record["repo"] else ""
        folder = _smith_folder(record, repository, commit)
        clean = folder_files(folder)
        try:
            buggy = apply_patch(clean, record["patch"])
        except PatchError as error:
            raise TaskError(f"{path}: record {number} ({record['instance_id']}): expected its patch to apply to "
                            f"{folder}, got: {error}") from error
        touched = {section.new_path or section.old_path for section in parse_patch(record["patch"])}
        fix = diff_trees({p: buggy[p] for p in touched if p in buggy}, {p: clean[p] for p in touched if p in clean})
        instance = SWEInstance.from_dict({**record, "base_commit": commit, "patch": fix, "test_patch": ""})
        task = instance.to_task({"kind": "path", "path": str(folder), "planted": True}, family="swebench")
        task.metadata["format"] = "swe-smith"
        owner_name = record["repo"].rsplit(".", 1)[0].replace("__", "/", 1)
        task.metadata["environment"] = fixes.apply(derive_environment(owner_name, instance.version, clean),
                                                   instance.instance_id).to_dict()
        tasks.append(_with_validation(task, verdicts))
    refuse_without_fail_to_pass(tasks, str(path))
    return tasks


def _smith_folder(record: Mapping[str, Any], repository: str | os.PathLike[str] | Mapping[str, str],
                  commit: str) -> Path:
    """The clean tree of a SWE-smith record's repository: a folder, or a clone's tree at ``commit``."""
    if isinstance(repository, Mapping):
        if record["repo"] not in repository:
            raise TaskError(f"expected a folder for repo {record['repo']!r} ({record['instance_id']}), got folders "
                            f"for {sorted(repository)}")
        repository = repository[record["repo"]]
    folder = Path(repository)
    if not folder.is_dir():
        raise TaskError(f"expected the repository {record['repo']!r} in a folder, got {str(folder)!r}, not a folder")
    return checkout(folder, commit) if (folder / ".git").exists() and commit else folder.resolve()


def validation_report_path(path: str | os.PathLike[str]) -> Path:
    """Where ``python -m agentgym_envs.swe validate`` writes the report of an instance file: beside it,
    ``<file>.validation.json``."""
    path = Path(path)
    return path.with_name(path.name + ".validation.json")


def read_validation(path: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """The verdicts of a validation report by instance id (none when the file does not exist).

    Raises:
        TaskError: The file is not a validation report.
    """
    path = Path(path)
    if not path.exists():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("instances"), dict):
        raise TaskError(f"{path}: expected a validation report with 'instances', got {str(data)[:80]!r}")
    return data["instances"]


def validation_key(task: Task) -> str:
    """A hash of what a validation verdict holds for: the instance's fields and its environment."""
    record = {key: task.metadata.get(key) for key in (*SWEBENCH_FIELDS, "environment")}
    return hashlib.sha256(json.dumps(record, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _repo_source(instance: SWEInstance, repository: str | os.PathLike[str] | Mapping[str, str] | None,
                 image: str) -> dict[str, str]:
    if repository is None:
        if not image:
            raise TaskError(f"expected where the repository of {instance.instance_id} is: repository= (a folder, or "
                            "repo -> folder), an image= (a name such as 'sweb.eval.x86_64.{instance_id}:latest') or "
                            "an 'image' field of the instance, got none")
        return {"kind": "image", "image": image}
    if isinstance(repository, Mapping):
        if instance.repo not in repository:
            raise TaskError(f"expected a folder for repo {instance.repo!r} ({instance.instance_id}), got folders for "
                            f"{sorted(repository)}")
        folder = Path(repository[instance.repo])
    else:
        folder = Path(repository)
    if not folder.is_dir():
        raise TaskError(f"expected the repository {instance.repo!r} in a folder, got {str(folder)!r}, not a folder")
    if (folder / ".git").exists():
        folder = checkout(folder, instance.base_commit)
    return {"kind": "path", "path": str(folder.resolve())}


def checkouts_folder() -> Path:
    """Where the trees of a git repository at the instances' commits are kept:
    ``~/.cache/agentrl/swe/checkouts/<repository's folder name>-<hash of its path>/<commit>``."""
    return Path.home() / ".cache" / "agentrl" / "swe" / "checkouts"


def checkout(git_folder: str | os.PathLike[str], commit: str) -> Path:
    """The tree of the git repository ``git_folder`` at ``commit`` (``git archive``), kept once per commit.

    The working tree of ``git_folder`` is never touched, so one git directory serves instances at many commits.

    Raises:
        TaskError: ``commit`` is not a commit of the repository (with what to do).
    """
    git_folder = Path(git_folder).resolve()
    resolved = _git(git_folder, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}")
    if resolved is None:
        raise TaskError(f"expected base_commit {commit!r} to be a commit of the git repository {str(git_folder)!r}, "
                        "got none such; fetch it (git fetch) or pass a folder already at that commit")
    tag = hashlib.sha256(str(git_folder).encode()).hexdigest()[:8]
    target = checkouts_folder() / f"{git_folder.name}-{tag}" / resolved
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=target.parent))
    try:
        archive = subprocess.run(["git", "-C", str(git_folder), "archive", "--format=tar", resolved],
                                 capture_output=True, check=True, timeout=600).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(staging, filter="data")
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _git(folder: Path, *args: str) -> str | None:
    """A git command's stripped output in ``folder``; None when it fails."""
    done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=120)
    return done.stdout.strip() if done.returncode == 0 else None


def write_instances(instances: Sequence[SWEInstance], path: str | os.PathLike[str]) -> None:
    """Write instances as SWE-bench JSONL (one :meth:`SWEInstance.to_dict` a line, keys sorted)."""
    Path(path).write_text("".join(json.dumps(instance.to_dict(), sort_keys=True) + "\n" for instance in instances),
                          encoding="utf-8")
