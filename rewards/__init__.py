"""How well it was done: verifiers, shaping terms and their weighted composition.

A reward function maps ``(task, trajectory, evidence)`` to a float or a :class:`RewardResult`;
:class:`CompositeReward` sums weighted, capped terms and logs every component. Everything here
is pure and deterministic except :class:`LLMJudge`, the one term that does I/O. A term that depends
on a service raises an :class:`~tasks.errors.InfrastructureError` (:class:`JudgeUnavailableError`)
when the service does not answer; :class:`CompositeReward` passes it through unwrapped, so that the
environment ends the episode as an infrastructure episode. The math verifier runs under a
wall-clock limit in worker processes (:mod:`rewards.timelimit`), from any thread.

Example:
    >>> from rewards import CompositeReward, Term, exact_match_reward, format_reward
    >>> reward = CompositeReward([
    ...     Term("correct", exact_match_reward),
    ...     Term("format", format_reward, weight=0.1, cap=(0.0, 1.0)),
    ... ])
"""

from rewards.base import RewardFn, RewardResult
from rewards.composite import CompositeReward, Term
from rewards.data_analysis import (
    AnswerFields,
    dabench_reward,
    data_analysis_reward,
    field_matches,
    parse_answer_fields,
    psaq_reward,
    sql_result_reward,
    tables_match,
)
from rewards.errors import (
    JudgeError,
    JudgeUnavailableError,
    RewardComputationError,
    RewardConfigError,
    RewardError,
    VerifierUnavailableError,
)
from rewards.format import format_reward
from rewards.judge import JudgeBackend, JudgeCache, LLMJudge, OpenAICompatibleBackend, TransformersBackend
from rewards.length import (
    completion_length,
    dapo_overlong_penalty,
    linear_length_penalty,
    make_length_penalty,
    sigmoid_length_penalty,
)
from rewards.math import MathVerdict, math_equivalence_reward, math_equivalent, math_verdict
from rewards.swe import (
    MalformedPatchError,
    make_swe_patch_similarity_reward,
    normalize_patch,
    patch_similarity,
    swe_partial_reward,
    swe_patch_similarity_reward,
    swe_resolved_reward,
)
from rewards.text import exact_match, exact_match_reward, f1_reward, gold_answers, normalize_answer, token_f1
from rewards.tool_shaping import make_tool_shaping_reward
from rewards.unit_tests import UnitTestEvidence, make_unit_test_reward, unit_test_reward
from rewards.webshop import (
    TypeMatch,
    attribute_matched,
    attributes_matched,
    fuzzy_match,
    fuzzy_score,
    option_key,
    options_matched,
    price_ok,
    strict_option_matched,
    type_factor,
    type_match,
    type_words,
    webshop_normalize_color,
    webshop_options_matched,
    webshop_reward,
    webshop_score,
)

__all__ = [
    "AnswerFields",
    "CompositeReward",
    "JudgeBackend",
    "JudgeCache",
    "JudgeError",
    "JudgeUnavailableError",
    "LLMJudge",
    "MalformedPatchError",
    "MathVerdict",
    "OpenAICompatibleBackend",
    "RewardComputationError",
    "RewardConfigError",
    "RewardError",
    "RewardFn",
    "RewardResult",
    "Term",
    "TransformersBackend",
    "TypeMatch",
    "UnitTestEvidence",
    "VerifierUnavailableError",
    "attribute_matched",
    "attributes_matched",
    "completion_length",
    "dabench_reward",
    "dapo_overlong_penalty",
    "data_analysis_reward",
    "exact_match",
    "exact_match_reward",
    "f1_reward",
    "field_matches",
    "format_reward",
    "fuzzy_match",
    "fuzzy_score",
    "gold_answers",
    "linear_length_penalty",
    "make_length_penalty",
    "make_swe_patch_similarity_reward",
    "make_tool_shaping_reward",
    "make_unit_test_reward",
    "math_equivalence_reward",
    "math_equivalent",
    "math_verdict",
    "normalize_answer",
    "normalize_patch",
    "option_key",
    "options_matched",
    "parse_answer_fields",
    "patch_similarity",
    "price_ok",
    "psaq_reward",
    "sigmoid_length_penalty",
    "sql_result_reward",
    "strict_option_matched",
    "swe_partial_reward",
    "swe_patch_similarity_reward",
    "swe_resolved_reward",
    "tables_match",
    "token_f1",
    "type_factor",
    "type_match",
    "type_words",
    "unit_test_reward",
    "webshop_normalize_color",
    "webshop_options_matched",
    "webshop_reward",
    "webshop_score",
]
