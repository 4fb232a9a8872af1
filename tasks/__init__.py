"""What to do: task records, seeded generators, bundled benchmark splits and loaders."""

from tasks.curriculum import (
    FailureReplaySampler,
    LearnabilitySampler,
    StagedSampler,
    TaskSampler,
    UniformSampler,
    make_sampler,
)
from tasks.errors import InfrastructureError, SplitIntegrityError, TaskError, UnknownTaskError
from tasks.python_code import CODE_TEMPLATES, generate_code_task, generate_code_tasks
from tasks.python_math import MATH_TEMPLATES, generate_math_task, generate_math_tasks
from tasks.records import Document, Task, ToolCall, Trajectory, Turn, read_tasks
from tasks.relabel import (
    GoalProposer,
    RelabeledEpisode,
    Verifier,
    relabel,
)
from tasks.search import SearchWorld, generate_search_world, load_corpus
from tasks.splits import available_splits, load_split

__all__ = [
    "CODE_TEMPLATES",
    "MATH_TEMPLATES",
    "Document",
    "FailureReplaySampler",
    "GoalProposer",
    "InfrastructureError",
    "LearnabilitySampler",
    "RelabeledEpisode",
    "SearchWorld",
    "SplitIntegrityError",
    "StagedSampler",
    "Task",
    "TaskError",
    "TaskSampler",
    "ToolCall",
    "Trajectory",
    "Turn",
    "UniformSampler",
    "UnknownTaskError",
    "Verifier",
    "available_splits",
    "generate_code_task",
    "generate_code_tasks",
    "generate_math_task",
    "generate_math_tasks",
    "generate_search_world",
    "load_corpus",
    "load_split",
    "make_sampler",
    "read_tasks",
    "relabel",
]
